// The coordinator's services in-process (no port): status codes of bad
// input, list, watch and cancel.
#include "coordinator/coordinator_service.h"

#include <future>

#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "testing/in_process_server.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = MakeTestDir();
    CoordinatorOptions options;
    options.store_path = dir + "/coordinator.db";
    options.runs_dir = dir + "/runs";
    ASSERT_OK_AND_ASSIGN(core_, CoordinatorCore::Create(options));
    runs_ = std::make_unique<RunServiceImpl>(core_.get(), /*max_watchers=*/2);
    workers_ = std::make_unique<WorkerServiceImpl>(core_.get());
    InProcessServerOptions server_options;
    server_options.max_receive_message_bytes = 64 << 10;
    ASSERT_OK_AND_ASSIGN(
        server_,
        StartInProcessServer({runs_.get(), workers_.get()}, server_options));
    stub_ = RunService::NewStub(server_.channel);
  }
  void TearDown() override {
    if (server_.server) server_.server->Shutdown();
  }

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<RunServiceImpl> runs_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  InProcessServer server_;
  std::unique_ptr<RunService::Stub> stub_;
};

TEST_F(CoordinatorServiceTest, SubmitGetListCancelAndStatusCodes) {
  SubmitRunRequest request;
  request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
  SubmitRunResponse submitted;
  auto context = ContextWithDeadline(absl::Seconds(5));
  ASSERT_TRUE(stub_->SubmitRun(context.get(), request, &submitted).ok());
  EXPECT_TRUE(submitted.created());

  SubmitRunRequest bad = request;
  bad.mutable_spec()->mutable_env()->set_id("Pong-v5");
  SubmitRunResponse unused;
  context = ContextWithDeadline(absl::Seconds(5));
  grpc::Status status = stub_->SubmitRun(context.get(), bad, &unused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("spec: env.id"));

  SubmitRunRequest huge = request;
  huge.mutable_spec()->set_name(std::string(100 << 10, 'x'));
  context = ContextWithDeadline(absl::Seconds(5));
  EXPECT_EQ(stub_->SubmitRun(context.get(), huge, &unused).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  GetRunRequest get;
  get.set_run_id("run-777");
  rl::Run run;
  context = ContextWithDeadline(absl::Seconds(5));
  EXPECT_EQ(stub_->GetRun(context.get(), get, &run).error_code(),
            grpc::StatusCode::NOT_FOUND);

  ListRunsResponse list;
  context = ContextWithDeadline(absl::Seconds(5));
  ASSERT_TRUE(stub_->ListRuns(context.get(), ListRunsRequest(), &list).ok());
  ASSERT_EQ(list.runs_size(), 1);  // The rejected ones were not stored.

  // Watch, then cancel: the stream ends after the final state.
  grpc::ClientContext watch_context;
  WatchRunRequest watch;
  watch.set_run_id(submitted.run().run_id());
  auto reader = stub_->WatchRun(&watch_context, watch);
  RunEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.run().state(), QUEUED);
  CancelRunRequest cancel;
  cancel.set_run_id(submitted.run().run_id());
  context = ContextWithDeadline(absl::Seconds(5));
  ASSERT_TRUE(stub_->CancelRun(context.get(), cancel, &run).ok());
  RunState last = QUEUED;
  while (reader->Read(&event)) last = event.run().state();
  EXPECT_EQ(last, CANCELLED);
  EXPECT_TRUE(reader->Finish().ok());

  grpc::ClientContext unknown_context;
  watch.set_run_id("run-404");
  auto unknown = stub_->WatchRun(&unknown_context, watch);
  EXPECT_FALSE(unknown->Read(&event));
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A watcher that hangs up on a quiet run ends its stream: the server then
// shuts down at once instead of waiting for ever (the test would time out).
TEST_F(CoordinatorServiceTest, ACancelledIdleWatchEndsItsStream) {
  SubmitRunRequest request;
  request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
  SubmitRunResponse submitted;
  auto submit_context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->SubmitRun(submit_context.get(), request, &submitted).ok());
  WatchRunRequest watch;
  watch.set_run_id(submitted.run().run_id());
  grpc::ClientContext context;
  auto events = stub_->WatchRun(&context, watch);
  RunEvent event;
  ASSERT_TRUE(events->Read(&event));  // the current state; then quiet
  EXPECT_EQ(event.run().state(), QUEUED);
  context.TryCancel();
  EXPECT_EQ(events->Finish().error_code(), grpc::StatusCode::CANCELLED);
  server_.server->Shutdown();
  server_.server.reset();
}

TEST_F(CoordinatorServiceTest,
       WatchersBeyondTheLimitAreRefusedAndFreedOnLeaving) {
  SubmitRunRequest request;
  request.mutable_spec()->mutable_env()->set_id("CartPole-v1");
  SubmitRunResponse submitted;
  auto submit_context = ContextWithDeadline(absl::Seconds(10));
  ASSERT_TRUE(stub_->SubmitRun(submit_context.get(), request, &submitted).ok());
  WatchRunRequest watch;
  watch.set_run_id(submitted.run().run_id());
  grpc::ClientContext c1, c2, c3;
  auto w1 = stub_->WatchRun(&c1, watch);
  auto w2 = stub_->WatchRun(&c2, watch);
  RunEvent event;
  ASSERT_TRUE(w1->Read(&event));
  ASSERT_TRUE(w2->Read(&event));
  auto w3 = stub_->WatchRun(&c3, watch);
  EXPECT_FALSE(w3->Read(&event));
  const grpc::Status refused = w3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_watchers"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(runs_->refused_watchers(), 1);
  // One leaves: its place is free again (polled: the server sees the
  // cancel asynchronously).
  c1.TryCancel();
  EXPECT_EQ(w1->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return runs_->watchers() < 2; }, absl::Seconds(30),
                      absl::Milliseconds(10)));
  grpc::ClientContext c4;
  auto w4 = stub_->WatchRun(&c4, watch);
  EXPECT_TRUE(w4->Read(&event));
  c2.TryCancel();
  c4.TryCancel();
  w2->Finish();
  w4->Finish();
  EXPECT_TRUE(WaitFor([&] { return runs_->watchers() == 0; }, absl::Seconds(30),
                      absl::Milliseconds(10)));
}

// Bytes that are no request message get INVALID_ARGUMENT naming the method
// (gRPC's own answer is UNIMPLEMENTED with no message, or INTERNAL), on a
// real server started the way every process starts its servers; a valid
// request on the same connection is still served.
TEST_F(CoordinatorServiceTest, AnUnparseableRequestIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(RunningServer server,
                       StartServer({runs_.get(), workers_.get()}, {}));
  grpc::GenericStub stub(
      CreateChannel("127.0.0.1:" + std::to_string(server.port)));
  auto call = [&](const std::string& method, const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status status) { done.set_value(status); });
    return done.get_future().get();
  };
  // Field 1 (spec) says 100 bytes follow; there are 2.
  grpc::Status status = call("/rl.RunService/SubmitRun", "\x0a\x64\x01\x02");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("/rl.RunService/SubmitRun"));
  EXPECT_THAT(status.error_message(), HasSubstr("do not parse"));
  status = call("/rl.WorkerService/Heartbeat", "\xff\xff\xff");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_TRUE(call("/rl.RunService/ListRuns", "").ok());  // an empty request
  EXPECT_EQ(call("/rl.RunService/GetRun", "").error_code(),
            grpc::StatusCode::NOT_FOUND);  // parsed; no run named ""
  server.server->Shutdown();
}

TEST(StreamSlotsTest, EachCallerHasItsOwnLimit) {
  StreamSlots slots(2);
  EXPECT_TRUE(slots.Take("alice"));
  EXPECT_TRUE(slots.Take("alice"));
  EXPECT_FALSE(slots.Take("alice"));
  EXPECT_TRUE(slots.Take("bob"));  // alice's streams do not count for bob
  EXPECT_EQ(slots.refused(), 1);
  slots.Release("alice");
  EXPECT_TRUE(slots.Take("alice"));
  StreamSlots unlimited(0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(unlimited.Take("alice"));
}

}  // namespace
}  // namespace rl
