#include "telemetry/http_api.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "telemetry/http_api.pb.h"
#include "telemetry/web/web_assets.h"

namespace rl {
namespace {

constexpr char kJsonType[] = "application/json";

void Reply(int status, const google::protobuf::Message& message,
           httplib::Response* response) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!printed.ok()) {
    // Only invalid UTF-8 in a string field gets here; say so rather than
    // send half a document.
    response->status = 500;
    response->set_content(R"({"error":"reply is not valid JSON text"})",
                          kJsonType);
    return;
  }
  response->status = status;
  response->set_content(json, kJsonType);
}

void Error(int status, const std::string& message,
           httplib::Response* response) {
  web::ApiError error;
  error.set_error(message);
  Reply(status, error, response);
}

void ErrorFromStatus(const absl::Status& s, httplib::Response* response) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return Error(404, std::string(s.message()), response);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return Error(400, std::string(s.message()), response);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return Error(503, std::string(s.message()), response);
    default:
      return Error(500, std::string(s.message()), response);
  }
}

void Runs(TelemetryCore* core, const RunStateSource& run_states,
          httplib::Response* response) {
  std::map<std::string, std::string> states;
  if (run_states) states = run_states();
  web::RunList list;
  std::set<std::string> listed;
  for (const RunSummary& r : core->ListRuns()) {
    web::RunInfo* run = list.add_runs();
    run->set_run_id(r.run_id);
    auto it = states.find(r.run_id);
    if (it != states.end()) run->set_state(it->second);
    run->set_num_series(r.num_series);
    run->set_num_points(r.num_points);
    run->set_last_step(r.last_step);
    run->set_last_wall_time_ns(r.last_wall_time_ns);
    listed.insert(r.run_id);
  }
  // Runs the coordinator knows that have no metrics yet.
  for (const auto& [run_id, state] : states) {
    if (listed.count(run_id)) continue;
    web::RunInfo* run = list.add_runs();
    run->set_run_id(run_id);
    run->set_state(state);
  }
  Reply(200, list, response);
}

void SeriesOfRun(TelemetryCore* core, const httplib::Request& req,
                 httplib::Response* response) {
  const std::string run = req.get_param_value("run");
  if (run.empty()) return Error(400, "missing parameter: run", response);
  ListSeriesRequest request;
  request.set_run_id(run);
  const ListSeriesResponse series = core->ListSeries(request);
  if (series.series().empty()) {
    return Error(404, absl::StrCat("run ", run, " has no metrics"), response);
  }
  Reply(200, series, response);
}

void Query(TelemetryCore* core, const httplib::Request& req,
           httplib::Response* response) {
  QueryRequest request;
  request.set_run_id(req.get_param_value("run"));
  if (request.run_id().empty()) {
    return Error(400, "missing parameter: run", response);
  }
  const std::string name = req.get_param_value("name");
  if (name.empty()) return Error(400, "missing parameter: name", response);
  request.add_names(name);
  int buckets = 200;
  const std::string buckets_param = req.get_param_value("buckets");
  if (!buckets_param.empty() && !absl::SimpleAtoi(buckets_param, &buckets)) {
    return Error(400, "parameter buckets: not an integer", response);
  }
  if (buckets < 1 || buckets > 10000) {
    return Error(400, "parameter buckets: outside [1, 10000]", response);
  }
  request.set_max_buckets(buckets);
  // One label key, or several separated by commas ("actor,rank").
  for (absl::string_view key : absl::StrSplit(req.get_param_value("aggregate"),
                                              ',', absl::SkipEmpty())) {
    request.add_aggregate_labels(std::string(key));
    request.set_aggregation(AGGREGATE_MEAN);
  }
  absl::StatusOr<QueryResponse> result = core->Query(request);
  if (!result.ok()) return ErrorFromStatus(result.status(), response);
  Reply(200, *result, response);
}

void Sweeps(const SweepSource& sweeps, httplib::Response* response) {
  Reply(200, sweeps ? sweeps() : ListSweepsResponse(), response);
}

void RunOfCoordinator(const RunSource& source, const httplib::Request& req,
                      httplib::Response* response) {
  const std::string run = req.get_param_value("run");
  if (run.empty()) return Error(400, "missing parameter: run", response);
  if (!source) {
    return Error(503,
                 "no coordinator known to this telemetry service "
                 "(telemetry_main --coordinator)",
                 response);
  }
  absl::StatusOr<Run> found = source(run);
  if (!found.ok()) return ErrorFromStatus(found.status(), response);
  Reply(200, *found, response);
}

}  // namespace

void AddTelemetryHttpRoutes(TelemetryCore* core, RunStateSource run_states,
                            httplib::Server* server, SweepSource sweeps,
                            RunSource run) {
  // Patterns are regular expressions matched against the whole path.
  server->Get(R"(/|/index\.html)", [](const httplib::Request&,
                                      httplib::Response& response) {
    response.set_content(std::string(IndexHtml()), "text/html; charset=utf-8");
  });
  // The page's script: its own file, so the CSP needs no inline script.
  server->Get(R"(/index\.js)",
              [](const httplib::Request&, httplib::Response& response) {
                response.set_content(std::string(IndexJs()),
                                     "text/javascript; charset=utf-8");
              });
  server->Get("/api/runs",
              [core, run_states = std::move(run_states)](
                  const httplib::Request&, httplib::Response& response) {
                Runs(core, run_states, &response);
              });
  server->Get("/api/series", [core](const httplib::Request& request,
                                    httplib::Response& response) {
    SeriesOfRun(core, request, &response);
  });
  server->Get("/api/query", [core](const httplib::Request& request,
                                   httplib::Response& response) {
    Query(core, request, &response);
  });
  server->Get("/api/sweeps",
              [sweeps = std::move(sweeps)](const httplib::Request&,
                                           httplib::Response& response) {
                Sweeps(sweeps, &response);
              });
  server->Get("/api/run",
              [run = std::move(run)](const httplib::Request& request,
                                     httplib::Response& response) {
                RunOfCoordinator(run, request, &response);
              });
}

}  // namespace rl
