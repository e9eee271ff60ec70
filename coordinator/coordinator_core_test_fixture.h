// The fixture of the coordinator core's tests (coordinator_core_test.cc,
// coordinator_recovery_test.cc, coordinator_workers_test.cc): a real
// CoordinatorCore and SQLite store on an injected clock, its workers
// registered and heartbeating by hand (no processes).
#ifndef RL_COORDINATOR_COORDINATOR_CORE_TEST_FIXTURE_H_
#define RL_COORDINATOR_COORDINATOR_CORE_TEST_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/coordinator_core.h"
#include "coordinator/run_store.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {

class CoordinatorCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    options_.store_path = dir + "/coordinator.db";
    options_.runs_dir = dir + "/runs";
    options_.clock = [this] { return now_; };
    core_ = Make();
  }

  std::unique_ptr<CoordinatorCore> Make() {
    auto core = CoordinatorCore::Create(options_);
    EXPECT_OK(core);
    return core.ok() ? std::move(*core) : nullptr;
  }

  SubmitRunRequest Request(const std::string& key = "") {
    SubmitRunRequest request;
    request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
    request.mutable_spec()->set_name("cartpole");
    request.set_idempotency_key(key);
    return request;
  }

  int64_t Register(CoordinatorCore& core, const std::string& name,
                   WorkerRole role, const Assignment& current = {},
                   int64_t memory_bytes = 0) {
    RegisterWorkerRequest request;
    request.set_worker_name(name);
    request.mutable_capabilities()->set_role(role);
    request.mutable_capabilities()->set_memory_bytes(memory_bytes);
    if (role == LEARNER) request.set_address("127.0.0.1:5000");
    *request.mutable_current_assignment() = current;
    request.set_worker_key(keys_[name]);
    auto response = core.RegisterWorker(request);
    EXPECT_OK(response);
    if (response.ok()) keys_[name] = response->worker_key();
    return response.ok() ? response->lease().epoch() : -1;
  }

  Assignment Beat(CoordinatorCore& core, const std::string& name,
                  int64_t epoch) {
    HeartbeatRequest request;
    request.set_worker_id(name);
    request.set_worker_key(keys_[name]);
    request.set_lease_epoch(epoch);
    auto response = core.Heartbeat(request);
    EXPECT_OK(response);
    return response.ok() ? response->assignment() : Assignment();
  }

  // The reasons of run `id`'s transitions, oldest first (read from the
  // store beside the core, as an operator would).
  std::vector<std::string> Reasons(const std::string& id) {
    std::vector<std::string> reasons;
    auto store = RunStore::Open(options_.store_path, 0);
    EXPECT_OK(store);
    if (!store.ok()) return reasons;
    auto events = (*store)->Events(id);
    EXPECT_OK(events);
    if (!events.ok()) return reasons;
    for (const RunEventRecord& e : *events) reasons.push_back(e.reason);
    return reasons;
  }

  // Each worker's key, as a worker process keeps it.
  std::map<std::string, std::string> keys_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorCore> core_;
};

}  // namespace rl

#endif  // RL_COORDINATOR_COORDINATOR_CORE_TEST_FIXTURE_H_
