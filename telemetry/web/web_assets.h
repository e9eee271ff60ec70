// The telemetry service's web page (telemetry/web/index.html and its script,
// index.js), compiled in so the binary serves them without files next to it.
#ifndef RL_TELEMETRY_WEB_WEB_ASSETS_H_
#define RL_TELEMETRY_WEB_WEB_ASSETS_H_

#include "absl/strings/string_view.h"

namespace rl {

// The page: HTML with its CSS inline; it loads its script as index.js.
absl::string_view IndexHtml();

// The page's script (index.js), served beside it so the page's
// Content-Security-Policy allows no inline script.
absl::string_view IndexJs();

}  // namespace rl

#endif  // RL_TELEMETRY_WEB_WEB_ASSETS_H_
