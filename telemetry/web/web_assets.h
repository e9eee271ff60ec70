// The telemetry service's web page (telemetry/web/index.html), compiled in so
// the binary serves it without files next to it.
#ifndef RL_TELEMETRY_WEB_WEB_ASSETS_H_
#define RL_TELEMETRY_WEB_WEB_ASSETS_H_

#include "absl/strings/string_view.h"

namespace rl {

// The whole page: HTML with its CSS and JavaScript inline.
absl::string_view IndexHtml();

}  // namespace rl

#endif  // RL_TELEMETRY_WEB_WEB_ASSETS_H_
