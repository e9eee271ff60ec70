// The telemetry service's HTTP side (besides /metrics): the web page at "/"
// and the JSON API it reads:
//   GET /api/runs                      runs with metrics (and their state)
//   GET /api/series?run=RUN            the run's series
//   GET /api/query?run=RUN&name=NAME[&buckets=200][&aggregate=LABEL]
//                                      downsampled curves (mean across LABEL)
// Errors: {"error": "..."} with 400 (bad parameter) or 404 (unknown run).
// Non-finite numbers are written as null.
#ifndef RL_TELEMETRY_HTTP_API_H_
#define RL_TELEMETRY_HTTP_API_H_

#include <functional>
#include <map>
#include <string>

#include "common/http_server.h"
#include "telemetry/telemetry_core.h"

namespace rl {

// Run id -> state name ("RUNNING", ...), e.g. from the coordinator; may be
// empty.
using RunStateSource = std::function<std::map<std::string, std::string>()>;

std::map<std::string, HttpHandler> MakeTelemetryHttpRoutes(
    TelemetryCore* core, RunStateSource run_states);

}  // namespace rl

#endif  // RL_TELEMETRY_HTTP_API_H_
