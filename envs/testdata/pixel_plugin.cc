// A uint8-image env for the tests of uint8 observations ("Pixels-v0"): a
// grey image [size, size, 1] (kwargs.size, default 6) that is black but for
// one white pixel (255) at a random cell; the action (Discrete(4)) names
// the image quadrant that pixel lies in, rewarded 1 when right. Episodes of
// 10 steps: a random policy scores 2.5, a learned one 10.
#include <cstring>
#include <stdexcept>

#include "rl_env_plugin.hpp"

class Pixels final : public rlenv::ByteEnv {
 public:
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    const int64_t size = kwargs.Int("size", 6);
    if (size < 2 || size > 256 || size % 2 != 0) {
      throw std::invalid_argument("kwargs.size: an even number in [2, 256]");
    }
    rlenv::Spaces s{rlenv::Space::Bytes({size, size, 1}),
                    rlenv::Space::Discrete(4)};
    s.reward_low = 0;
    s.reward_high = 1;
    return s;
  }
  explicit Pixels(const rlenv::Kwargs& kwargs) : size_(kwargs.Int("size", 6)) {}

  void Reset(rlenv::Rng& rng, uint8_t* obs) override {
    t_ = 0;
    Draw(rng, obs);
  }
  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng& rng,
                         uint8_t* obs) override {
    rlenv::StepResult r;
    r.reward = action.index() == quadrant_ ? 1.f : 0.f;
    r.terminated = ++t_ >= 10;
    Draw(rng, obs);
    return r;
  }

 private:
  void Draw(rlenv::Rng& rng, uint8_t* obs) {
    const int64_t row = static_cast<int64_t>(rng() % size_);
    const int64_t col = static_cast<int64_t>(rng() % size_);
    quadrant_ = 2 * (row >= size_ / 2) + (col >= size_ / 2);
    std::memset(obs, 0, size_ * size_);
    obs[row * size_ + col] = 255;
  }
  int64_t size_;
  int64_t t_ = 0;
  int64_t quadrant_ = 0;
};

RL_ENV_PLUGIN(Pixels, "pixels 1.0")
