// What a worker writes (its error text) made safe to keep and show: the
// coordinator cleans it once, as it arrives (docs/security.md, "Bad bytes").
#ifndef RL_COORDINATOR_REASON_TEXT_H_
#define RL_COORDINATOR_REASON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rl {

// A worker's error text as runs and logs keep it: control characters but
// line breaks (terminal escapes, carriage returns, bidi overrides) written
// as \xNN or \uNNNN escapes, invalid UTF-8 bytes as \xNN, at most 2048
// bytes.
std::string SanitizeReason(absl::string_view text);

}  // namespace rl

#endif  // RL_COORDINATOR_REASON_TEXT_H_
