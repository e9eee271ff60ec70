// A GoogleTest fixture for the embedded system as real processes: a
// coordinator_main that spawns and supervises its own local learners and
// actors, driven through RunService over gRPC (tests/).
//
//   class GangTest : public EmbeddedCoordinatorTest {};
//   TEST_F(GangTest, Trains) {
//     StartCoordinator("learners=2,actors=2");
//     const rl::Run run = Submit(yaml);
//     EXPECT_EQ(WaitForEnd(run.run_id()).state(), SUCCEEDED);
//   }
#ifndef RL_TESTING_EMBEDDED_COORDINATOR_H_
#define RL_TESTING_EMBEDDED_COORDINATOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"
#include "testing/process_fixture.h"

namespace rl {

// Makes the admin token that an embedded coordinator wrote into
// `runs_dir`/auth the one this process sends on every call.
void UseLocalAdminToken(const std::string& runs_dir);

class EmbeddedCoordinatorTest : public ProcessTest {
 protected:
  // Starts coordinator/coordinator_main on `port` (0: any) with
  // --local_workers=`workers` (e.g. "learners=1,actors=2"), its store, runs
  // and logs in the test's directory (kept across restarts), then `flags`;
  // waits for its port. Its log is coordinator.N.log for the N-th start.
  void StartCoordinator(const std::string& workers,
                        std::vector<std::string> flags = {}, int port = 0);
  // Stops the latest coordinator with `signal`; its exit code.
  std::optional<int> StopCoordinator(int signal);

  // Submits the run file text `yaml`; the run as accepted.
  rl::Run Submit(const std::string& yaml, const std::string& key = "");
  rl::Run Get(const std::string& run_id);
  // Polls until `done(run)` or `timeout`; the last run seen.
  rl::Run WaitForRun(const std::string& run_id,
                     const std::function<bool(const rl::Run&)>& done,
                     absl::Duration timeout = absl::Seconds(300));
  // Until SUCCEEDED, FAILED or CANCELLED.
  rl::Run WaitForEnd(const std::string& run_id,
                     absl::Duration timeout = absl::Seconds(400));
  ListWorkersResponse Workers();
  // The latest coordinator's log.
  std::string CoordinatorLog() const;

  int port_ = 0;
  Subprocess* coordinator_ = nullptr;  // the latest; owned by the fixture
  std::unique_ptr<RunService::Stub> stub_;

 private:
  int starts_ = 0;
};

}  // namespace rl

#endif  // RL_TESTING_EMBEDDED_COORDINATOR_H_
