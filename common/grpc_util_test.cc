// LibTorch, protobuf and a gRPC server in one process: a server started
// through the project's helper answers grpc.health.v1, and streams policy
// weights encoded from torch tensors that the client decodes bit-exactly.
#include "common/grpc_util.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "common/grpc_status.h"
#include "common/tensor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/learner.grpc.pb.h"
#include "testing/status_matchers.h"
#include "third_party/grpc_health/health.grpc.pb.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Serves versions 1..3 of a tiny "policy" made with LibTorch.
class TorchPolicyService final : public LearnerService::Service {
 public:
  grpc::Status SubscribePolicy(
      grpc::ServerContext*, const SubscribePolicyRequest* request,
      grpc::ServerWriter<PolicyUpdate>* writer) override {
    for (int64_t version = request->have_version() + 1; version <= 3;
         ++version) {
      PolicyUpdate update;
      update.set_version(version);
      NamedTensor* weight = update.add_parameters();
      weight->set_name("fc.weight");
      const absl::Status status =
          EncodeTensor(Weights(version), weight->mutable_tensor());
      if (!status.ok()) return ToGrpcStatus(status);
      writer->Write(update);
    }
    return grpc::Status::OK;
  }

  // A generator of its own per call: the server's thread and the test's
  // call this at the same time, and seeding the global one raced (CI saw
  // the weights of version 2 differ once).
  static at::Tensor Weights(int64_t version) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(version);
    return torch::randn({3, 4}, generator) * version;
  }
};

TEST(GrpcUtilTest, TorchTensorsStreamThroughARealServer) {
  TorchPolicyService service;
  auto server = StartServer({&service}, ServerOptions{});
  ASSERT_OK(server);
  ASSERT_GT(server->port, 0);
  auto channel = CreateChannel("127.0.0.1:" + std::to_string(server->port));

  auto stub = LearnerService::NewStub(channel);
  SubscribePolicyRequest request;
  request.set_have_version(1);
  auto context = ContextWithDeadline(absl::Seconds(10));
  auto reader = stub->SubscribePolicy(context.get(), request);
  PolicyUpdate update;
  std::vector<int64_t> versions;
  while (reader->Read(&update)) {
    versions.push_back(update.version());
    auto weights = DecodeTensor(update.parameters(0).tensor());
    ASSERT_OK(weights);
    EXPECT_TRUE(
        torch::equal(*weights, TorchPolicyService::Weights(update.version())));
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(versions, (std::vector<int64_t>{2, 3}));
  server->server->Shutdown();
}

TEST(GrpcUtilTest, HealthCheckFollowsServingState) {
  TorchPolicyService service;
  auto server = StartServer({&service}, ServerOptions{});
  ASSERT_OK(server);
  auto health = grpc::health::v1::Health::NewStub(
      CreateChannel("127.0.0.1:" + std::to_string(server->port)));

  auto check = [&](const std::string& name) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    auto context = ContextWithDeadline(absl::Seconds(10));
    const grpc::Status status =
        health->Check(context.get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.status();
  };
  EXPECT_EQ(check(""), grpc::health::v1::HealthCheckResponse::SERVING);
  server->SetServing(false);
  EXPECT_EQ(check(""), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  server->server->Shutdown();
}

TEST(GrpcUtilTest, BusyPortIsUnavailable) {
  TorchPolicyService service;
  auto first = StartServer({&service}, ServerOptions{});
  ASSERT_OK(first);
  TorchPolicyService other;
  ServerOptions options;
  options.address = "127.0.0.1:" + std::to_string(first->port);
  auto second = StartServer({&other}, options);
  EXPECT_THAT(second, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr(options.address)));
  first->server->Shutdown();
}

TEST(GrpcUtilTest, MessageLimitIsEnforced) {
  TorchPolicyService service;
  ServerOptions options;
  options.max_send_message_bytes = 16;  // Smaller than one policy update.
  auto server = StartServer({&service}, options);
  ASSERT_OK(server);
  auto stub = LearnerService::NewStub(
      CreateChannel("127.0.0.1:" + std::to_string(server->port)));
  auto context = ContextWithDeadline(absl::Seconds(10));
  auto reader = stub->SubscribePolicy(context.get(), SubscribePolicyRequest());
  PolicyUpdate update;
  EXPECT_FALSE(reader->Read(&update));
  EXPECT_EQ(reader->Finish().error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  server->server->Shutdown();
}

}  // namespace
}  // namespace rl
