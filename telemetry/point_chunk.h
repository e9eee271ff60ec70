// How a series' points sit in a stored chunk: PointRecords back to back
// (the store's BLOB format), appended and read without alignment demands.
#ifndef RL_TELEMETRY_POINT_CHUNK_H_
#define RL_TELEMETRY_POINT_CHUNK_H_

#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "telemetry/downsample.h"

namespace rl {

inline void AppendPoints(std::string* blob, const PointRecord* points,
                         size_t n) {
  blob->append(reinterpret_cast<const char*>(points), n * sizeof(PointRecord));
}

// Calls `f(const PointRecord&)` for every whole point of `blob`, in order.
template <typename F>
void ForEachPoint(absl::string_view blob, F&& f) {
  const size_t n = blob.size() / sizeof(PointRecord);
  const char* p = blob.data();
  for (size_t i = 0; i < n; ++i, p += sizeof(PointRecord)) {
    PointRecord r;
    std::memcpy(&r, p, sizeof(r));
    f(r);
  }
}

}  // namespace rl

#endif  // RL_TELEMETRY_POINT_CHUNK_H_
