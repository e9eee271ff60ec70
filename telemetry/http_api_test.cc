// The JSON API over a real core and a loopback HTTP endpoint: replies are
// the proto messages in the proto3 JSON mapping (read back with protobuf's
// JSON parser), and bad parameters get {"error": ...} with the right status.
#include "telemetry/http_api.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "telemetry/client/http_endpoint.h"
#include "telemetry/http_api.pb.h"
#include "telemetry/telemetry_core.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

constexpr char kRun[] = "run-a";

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TelemetryCoreOptions options;
    options.store_path = MakeTestDir() + "/telemetry.db";
    ASSERT_OK_AND_ASSIGN(core_, TelemetryCore::Create(options));

    auto batch = std::make_shared<MetricBatch>();
    batch->set_sequence_number(1);
    batch->set_run_id(kRun);
    batch->set_source("test");
    batch->set_incarnation(1);
    for (int step = 0; step < 4; ++step) {
      MetricPoint* p = batch->add_points();
      p->set_name("learner/loss");
      p->set_step(step);
      p->set_wall_time_ns(1'700'000'000'000'000'000 + step);
      p->set_value(step == 2 ? std::numeric_limits<double>::quiet_NaN()
                             : 1.5 * step);
      (*p->mutable_labels())["who"] = "say \"hi\"";
    }
    absl::Notification stored;
    absl::Status outcome;
    ASSERT_OK(core_->Submit(batch, [&](absl::Status s) {
      outcome = s;
      stored.Notify();
    }));
    ASSERT_TRUE(stored.WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_OK(outcome);

    ASSERT_OK_AND_ASSIGN(
        endpoint_,
        HttpEndpoint::Start(
            "127.0.0.1", 0, nullptr, [this](httplib::Server* server) {
              AddTelemetryHttpRoutes(
                  core_.get(),
                  [] {
                    return std::map<std::string, std::string>{
                        {kRun, "RUNNING"}, {"run-queued", "QUEUED"}};
                  },
                  server);
            }));
    client_ = std::make_unique<httplib::Client>("127.0.0.1", endpoint_->port());
  }

  // Status and body of GET `path`; status 0 if the request failed.
  std::pair<int, std::string> Get(const std::string& path) {
    httplib::Result result = client_->Get(path.c_str());
    if (!result) return {0, ""};
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json")
        << path;
    return {result->status, result->body};
  }

  template <typename Message>
  Message Parse(const std::string& json) {
    Message message;
    const auto parsed =
        google::protobuf::util::JsonStringToMessage(json, &message);
    EXPECT_TRUE(parsed.ok()) << json;
    return message;
  }

  std::unique_ptr<TelemetryCore> core_;
  std::unique_ptr<HttpEndpoint> endpoint_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpApiTest, RunsIncludeCoordinatorOnlyRunsWithEveryField) {
  const auto [status, body] = Get("/api/runs");
  ASSERT_EQ(status, 200) << body;
  // int64 as strings; zeros printed too.
  EXPECT_THAT(body, HasSubstr("\"num_points\":\"4\""));
  EXPECT_THAT(body,
              HasSubstr("{\"run_id\":\"run-queued\",\"state\":\"QUEUED\","
                        "\"num_series\":\"0\",\"num_points\":\"0\","
                        "\"last_step\":\"0\",\"last_wall_time_ns\":\"0\"}"));
  const web::RunList runs = Parse<web::RunList>(body);
  ASSERT_EQ(runs.runs_size(), 2);
  EXPECT_EQ(runs.runs(0).run_id(), kRun);
  EXPECT_EQ(runs.runs(0).state(), "RUNNING");
  EXPECT_EQ(runs.runs(0).num_series(), 1);
  EXPECT_EQ(runs.runs(0).last_step(), 3);
  EXPECT_EQ(runs.runs(0).last_wall_time_ns(), 1'700'000'000'000'000'003);
}

TEST_F(HttpApiTest, SeriesIsTheListSeriesResponse) {
  const auto [status, body] = Get("/api/series?run=run-a");
  ASSERT_EQ(status, 200) << body;
  // Label values are escaped by the JSON printer.
  EXPECT_THAT(body, HasSubstr(R"("labels":{"who":"say \"hi\""})"));
  const ListSeriesResponse series = Parse<ListSeriesResponse>(body);
  ASSERT_EQ(series.series_size(), 1);
  EXPECT_EQ(series.series(0).name(), "learner/loss");
  EXPECT_EQ(series.series(0).num_points(), 4);
  EXPECT_EQ(series.series(0).labels().at("who"), "say \"hi\"");
}

TEST_F(HttpApiTest, QueryWritesNonFiniteNumbersAsProto3JsonStrings) {
  const auto [status, body] =
      Get("/api/query?run=run-a&name=learner%2Floss&buckets=4");
  ASSERT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr("\"mean\":\"NaN\""));
  const QueryResponse response = Parse<QueryResponse>(body);
  ASSERT_EQ(response.series_size(), 1);
  ASSERT_EQ(response.series(0).buckets_size(), 4);
  const Bucket& nan_bucket = response.series(0).buckets(2);
  EXPECT_EQ(nan_bucket.min_step(), 2);
  EXPECT_EQ(nan_bucket.count(), 1);
  EXPECT_TRUE(std::isnan(nan_bucket.mean()));
  EXPECT_EQ(response.series(0).buckets(3).mean(), 4.5);

  const auto [agg_status, agg_body] =
      Get("/api/query?run=run-a&name=learner/loss&buckets=1&aggregate=who");
  ASSERT_EQ(agg_status, 200) << agg_body;
  const QueryResponse merged = Parse<QueryResponse>(agg_body);
  ASSERT_EQ(merged.series_size(), 1);
  EXPECT_EQ(merged.series(0).buckets(0).count(), 4);
}

TEST_F(HttpApiTest, BadParametersAreErrorsNamingTheProblem) {
  const std::map<std::string, std::pair<int, std::string>> cases = {
      {"/api/series", {400, "missing parameter: run"}},
      {"/api/series?run=nope", {404, "run nope has no metrics"}},
      {"/api/query?name=x", {400, "missing parameter: run"}},
      {"/api/query?run=run-a", {400, "missing parameter: name"}},
      {"/api/query?run=run-a&name=x&buckets=abc",
       {400, "parameter buckets: not an integer"}},
      {"/api/query?run=run-a&name=x&buckets=10001",
       {400, "parameter buckets: outside [1, 10000]"}},
      {"/api/query?run=run-a&name=x&buckets=99999999999999999999",
       {400, "parameter buckets: not an integer"}},
  };
  for (const auto& [path, expected] : cases) {
    const auto [status, body] = Get(path);
    EXPECT_EQ(status, expected.first) << path << ": " << body;
    EXPECT_EQ(Parse<web::ApiError>(body).error(), expected.second) << path;
  }
  const auto [status, body] = Get("/api/query?run=nope&name=x");
  EXPECT_EQ(status, 404) << body;
  EXPECT_THAT(Parse<web::ApiError>(body).error(), HasSubstr("nope"));
}

// A merged query holds a bucket array per series it selects: 10,000
// buckets over 10,000 label sets was about 6.4 GB for one request.
TEST_F(HttpApiTest, AQueryOfTooManyBucketsIsRefusedNamingThem) {
  auto batch = std::make_shared<MetricBatch>();
  batch->set_sequence_number(2);
  batch->set_run_id(kRun);
  batch->set_source("test");
  batch->set_incarnation(1);
  for (int actor = 0; actor < 101; ++actor) {
    MetricPoint* p = batch->add_points();
    p->set_name("actor/steps");
    p->set_step(1);
    p->set_wall_time_ns(1'700'000'000'000'000'000);
    p->set_value(actor);
    (*p->mutable_labels())["actor"] = std::to_string(actor);
  }
  absl::Notification stored;
  absl::Status outcome;
  ASSERT_OK(core_->Submit(batch, [&](absl::Status s) {
    outcome = s;
    stored.Notify();
  }));
  ASSERT_TRUE(stored.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_OK(outcome);
  const auto [refused, error] =
      Get(std::string("/api/query?run=") + kRun +
          "&name=actor/steps&buckets=10000&aggregate=actor");
  EXPECT_EQ(refused, 400);
  EXPECT_THAT(Parse<web::ApiError>(error).error(),
              HasSubstr("query selects 101 series at 10000 buckets each"));
  const auto [ok, body] = Get(std::string("/api/query?run=") + kRun +
                              "&name=actor/steps&buckets=100&aggregate=actor");
  EXPECT_EQ(ok, 200);
  const QueryResponse merged = Parse<QueryResponse>(body);
  ASSERT_EQ(merged.series_size(), 1);
  ASSERT_EQ(merged.series(0).buckets_size(), 1);
  EXPECT_DOUBLE_EQ(merged.series(0).buckets(0).mean(), 50);
}

TEST_F(HttpApiTest, PageIsServedAtTheRootAndIndexHtml) {
  for (const char* path : {"/", "/index.html"}) {
    httplib::Result result = client_->Get(path);
    ASSERT_TRUE(result) << path;
    EXPECT_EQ(result->status, 200);
    EXPECT_EQ(result->get_header_value("Content-Type"),
              "text/html; charset=utf-8");
    EXPECT_THAT(result->body, HasSubstr("</html>"));
  }
  httplib::Result wrong = client_->Get("/indexXhtml");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 404);
}

}  // namespace
}  // namespace rl
