// Coordinator requests from clients and workers -> CoordinatorCore and its
// SweepManager, in-process (no gRPC) over a SQLite store in a scratch
// directory. The first byte picks the call ('s'ubmit, 'g'et, 'l'ist,
// 'c'ancel, 'r'egister, 'h'eartbeat, re'p'ort, 't'ick, s'w'eep submit,
// 'a'dd a sweep trial, cancel a sweep 'x', 'y': get and list sweeps; any
// other byte modulo 12); the rest is its request. One core for the whole
// process, so calls act on the runs, sweeps and workers earlier inputs
// made.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "coordinator/coordinator_core.h"
#include "coordinator/sweep_manager.h"
#include "fuzz/fuzz_input.h"
#include "proto/coordinator.pb.h"

namespace {

rl::CoordinatorCore* MakeCore() {
  const std::string dir = rl::MakeFuzzDir("coordinator");
  rl::CoordinatorOptions options;
  options.store_path = dir + "/coordinator.db";
  options.runs_dir = dir + "/runs";
  options.max_queued_runs_per_user = 0;
  auto core = rl::CoordinatorCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "%s\n", core.status().ToString().c_str());
    std::abort();
  }
  return core->release();
}

rl::SweepManager* MakeSweeps(rl::CoordinatorCore* core) {
  auto sweeps = rl::SweepManager::Create(core, core->store());
  if (!sweeps.ok()) {
    std::fprintf(stderr, "%s\n", sweeps.status().ToString().c_str());
    std::abort();
  }
  return sweeps->release();
}

int Call(uint8_t selector) {
  switch (selector) {
    case 's':
      return 0;
    case 'g':
      return 1;
    case 'l':
      return 2;
    case 'c':
      return 3;
    case 'r':
      return 4;
    case 'h':
      return 5;
    case 'p':
      return 6;
    case 't':
      return 7;
    case 'w':
      return 8;
    case 'a':
      return 9;
    case 'x':
      return 10;
    case 'y':
      return 11;
    default:
      return selector % 12;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static rl::CoordinatorCore* core = MakeCore();
  static rl::SweepManager* sweeps = MakeSweeps(core);
  if (size == 0) return 0;
  const int call = Call(data[0]);
  ++data;
  --size;
  switch (call) {
    case 0: {
      rl::SubmitRunRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        const auto response = core->SubmitRun(request, "fuzz");
        // RL_FUZZ_VERBOSE=1 with input files: why a submit was refused.
        if (std::getenv("RL_FUZZ_VERBOSE") != nullptr) {
          std::fprintf(stderr, "%s\n", response.status().ToString().c_str());
        }
      }
      break;
    }
    case 1: {
      rl::GetRunRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->GetRun(request.run_id()).IgnoreError();
      }
      break;
    }
    case 2: {
      rl::ListRunsRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->ListRuns(request).IgnoreError();
      }
      break;
    }
    case 3: {
      rl::CancelRunRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->CancelRun(request.run_id()).IgnoreError();
      }
      break;
    }
    case 4: {
      rl::RegisterWorkerRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->RegisterWorker(request).IgnoreError();
      }
      break;
    }
    case 5: {
      rl::HeartbeatRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->Heartbeat(request).IgnoreError();
      }
      break;
    }
    case 6: {
      rl::ReportStatusRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        core->ReportStatus(request).IgnoreError();
      }
      break;
    }
    case 8: {
      rl::SubmitSweepRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        const auto response = sweeps->Submit(request, "fuzz");
        if (std::getenv("RL_FUZZ_VERBOSE") != nullptr) {
          std::fprintf(stderr, "%s\n", response.status().ToString().c_str());
        }
      }
      break;
    }
    case 9: {
      rl::AddSweepTrialRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        sweeps->AddTrial(request).IgnoreError();
      }
      break;
    }
    case 10: {
      rl::CancelSweepRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        sweeps->Cancel(request.sweep_id()).IgnoreError();
      }
      break;
    }
    case 11: {
      rl::GetSweepRequest request;
      if (rl::ParseFuzzInput(data, size, &request)) {
        sweeps->Get(request.sweep_id()).IgnoreError();
        sweeps->List().IgnoreError();
      }
      break;
    }
    default:
      core->Tick();
      sweeps->Tick();
      core->ListWorkers();
      break;
  }
  return 0;
}
