// SimpleSpread-v3: MPE's Simple Spread (PettingZoo's simple_spread_v3 with
// discrete moves) in C++, N agents per environment as rows of one batch,
// bundled as `plugin: mpe_spread`. The world is envs/games/mpe_spread.h,
// checked step for step against PettingZoo's own trajectories; this file
// adds the episode: positions drawn uniformly in [-1, 1]^2 for agents and
// landmarks, every agent truncated together after max_cycles steps.
//
// kwargs, PettingZoo's names and defaults:
//   N                   agents and landmarks, 2 to 16 (default 3)
//   local_ratio         weight of an agent's own collisions against the
//                       team's distance term, 0 to 1 (default 0.5)
//   max_cycles          steps per episode, >= 1 (default 25)
//   continuous_actions  false only (default false)
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "envs/games/mpe_spread.h"
#include "rl_env_plugin.hpp"

namespace {

struct Options {
  int n = 3;
  double local_ratio = 0.5;
  int max_cycles = 25;
};

Options Parse(const rlenv::Kwargs& kwargs) {
  for (const std::string& key : kwargs.Keys()) {
    if (key != "N" && key != "local_ratio" && key != "max_cycles" &&
        key != "continuous_actions") {
      throw std::invalid_argument(
          "kwargs." + key +
          ": unknown (SimpleSpread-v3 takes N, local_ratio, max_cycles and "
          "continuous_actions)");
    }
  }
  Options o;
  const int64_t n = kwargs.Int("N", 3);
  if (n < 2 || n > 16) {
    throw std::invalid_argument("kwargs.N: " + std::to_string(n) +
                                "; 2 to 16 agents");
  }
  o.n = static_cast<int>(n);
  o.local_ratio = kwargs.Number("local_ratio", 0.5);
  if (!(o.local_ratio >= 0.0 && o.local_ratio <= 1.0)) {
    throw std::invalid_argument(
        "kwargs.local_ratio: " + std::to_string(o.local_ratio) +
        "; a proportion in [0, 1]");
  }
  const int64_t cycles = kwargs.Int("max_cycles", 25);
  if (cycles < 1 || cycles > 1000000) {
    throw std::invalid_argument("kwargs.max_cycles: " + std::to_string(cycles) +
                                "; 1 to 1000000");
  }
  o.max_cycles = static_cast<int>(cycles);
  if (kwargs.Bool("continuous_actions", false)) {
    throw std::invalid_argument(
        "kwargs.continuous_actions: true is not built; SimpleSpread-v3 "
        "takes discrete moves (use the gymnasium plugin with "
        "pettingzoo.mpe.simple_spread_v3 for continuous ones)");
  }
  return o;
}

class SimpleSpread final : public rlenv::MultiAgentEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    const Options o = Parse(kwargs);
    const double inf = std::numeric_limits<double>::infinity();
    rlenv::Spaces s{
        rlenv::Space::Box({rlenv::mpe::SpreadWorld::ObservationSize(o.n)}, -inf,
                          inf),
        rlenv::Space::Discrete(rlenv::mpe::SpreadWorld::kMoves)};
    s.agents = o.n;
    for (int i = 0; i < o.n; ++i) {
      s.agent_names.push_back("agent_" + std::to_string(i));
    }
    return s;
  }

  explicit SimpleSpread(const rlenv::Kwargs& kwargs)
      : options_(Parse(kwargs)),
        world_(options_.n, options_.local_ratio),
        agents_xy_(2 * options_.n),
        landmarks_xy_(2 * options_.n),
        moves_(options_.n),
        rewards_(options_.n) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    for (double& v : agents_xy_) v = Uniform(rng);
    for (double& v : landmarks_xy_) v = Uniform(rng);
    world_.Place(agents_xy_.data(), landmarks_xy_.data());
    steps_ = 0;
    world_.Observe(obs);
  }

  void Step(const rlenv::Action* actions, rlenv::Rng& rng, float* obs,
            rlenv::StepResult* results) override {
    (void)rng;
    for (int i = 0; i < options_.n; ++i) moves_[i] = actions[i].index();
    world_.Step(moves_.data(), rewards_.data());
    ++steps_;
    const bool over = steps_ >= options_.max_cycles;
    for (int i = 0; i < options_.n; ++i) {
      results[i].reward = static_cast<float>(rewards_[i]);
      results[i].truncated = over;
    }
    world_.Observe(obs);
  }

  // For a resume that plays on from the same world (the helper keeps the
  // random stream): positions, velocities and the episode's step.
  void SaveState(std::string* bytes) const {
    bytes->clear();
    for (const std::vector<double>* v :
         {&world_.agent_positions(), &world_.agent_velocities(),
          &world_.landmark_positions()}) {
      bytes->append(reinterpret_cast<const char*>(v->data()),
                    v->size() * sizeof(double));
    }
    bytes->append(reinterpret_cast<const char*>(&steps_), sizeof(steps_));
  }
  void RestoreState(const std::string& bytes) {
    const size_t doubles = 6 * static_cast<size_t>(options_.n);
    if (bytes.size() != doubles * sizeof(double) + sizeof(steps_)) {
      throw std::invalid_argument(
          "SimpleSpread-v3 state: " + std::to_string(bytes.size()) +
          " bytes; " + std::to_string(options_.n) + " agents' is " +
          std::to_string(doubles * sizeof(double) + sizeof(steps_)));
    }
    std::vector<double> v(doubles);
    std::memcpy(v.data(), bytes.data(), doubles * sizeof(double));
    int steps = 0;
    std::memcpy(&steps, bytes.data() + doubles * sizeof(double), sizeof(steps));
    for (const double x : v) {
      if (!std::isfinite(x)) {
        throw std::invalid_argument("SimpleSpread-v3 state: not finite");
      }
    }
    if (steps < 0 || steps >= options_.max_cycles) {
      throw std::invalid_argument("SimpleSpread-v3 state: step " +
                                  std::to_string(steps) + " of " +
                                  std::to_string(options_.max_cycles));
    }
    const int n2 = 2 * options_.n;
    world_.Restore(v.data(), v.data() + n2, v.data() + 2 * n2);
    steps_ = steps;
  }

 private:
  // Uniform in [-1, 1): 53 random bits.
  static double Uniform(rlenv::Rng& rng) {
    return -1.0 + 2.0 * (static_cast<double>(rng() >> 11) * 0x1.0p-53);
  }

  const Options options_;
  rlenv::mpe::SpreadWorld world_;
  std::vector<double> agents_xy_, landmarks_xy_;
  std::vector<int64_t> moves_;
  std::vector<double> rewards_;
  int steps_ = 0;
};

}  // namespace

RL_ENV_PLUGIN(SimpleSpread, "mpe_spread 1.0")
