// The returns of the last episodes a trainer saw (the learner's and the
// one-process trainer's "mean return" and target check): the newest 100,
// oldest first.
#ifndef RL_LEARNER_RETURN_WINDOW_H_
#define RL_LEARNER_RETURN_WINDOW_H_

#include <cstddef>
#include <deque>
#include <limits>
#include <numeric>

namespace rl {

class ReturnWindow {
 public:
  static constexpr size_t kSize = 100;

  void Add(float episode_return) {
    returns_.push_back(episode_return);
    if (returns_.size() > kSize) returns_.pop_front();
  }
  template <typename It>
  void Assign(It begin, It end) {
    returns_.clear();
    for (; begin != end; ++begin) Add(*begin);
  }

  bool empty() const { return returns_.empty(); }
  bool full() const { return returns_.size() >= kSize; }
  // NaN while empty.
  double Mean() const {
    if (returns_.empty()) return std::numeric_limits<double>::quiet_NaN();
    return std::accumulate(returns_.begin(), returns_.end(), 0.0) /
           static_cast<double>(returns_.size());
  }
  // A full window whose mean reaches `target`.
  bool Reaches(double target) const { return full() && Mean() >= target; }

  std::deque<float>::const_iterator begin() const { return returns_.begin(); }
  std::deque<float>::const_iterator end() const { return returns_.end(); }

 private:
  std::deque<float> returns_;
};

}  // namespace rl

#endif  // RL_LEARNER_RETURN_WINDOW_H_
