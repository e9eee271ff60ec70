// The early-stopping rules of sweep_spec.h (ASHA's rungs, the median
// rule): at which env steps a trial is judged, and whether it goes on.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runspec/sweep_spec.h"

namespace rl {

int64_t RungSteps(const EarlyStopping& stopping, int rung) {
  if (stopping.kind() == "median") {
    return stopping.first_rung_steps() * (rung + 1);
  }
  int64_t steps = stopping.first_rung_steps();
  for (int k = 0; k < rung; ++k) {
    steps *= std::max(2, stopping.reduction_factor());
  }
  return steps;
}

bool KeepsGoing(const EarlyStopping& stopping, bool maximize, double score,
                const std::vector<double>& scores_at_rung) {
  if (stopping.kind() != "asha" && stopping.kind() != "median") return true;
  const int n = static_cast<int>(scores_at_rung.size());
  if (n < std::max(1, stopping.min_trials_at_rung())) return true;
  if (std::isnan(score)) return false;
  std::vector<double> sorted = scores_at_rung;
  // Best first; a NaN (no points) counts as the worst.
  std::sort(sorted.begin(), sorted.end(), [&](double a, double b) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return maximize ? a > b : a < b;
  });
  const auto at_least_as_good = [&](double threshold) {
    return maximize ? score >= threshold : score <= threshold;
  };
  if (stopping.kind() == "median") {
    // The median of the rung's scores (the lower middle of an even count,
    // counting from the best).
    return at_least_as_good(sorted[(n - 1) / 2]);
  }
  const int keep = (n + stopping.reduction_factor() - 1) /
                   std::max(1, stopping.reduction_factor());
  return at_least_as_good(sorted[std::max(1, keep) - 1]);
}

}  // namespace rl
