#include "testing/embedded_coordinator.h"

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/security.h"
#include "runspec/run_spec.h"
#include "testing/wait_for.h"

namespace rl {

void UseLocalAdminToken(const std::string& runs_dir) {
  SecurityOptions options;
  options.token_file = runs_dir + "/auth/admin.token";
  absl::StatusOr<std::shared_ptr<const Security>> security =
      Security::Load(options);
  ASSERT_TRUE(security.ok()) << security.status();
  Security::SetProcessDefault(*security);
}

void EmbeddedCoordinatorTest::StartCoordinator(const std::string& workers,
                                               std::vector<std::string> flags,
                                               int port) {
  const std::string port_file = Path(absl::StrCat("port", ++starts_));
  std::vector<std::string> args = {
      absl::StrCat("--port=", port), "--port_file=" + port_file,
      "--store=" + Path("c.db"),     "--runs_dir=" + Path("runs"),
      "--log_dir=" + Path("logs"),   "--local_workers=" + workers};
  args.insert(args.end(), flags.begin(), flags.end());
  coordinator_ = Start("coordinator/coordinator_main", std::move(args),
                       absl::StrCat("coordinator.", starts_, ".log"));
  port_ = WaitForPort(*coordinator_, port_file);
  ASSERT_GT(port_, 0);
  UseLocalAdminToken(Path("runs"));
  stub_ = RunService::NewStub(CreateChannel(absl::StrCat("127.0.0.1:", port_)));
}

std::optional<int> EmbeddedCoordinatorTest::StopCoordinator(int signal) {
  return Stop(*coordinator_, signal);
}

rl::Run EmbeddedCoordinatorTest::Submit(const std::string& yaml,
                                        const std::string& key) {
  auto spec = ParseRunSpec(yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  SubmitRunRequest request;
  if (spec.ok()) *request.mutable_spec() = *spec;
  request.set_idempotency_key(key);
  SubmitRunResponse response;
  auto context = ContextWithDeadline(absl::Seconds(10));
  const grpc::Status status =
      stub_->SubmitRun(context.get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.run();
}

rl::Run EmbeddedCoordinatorTest::Get(const std::string& run_id) {
  GetRunRequest request;
  request.set_run_id(run_id);
  rl::Run run;
  auto context = ContextWithDeadline(absl::Seconds(10));
  stub_->GetRun(context.get(), request, &run);  // not there yet: empty
  return run;
}

rl::Run EmbeddedCoordinatorTest::WaitForRun(
    const std::string& run_id, const std::function<bool(const rl::Run&)>& done,
    absl::Duration timeout) {
  rl::Run run;
  WaitFor(
      [&] {
        run = Get(run_id);
        return done(run);
      },
      timeout, absl::Milliseconds(100));
  return run;
}

rl::Run EmbeddedCoordinatorTest::WaitForEnd(const std::string& run_id,
                                            absl::Duration timeout) {
  return WaitForRun(
      run_id,
      [](const rl::Run& r) {
        return r.state() == SUCCEEDED || r.state() == FAILED ||
               r.state() == CANCELLED;
      },
      timeout);
}

ListWorkersResponse EmbeddedCoordinatorTest::Workers() {
  ListWorkersResponse workers;
  auto context = ContextWithDeadline(absl::Seconds(10));
  stub_->ListWorkers(context.get(), ListWorkersRequest(), &workers);
  return workers;
}

std::string EmbeddedCoordinatorTest::CoordinatorLog() const {
  std::ifstream in(Path(absl::StrCat("coordinator.", starts_, ".log")));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace rl
