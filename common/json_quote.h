// JSON string quoting, shared by run-file conversion, the telemetry API and
// error messages that quote what a peer sent.
#ifndef RL_COMMON_JSON_QUOTE_H_
#define RL_COMMON_JSON_QUOTE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rl {

// `s` as a JSON string literal (quotes, backslashes and control characters
// escaped; other bytes, UTF-8 included, kept as they are).
std::string JsonQuote(absl::string_view s);

// A string a peer or user sent, for an error message or a log line:
// JSON-quoted (nothing in it is obeyed by a terminal) and cut to its first
// `max_bytes` bytes (at a character boundary) with the size said, so a
// 1 MB run id is not echoed back in full.
std::string QuoteForError(absl::string_view s, size_t max_bytes = 64);

}  // namespace rl

#endif  // RL_COMMON_JSON_QUOTE_H_
