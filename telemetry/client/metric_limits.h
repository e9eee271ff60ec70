// What the telemetry service takes in a point, shared by the store's check
// of every batch (telemetry/metric_store_validation.cc) and the emitter's
// of every point before it is batched: a point the store would refuse is
// dropped alone at the source, never the batch it would have travelled in.
#ifndef RL_TELEMETRY_CLIENT_METRIC_LIMITS_H_
#define RL_TELEMETRY_CLIENT_METRIC_LIMITS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace rl {

// Names: 1 to kMaxMetricNameBytes printable bytes.
inline constexpr size_t kMaxMetricNameBytes = 256;
// Labels per point, and their keys (1 to 64 printable bytes) and values
// (0 to 256 printable bytes).
inline constexpr int kMaxLabels = 16;
inline constexpr size_t kMaxLabelKeyBytes = 64;
inline constexpr size_t kMaxLabelValueBytes = 256;

// Whether `text` has no control characters (bytes below 0x20, and 0x7f).
inline bool PrintableText(absl::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_METRIC_LIMITS_H_
