#include "telemetry/http_api.h"

#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_quote.h"
#include "telemetry/web/web_assets.h"

namespace rl {
namespace {

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.17g", v);
}

template <typename Map>
std::string JsonLabels(const Map& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : sorted) {
    absl::StrAppend(&out, first ? "" : ",", JsonQuote(k), ":", JsonQuote(v));
    first = false;
  }
  return out + "}";
}

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

HttpResponse Error(int status, absl::string_view message) {
  return Json(status, absl::StrCat("{\"error\":", JsonQuote(message), "}"));
}

HttpResponse FromStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return Error(404, s.message());
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
      return Error(400, s.message());
    default:
      return Error(500, s.message());
  }
}

std::string Param(const HttpRequest& r, const std::string& key) {
  auto it = r.query.find(key);
  return it == r.query.end() ? "" : it->second;
}

}  // namespace

std::map<std::string, HttpHandler> MakeTelemetryHttpRoutes(
    TelemetryCore* core, RunStateSource run_states) {
  std::map<std::string, HttpHandler> routes;
  HttpHandler index = [](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(IndexHtml());
    return r;
  };
  routes["/"] = index;
  routes["/index.html"] = index;

  routes["/api/runs"] = [core, run_states](const HttpRequest&) {
    std::map<std::string, std::string> states;
    if (run_states) states = run_states();
    std::string body = "{\"runs\":[";
    std::set<std::string> listed;
    bool first = true;
    for (const RunSummary& r : core->ListRuns()) {
      auto it = states.find(r.run_id);
      absl::StrAppend(
          &body, first ? "" : ",", "{\"run_id\":", JsonQuote(r.run_id),
          ",\"state\":", JsonQuote(it == states.end() ? "" : it->second),
          ",\"num_series\":", r.num_series, ",\"num_points\":", r.num_points,
          ",\"last_step\":", r.last_step,
          ",\"last_wall_time_ns\":", r.last_wall_time_ns, "}");
      listed.insert(r.run_id);
      first = false;
    }
    // Runs the coordinator knows that have no metrics yet.
    for (const auto& [run, state] : states) {
      if (listed.count(run)) continue;
      absl::StrAppend(&body, first ? "" : ",", "{\"run_id\":", JsonQuote(run),
                      ",\"state\":", JsonQuote(state),
                      ",\"num_series\":0,\"num_points\":0,\"last_step\":0,"
                      "\"last_wall_time_ns\":0}");
      first = false;
    }
    return Json(200, body + "]}");
  };

  routes["/api/series"] = [core](const HttpRequest& req) {
    const std::string run = Param(req, "run");
    if (run.empty()) return Error(400, "missing parameter: run");
    ListSeriesRequest request;
    request.set_run_id(run);
    const ListSeriesResponse response = core->ListSeries(request);
    if (response.series().empty()) {
      return Error(404, absl::StrCat("run ", run, " has no metrics"));
    }
    std::string body = "{\"series\":[";
    bool first = true;
    for (const SeriesInfo& s : response.series()) {
      absl::StrAppend(&body, first ? "" : ",",
                      "{\"name\":", JsonQuote(s.name()),
                      ",\"labels\":", JsonLabels(s.labels()),
                      ",\"num_points\":", s.num_points(),
                      ",\"last_step\":", s.last_step(), "}");
      first = false;
    }
    return Json(200, body + "]}");
  };

  routes["/api/query"] = [core](const HttpRequest& req) {
    QueryRequest request;
    request.set_run_id(Param(req, "run"));
    if (request.run_id().empty()) return Error(400, "missing parameter: run");
    const std::string name = Param(req, "name");
    if (name.empty()) return Error(400, "missing parameter: name");
    request.add_names(name);
    int buckets = 200;
    if (!Param(req, "buckets").empty() &&
        !absl::SimpleAtoi(Param(req, "buckets"), &buckets)) {
      return Error(400, "parameter buckets: not an integer");
    }
    if (buckets < 1 || buckets > 10000) {
      return Error(400, "parameter buckets: outside [1, 10000]");
    }
    request.set_max_buckets(buckets);
    if (!Param(req, "aggregate").empty()) {
      request.add_aggregate_labels(Param(req, "aggregate"));
      request.set_aggregation(AGGREGATE_MEAN);
    }
    absl::StatusOr<QueryResponse> response = core->Query(request);
    if (!response.ok()) return FromStatus(response.status());
    std::string body = "{\"series\":[";
    bool first = true;
    for (const Series& s : response->series()) {
      absl::StrAppend(&body, first ? "" : ",",
                      "{\"name\":", JsonQuote(s.name()),
                      ",\"labels\":", JsonLabels(s.labels()), ",\"buckets\":[");
      bool first_bucket = true;
      for (const Bucket& b : s.buckets()) {
        absl::StrAppend(
            &body, first_bucket ? "" : ",", "{\"min_step\":", b.min_step(),
            ",\"max_step\":", b.max_step(), ",\"count\":", b.count(),
            ",\"min\":", JsonNumber(b.min()), ",\"max\":", JsonNumber(b.max()),
            ",\"mean\":", JsonNumber(b.mean()),
            ",\"last\":", JsonNumber(b.last()), "}");
        first_bucket = false;
      }
      body += "]}";
      first = false;
    }
    return Json(200, body + "]}");
  };
  return routes;
}

}  // namespace rl
