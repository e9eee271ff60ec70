#include "telemetry/stream_ledger.h"

namespace rl {

bool StreamLedger::Has(int64_t seq) const {
  if (seq > last) return false;
  for (const auto& [first, end] : gaps) {
    if (seq >= first && seq <= end) return false;
  }
  return true;
}

void StreamLedger::Add(int64_t seq) {
  if (seq > last) {
    if (seq > last + 1) gaps.emplace_back(last + 1, seq - 1);
    last = seq;
    if (gaps.size() > kMaxGaps) {
      gaps.erase(gaps.begin(),
                 gaps.end() - static_cast<std::ptrdiff_t>(kMaxGaps));
    }
    return;
  }
  for (auto it = gaps.begin(); it != gaps.end(); ++it) {
    const auto [first, end] = *it;
    if (seq < first || seq > end) continue;
    it = gaps.erase(it);
    if (seq < end) it = gaps.emplace(it, seq + 1, end);
    if (seq > first) gaps.emplace(it, first, seq - 1);
    return;
  }
}

}  // namespace rl
