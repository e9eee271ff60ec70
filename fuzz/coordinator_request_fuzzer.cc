// Coordinator requests from clients and workers -> CoordinatorCore, in-process
// (no gRPC) over a SQLite store in a scratch directory. The first byte picks
// the call ('s'ubmit, 'g'et, 'l'ist, 'c'ancel, 'r'egister, 'h'eartbeat,
// re'p'ort, 't'ick; any other byte modulo 8); the rest is its request. One
// core for the whole process, so calls act on the runs and workers earlier
// inputs made.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "coordinator/coordinator_core.h"
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
    default:
      return selector % 8;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static rl::CoordinatorCore* core = MakeCore();
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
    default:
      core->Tick();
      core->ListWorkers();
      break;
  }
  return 0;
}
