// Drifter-v0, for check-env's check of saved states: a position that
// drifts toward a target drawn at each reset. kwargs.save: "whole" saves
// both, "partial" forgets the target (a restored batch plays on with its
// own, so its observations differ), "refuse" throws on every restore,
// "hang_save" and "hang_restore" never return from the one or the other
// (the call watch's test).
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "rl_env_plugin.hpp"

class Drifter final : public rlenv::Env {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs&) {
    return {rlenv::Space::Box({2}, -1.0, 1.0), rlenv::Space::Discrete(2)};
  }
  explicit Drifter(const rlenv::Kwargs& kwargs)
      : save_(kwargs.String("save", "whole")) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    // 2 to 4 cells away: no episode ends at the first step.
    target_ = static_cast<int>(rng() % 3) + 2;
    if (rng() % 2 == 0) target_ = -target_;
    at_ = 0;
    Observe(obs);
  }
  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng&,
                         float* obs) override {
    at_ += action.index() == 1 ? 1 : -1;
    Observe(obs);
    rlenv::StepResult r;
    r.terminated = at_ == target_ || at_ <= -8 || at_ >= 8;
    r.reward = at_ == target_ ? 1.f : 0.f;
    return r;
  }

  void SaveState(std::string* bytes) const {
    while (save_ == "hang_save") {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    bytes->assign(1, static_cast<char>(at_));
    if (save_ != "partial") bytes->push_back(static_cast<char>(target_));
  }
  void RestoreState(const std::string& bytes) {
    if (save_ == "refuse") throw std::invalid_argument("Drifter-v0 refuses");
    while (save_ == "hang_restore") {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (bytes.empty()) throw std::invalid_argument("Drifter-v0: no bytes");
    at_ = bytes[0];
    if (bytes.size() > 1) target_ = bytes[1];
  }

 private:
  void Observe(float* obs) const {
    obs[0] = at_ / 8.0f;
    obs[1] = target_ / 8.0f;
  }
  std::string save_;
  int target_ = 0;
  int at_ = 0;
};

RL_ENV_PLUGIN(Drifter, "drifter 1.0")
