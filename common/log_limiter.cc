#include "common/log_limiter.h"

#include "absl/strings/str_cat.h"

namespace rl {

LogLimiter::LogLimiter(int lines_per_period, absl::Duration period,
                       int max_keys)
    : lines_per_period_(lines_per_period),
      period_(period),
      max_keys_(max_keys) {}

bool LogLimiter::Allow(absl::string_view key, absl::Time now,
                       std::string* left_out) {
  left_out->clear();
  absl::MutexLock lock(&mu_);
  if (budgets_.size() >= static_cast<size_t>(max_keys_) &&
      now - last_sweep_ >= period_ / 10) {
    // Forget keys whose period ended with nothing left out (a sweep at most
    // ten times a period, so a flood of new keys costs no scan per line).
    last_sweep_ = now;
    absl::erase_if(budgets_, [&](const auto& entry) {
      return now - entry.second.period_start >= period_ &&
             entry.second.left_out == 0;
    });
  }
  auto it = budgets_.find(key);
  if (it == budgets_.end() &&
      budgets_.size() < static_cast<size_t>(max_keys_)) {
    it = budgets_.emplace(std::string(key), Budget{now, 0, 0}).first;
  }
  Budget& budget = it != budgets_.end() ? it->second : overflow_;
  if (now - budget.period_start >= period_) {
    budget.period_start = now;
    budget.lines = 0;
  }
  if (budget.lines >= lines_per_period_) {
    ++budget.left_out;
    return false;
  }
  ++budget.lines;
  if (budget.left_out > 0) {
    *left_out =
        absl::StrCat(" (", budget.left_out, " more like it not logged)");
    budget.left_out = 0;
  }
  return true;
}

}  // namespace rl
