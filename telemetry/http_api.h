// The telemetry service's HTTP side (besides /metrics): the web page at "/"
// (and "/index.html"), its script at "/index.js", and the JSON API it reads:
//   GET /api/runs                      runs with metrics (and their state)
//   GET /api/series?run=RUN            the run's series (ListSeriesResponse)
//   GET /api/query?run=RUN&name=NAME[&buckets=200][&aggregate=LABEL[,LABEL]]
//                                      downsampled curves, mean across LABEL
//                                      (QueryResponse)
//   GET /api/sweeps                    the coordinator's sweeps with their
//                                      trials (ListSweepsResponse; none
//                                      without a coordinator)
//   GET /api/run?run=RUN               the coordinator's run: state, failure
//                                      reason, history, run file (Run; 503
//                                      without a coordinator)
// Errors: {"error": "..."} with 400 (bad parameter) or 404 (unknown run).
//
// Every reply is a proto message written by protobuf's JSON printer with
// the proto3 JSON mapping: snake_case field names, every field present
// (zeros and empty lists too), int64 as decimal strings, and non-finite
// doubles as the strings "NaN", "Infinity", "-Infinity".
#ifndef RL_TELEMETRY_HTTP_API_H_
#define RL_TELEMETRY_HTTP_API_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "proto/coordinator.pb.h"
#include "telemetry/telemetry_core.h"

namespace rl {

// Run id -> state name ("RUNNING", ...), e.g. from the coordinator; may be
// empty.
using RunStateSource = std::function<std::map<std::string, std::string>()>;

// The coordinator's sweeps, as last seen.
using SweepSource = std::function<ListSweepsResponse()>;
// One run of the coordinator's, with its history (asked of it at once).
using RunSource = std::function<absl::StatusOr<Run>(const std::string&)>;

// Adds the routes above to `server`; `core` must outlive it. Null sources:
// no coordinator.
void AddTelemetryHttpRoutes(TelemetryCore* core, RunStateSource run_states,
                            httplib::Server* server,
                            SweepSource sweeps = nullptr,
                            RunSource run = nullptr);

}  // namespace rl

#endif  // RL_TELEMETRY_HTTP_API_H_
