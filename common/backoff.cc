#include "common/backoff.h"

#include <algorithm>

namespace rl {

Backoff::Backoff(const Options& options)
    : options_(options),
      step_(options.initial),
      rng_(options.seed != 0 ? options.seed : std::random_device()()) {}

absl::Duration Backoff::Next() {
  std::uniform_real_distribution<double> jitter(options_.min_jitter,
                                                options_.max_jitter);
  const absl::Duration delay = step_ * jitter(rng_);
  step_ = std::min(step_ * 2, options_.max);
  ++failures_;
  return delay;
}

void Backoff::Reset() {
  step_ = options_.initial;
  failures_ = 0;
}

}  // namespace rl
