// Counter-based random numbers for environment resets: every draw is a
// stateless hash of (seed, environment index, episode number, draw index), so
// a reset gives the same state whatever thread or kernel computes it and
// however the environments are split.
#ifndef RL_ENVS_RANDOM_STREAM_H_
#define RL_ENVS_RANDOM_STREAM_H_

#include <cstdint>

#include "common/host_device.h"

namespace rl {

// SplitMix64's output function (Steele, Lea and Flood 2014): a bijection of
// 64-bit words with good avalanche.
RL_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The draws of one episode of one environment. Draw n is SplitMix64's n-th
// output from a key that hashes (seed, env, episode).
class RandomStream {
 public:
  RL_HOST_DEVICE RandomStream(uint64_t seed, uint64_t env, uint64_t episode)
      : key_(Mix64(Mix64(Mix64(seed ^ 0x6a09e667f3bcc908ULL) + env * kGamma) +
                   episode * 0xd1b54a32d192ed03ULL)) {}

  // Uniform in [0, 1) with 53 random bits.
  RL_HOST_DEVICE double Uniform(uint32_t draw) const {
    return static_cast<double>(Mix64(key_ + (draw + 1ULL) * kGamma) >> 11) *
           0x1.0p-53;
  }

  // Uniform in [low, high), computed as NumPy's Generator.uniform does.
  // Rounded multiply and add on the device too (nvcc would fuse them), so
  // both backends draw bit-identical initial states.
  RL_HOST_DEVICE double Uniform(uint32_t draw, double low, double high) const {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(low, __dmul_rn(high - low, Uniform(draw)));
#else
    return low + (high - low) * Uniform(draw);
#endif
  }

 private:
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
  uint64_t key_;
};

}  // namespace rl

#endif  // RL_ENVS_RANDOM_STREAM_H_
