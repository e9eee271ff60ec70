// JSON string quoting, shared by run-file conversion and the telemetry API.
#ifndef RL_COMMON_JSON_QUOTE_H_
#define RL_COMMON_JSON_QUOTE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rl {

// `s` as a JSON string literal (quotes, backslashes and control characters
// escaped; other bytes, UTF-8 included, kept as they are).
std::string JsonQuote(absl::string_view s);

}  // namespace rl

#endif  // RL_COMMON_JSON_QUOTE_H_
