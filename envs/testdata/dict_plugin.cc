// A Dict env for the tests of Dict and Tuple spaces ("Lookout-v0"), built
// with the C++ helper. The observation is
//   Dict(hint: Discrete(2), image: Box(uint8, [size, size, 1]))
// (Gymnasium's sorted keys; flat: 2 one-hot floats, then size * size byte
// values as floats), an image black but for one white pixel (255); the
// action is Dict(col: Discrete(2), row: Discrete(2)) (flat: MultiDiscrete
// [2, 2]). Each step pays 0.5 for naming the pixel's row half (image) and
// 0.5 for a col equal to the hint: the policy needs both parts. Episodes of
// 10 steps: a random policy scores 5, one that reads a single part 7.5, a
// learned one 10.
#include <cstring>
#include <stdexcept>

#include "rl_env_plugin.hpp"

class Lookout final : public rlenv::Env {
 public:
  static rlenv::Space Observation(int64_t size) {
    return rlenv::Space::Dict(
        {{"hint", rlenv::Space::Discrete(2)},
         {"image", rlenv::Space::Bytes({size, size, 1})}});
  }
  static rlenv::Space Action() {
    return rlenv::Space::Dict({{"col", rlenv::Space::Discrete(2)},
                               {"row", rlenv::Space::Discrete(2)}});
  }
  static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
    const int64_t size = kwargs.Int("size", 8);
    if (size < 2 || size > 64 || size % 2 != 0) {
      throw std::invalid_argument("kwargs.size: an even number in [2, 64]");
    }
    rlenv::Spaces s{Observation(size), Action()};
    s.reward_low = 0;
    s.reward_high = 1;
    return s;
  }
  explicit Lookout(const rlenv::Kwargs& kwargs)
      : size_(kwargs.Int("size", 8)),
        hint_at_(Observation(size_).Offset("hint")),
        image_at_(Observation(size_).Offset("image")),
        row_at_(Action().Offset("row", /*action=*/true)),
        col_at_(Action().Offset("col", /*action=*/true)) {}

  void Reset(rlenv::Rng& rng, float* obs) override {
    t_ = 0;
    Draw(rng, obs);
  }
  rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng& rng,
                         float* obs) override {
    rlenv::StepResult r;
    r.reward = 0.5f * (action.discrete[row_at_] == row_) +
               0.5f * (action.discrete[col_at_] == hint_);
    r.terminated = ++t_ >= 10;
    Draw(rng, obs);
    return r;
  }

 private:
  void Draw(rlenv::Rng& rng, float* obs) {
    const int64_t row = static_cast<int64_t>(rng() % size_);
    const int64_t col = static_cast<int64_t>(rng() % size_);
    hint_ = static_cast<int64_t>(rng() % 2);
    row_ = row >= size_ / 2;
    obs[hint_at_] = hint_ == 0 ? 1.f : 0.f;
    obs[hint_at_ + 1] = hint_ == 1 ? 1.f : 0.f;
    float* image = obs + image_at_;
    std::memset(image, 0, sizeof(float) * size_ * size_);
    image[row * size_ + col] = 255.f;
  }
  int64_t size_;
  int64_t hint_at_, image_at_, row_at_, col_at_;
  int64_t t_ = 0;
  int64_t row_ = 0, hint_ = 0;
};

RL_ENV_PLUGIN(Lookout, "lookout 1.0")
