// The in-process server: calls reach the registered service without a
// port, and the server's message limit is the one a test sees.
#include "testing/in_process_server.h"

#include <string>

#include "common/grpc_util.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "third_party/grpc_health/health.grpc.pb.h"

namespace rl {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// Answers SERVING for "up", NOT_FOUND for anything else.
class FakeHealth final : public Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext*, const HealthCheckRequest* request,
                     HealthCheckResponse* response) override {
    if (request->service() != "up") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, request->service());
    }
    response->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

grpc::Status Check(Health::Stub& stub, const std::string& service,
                   HealthCheckResponse* response) {
  HealthCheckRequest request;
  request.set_service(service);
  auto context = ContextWithDeadline(absl::Seconds(30));
  return stub.Check(context.get(), request, response);
}

TEST(InProcessServerTest, CallsReachTheService) {
  FakeHealth service;
  ASSERT_OK_AND_ASSIGN(InProcessServer server,
                       StartInProcessServer({&service}));
  auto stub = Health::NewStub(server.channel);
  HealthCheckResponse response;
  ASSERT_TRUE(Check(*stub, "up", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  const grpc::Status missing = Check(*stub, "down", &response);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message(), "down");
  server.server->Shutdown();
}

TEST(InProcessServerTest, TheServersReceiveLimitApplies) {
  FakeHealth service;
  InProcessServerOptions options;
  options.max_receive_message_bytes = 64;
  ASSERT_OK_AND_ASSIGN(InProcessServer server,
                       StartInProcessServer({&service}, options));
  auto stub = Health::NewStub(server.channel);
  HealthCheckResponse response;
  EXPECT_TRUE(Check(*stub, "up", &response).ok());
  EXPECT_EQ(Check(*stub, std::string(1000, 'x'), &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  server.server->Shutdown();
}

}  // namespace
}  // namespace rl
