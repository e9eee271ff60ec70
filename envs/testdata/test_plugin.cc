// A plugin for env_plugin_test and the failure tests of tests/: built with
// the C++ helper, misbehaving on request (kwargs.mode):
//   "ok"          a counter env: obs = [t / 10, 1, ...], reward 1 for
//                 action 1, terminated at t = 10
//   "create_error"  create throws
//   "step_error"  step throws at kwargs.fail_at (default 3)
//   "nan"         a NaN observation at step kwargs.fail_at
//   "crash"       abort() at step kwargs.fail_at (the actor process dies)
//   "hang"        step kwargs.fail_at never returns (sleeps forever)
//   "big_reward"  reward 1000 (outside a declared range)
//   "undeclared_big"  declares no reward range, gives reward 5
//   "oob"         observation 50 (outside its Box [-10, 10]) at fail_at
//   "nondet"      reset ignores the seed (a process-wide counter)
//   "masked"      3 actions, one masked at every step: obs = one-hot of the
//                 rewarded action (+1) and one-hot of the masked one; taking
//                 the masked action is a step error; episodes of 10 steps
//                 (a random unmasked policy scores 5, a learned one 10)
//   "multi"       MultiDiscrete([3, 2]) actions: obs = one-hots of the
//                 rewarded choice of each part; +0.5 a part chosen right;
//                 episodes of 10 steps (random: 4.2, learned: 10)
//   "bits"        MultiBinary(3) actions with masks: obs = the rewarded
//                 bits; +1/3 a bit set right; each step one bit's wrong
//                 value is masked (taking it is a step error); episodes of
//                 10 steps (random unmasked: 6.7, learned: 10)
// kwargs.obs_size (default 3) sizes the observation.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "rl_env_plugin.hpp"

class Probe final : public rlenv::Env {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    if (kwargs.String("mode", "ok") == "create_error") {
      throw std::runtime_error("the probe refuses to be created");
    }
    if (kwargs.String("mode", "ok") == "multi") {
      rlenv::Spaces s{rlenv::Space::Box({5}, 0, 1),
                      rlenv::Space::MultiDiscrete({3, 2})};
      s.reward_low = 0;
      s.reward_high = 1;
      return s;
    }
    if (kwargs.String("mode", "ok") == "bits") {
      rlenv::Spaces s{rlenv::Space::Box({3}, 0, 1),
                      rlenv::Space::MultiBinary(3)};
      s.reward_low = 0;
      s.reward_high = 1;
      s.action_mask = true;
      return s;
    }
    if (kwargs.String("mode", "ok") == "masked") {
      rlenv::Spaces s{rlenv::Space::Box({6}, 0, 1), rlenv::Space::Discrete(3)};
      s.reward_low = 0;
      s.reward_high = 1;
      s.action_mask = true;
      return s;
    }
    rlenv::Spaces s{rlenv::Space::Box({kwargs.Int("obs_size", 3)}, -10, 10),
                    rlenv::Space::Discrete(2)};
    s.reward_low = 0;
    s.reward_high = kwargs.String("mode", "ok") == "big_reward" ? 1000 : 1;
    if (kwargs.String("mode", "ok") == "undeclared_big") {
      s.reward_low = -INFINITY;  // declares no range, gives 5
      s.reward_high = INFINITY;
    }
    return s;
  }
  explicit Probe(const rlenv::Kwargs& kwargs)
      : mode_(kwargs.String("mode", "ok")),
        fail_at_(kwargs.Int("fail_at", 3)),
        obs_size_(kwargs.Int("obs_size", 3)) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    t_ = 0;
    if (mode_ == "masked" || mode_ == "multi" || mode_ == "bits") {
      Draw(rng, obs);
      return;
    }
    static int calls = 0;
    offset_ = mode_ == "nondet" ? static_cast<float>(++calls % 7)
                                : static_cast<float>(rng() % 1000) / 1000.0f;
    Write(obs);
  }
  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng& rng,
                         float* obs) override {
    ++t_;
    ++steps_;
    if (mode_ == "multi") {
      rlenv::StepResult r;
      r.reward = 0.5f * (action.discrete[0] == target_) +
                 0.5f * (action.discrete[1] == target2_);
      r.terminated = t_ >= 10;
      Draw(rng, obs);
      return r;
    }
    if (mode_ == "bits") {
      rlenv::StepResult r;
      for (int k = 0; k < 3; ++k) {
        if (k == masked_ && action.discrete[k] != bits_[k]) {
          throw std::runtime_error("a masked bit value was taken");
        }
        r.reward += (action.discrete[k] == bits_[k]) / 3.0f;
      }
      r.terminated = t_ >= 10;
      Draw(rng, obs);
      return r;
    }
    if (mode_ == "masked") {
      if (action.index() == masked_) {
        throw std::runtime_error("the masked action was taken");
      }
      rlenv::StepResult r;
      r.reward = action.index() == target_ ? 1.f : 0.f;
      r.terminated = t_ >= 10;
      Draw(rng, obs);
      return r;
    }
    if (steps_ == fail_at_) {
      if (mode_ == "step_error") throw std::runtime_error("the probe broke");
      if (mode_ == "crash") std::abort();
      while (mode_ == "hang")
        std::this_thread::sleep_for(std::chrono::hours(1));
    }
    Write(obs);
    if (mode_ == "nan" && steps_ == fail_at_) obs[0] = NAN;
    if (mode_ == "oob" && steps_ == fail_at_) obs[0] = 50;
    rlenv::StepResult r;
    r.reward = mode_ == "big_reward"       ? 1000.f
               : mode_ == "undeclared_big" ? 5.f
                                           : (action.index() == 1 ? 1.f : 0.f);
    r.terminated = t_ >= 10;
    return r;
  }

  void ActionMask(uint8_t* mask) override {
    if (mode_ == "bits") {
      // Each bit's (0 allowed, 1 allowed); bit masked_ only its right value.
      for (int k = 0; k < 3; ++k) {
        mask[2 * k] = k != masked_ || bits_[k] == 0;
        mask[2 * k + 1] = k != masked_ || bits_[k] == 1;
      }
      return;
    }
    for (int k = 0; k < 3; ++k) mask[k] = k == masked_ ? 0 : 1;
  }

 private:
  // "masked": a new rewarded action and a different masked one.
  void Draw(rlenv::Rng& rng, float* obs) {
    if (mode_ == "bits") {
      for (int k = 0; k < 3; ++k) {
        bits_[k] = static_cast<int64_t>(rng() % 2);
        obs[k] = static_cast<float>(bits_[k]);
      }
      masked_ = static_cast<int64_t>(rng() % 3);
      return;
    }
    if (mode_ == "multi") {
      target_ = static_cast<int64_t>(rng() % 3);
      target2_ = static_cast<int64_t>(rng() % 2);
      for (int k = 0; k < 3; ++k) obs[k] = k == target_ ? 1.f : 0.f;
      for (int k = 0; k < 2; ++k) obs[3 + k] = k == target2_ ? 1.f : 0.f;
      return;
    }
    target_ = static_cast<int64_t>(rng() % 3);
    masked_ = (target_ + 1 + static_cast<int64_t>(rng() % 2)) % 3;
    for (int k = 0; k < 3; ++k) {
      obs[k] = k == target_ ? 1.f : 0.f;
      obs[3 + k] = k == masked_ ? 1.f : 0.f;
    }
  }
  void Write(float* obs) const {
    obs[0] = static_cast<float>(t_) / 10.0f;
    for (int64_t k = 1; k < obs_size_; ++k) obs[k] = offset_;
  }
  std::string mode_;
  int64_t fail_at_;
  int64_t obs_size_;
  int64_t t_ = 0;
  int64_t steps_ = 0;
  float offset_ = 0;
  int64_t target_ = 0;
  int64_t target2_ = 0;
  int64_t masked_ = 1;
  int64_t bits_[3] = {0, 0, 0};
};

RL_ENV_PLUGIN(Probe, "probe 1.0")
