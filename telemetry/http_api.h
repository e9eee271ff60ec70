// The telemetry service's HTTP side (besides /metrics): the web page at "/"
// and the JSON API it reads:
//   GET /api/runs                      runs with metrics (and their state)
//   GET /api/series?run=RUN            the run's series (ListSeriesResponse)
//   GET /api/query?run=RUN&name=NAME[&buckets=200][&aggregate=LABEL]
//                                      downsampled curves, mean across LABEL
//                                      (QueryResponse)
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

#include "httplib.h"
#include "telemetry/telemetry_core.h"

namespace rl {

// Run id -> state name ("RUNNING", ...), e.g. from the coordinator; may be
// empty.
using RunStateSource = std::function<std::map<std::string, std::string>()>;

// Adds the routes above to `server`; `core` must outlive it.
void AddTelemetryHttpRoutes(TelemetryCore* core, RunStateSource run_states,
                            httplib::Server* server);

}  // namespace rl

#endif  // RL_TELEMETRY_HTTP_API_H_
