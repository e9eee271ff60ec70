// The telemetry process without flags, on loopback ports: a refusal by one of
// the limits shows in its own /metrics as telemetry_refused_total{reason}.
#include "telemetry/telemetry_server.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/telemetry.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// The value of the sample `series` (name and labels as exported) in a
// /metrics body; -1 if absent.
double Sample(const std::string& body, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (absl::ConsumePrefix(&line, series + " ")) {
      double value = -1;
      return absl::SimpleAtod(line, &value) ? value : -1;
    }
  }
  return -1;
}

TEST(TelemetryServerTest, RefusalsAreCountedInMetrics) {
  const std::string dir = MakeTestDir();
  TelemetryServerOptions options;
  options.port = 0;
  options.http_port = 0;
  options.core.store_path = dir + "/telemetry.db";
  options.core.tensorboard_dir = dir + "/tb";
  options.core.max_watchers = 0;  // every Watch is refused
  ASSERT_OK_AND_ASSIGN(auto server, TelemetryServer::Create(options));

  auto stub = TelemetryService::NewStub(
      CreateChannel(absl::StrCat("127.0.0.1:", server->port())));
  for (int i = 0; i < 2; ++i) {
    auto context = ContextWithDeadline(absl::Seconds(60));
    WatchRequest request;
    request.set_run_id("run");
    auto reader = stub->Watch(context.get(), request);
    MetricPoint point;
    EXPECT_FALSE(reader->Read(&point));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("(max_watchers)"));
  }

  httplib::Client http("127.0.0.1", server->http_port());
  http.set_read_timeout(60, 0);
  httplib::Result result = http.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  ASSERT_EQ(result->status, 200);
  const std::string& body = result->body;
  EXPECT_EQ(Sample(body, "telemetry_refused_total{reason=\"watchers\"}"), 2)
      << body;
  for (const char* reason :
       {"ingest_budget", "watch_backlog", "series_per_run", "runs"}) {
    EXPECT_EQ(Sample(body, absl::StrCat("telemetry_refused_total{reason=\"",
                                        reason, "\"}")),
              0)
        << reason;
  }
  EXPECT_EQ(Sample(body, "telemetry_watch_backlog_bytes"), 0);
  EXPECT_EQ(Sample(body, "telemetry_in_flight_batches"), 0);
  EXPECT_EQ(Sample(body, "telemetry_open_event_files"), 0);
}

}  // namespace
}  // namespace rl
