#include "learner/gae.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(GaeTest, SingleEnvHandComputed) {
  // Three steps; the episode terminates at t=1, a new one starts at t=2.
  const std::vector<float> rewards = {1, 2, 3}, values = {0.5, 0.25, 1};
  const std::vector<float> next = {2};
  const std::vector<uint8_t> term = {0, 1, 0}, trunc = {0, 0, 0};
  const std::vector<float> trunc_v = {0, 0, 0};
  GaeInputs in{3,           1,           rewards.data(), values.data(),
               next.data(), term.data(), trunc.data(),   trunc_v.data()};
  std::vector<float> adv(3), ret(3);
  const float g = 0.9f, l = 0.5f;
  ComputeGae(in, g, l, adv.data(), ret.data());
  const float a2 = 3 + g * 2 - 1;
  const float a1 = 2 - 0.25f;  // terminated: no bootstrap, no carry
  const float a0 = (1 + g * 0.25f - 0.5f) + g * l * a1;
  EXPECT_FLOAT_EQ(adv[2], a2);
  EXPECT_FLOAT_EQ(adv[1], a1);
  EXPECT_FLOAT_EQ(adv[0], a0);
  EXPECT_FLOAT_EQ(ret[0], a0 + 0.5f);
}

TEST(GaeTest, TruncationBootstrapsFromFinalObservationValue) {
  const std::vector<float> rewards = {1, 1}, values = {0, 0}, next = {100};
  const std::vector<uint8_t> term = {0, 0}, trunc = {1, 0};
  const std::vector<float> trunc_v = {10, 0};
  GaeInputs in{2,           1,           rewards.data(), values.data(),
               next.data(), term.data(), trunc.data(),   trunc_v.data()};
  std::vector<float> adv(2), ret(2);
  ComputeGae(in, 0.5f, 1.0f, adv.data(), ret.data());
  EXPECT_FLOAT_EQ(adv[1], 1 + 0.5f * 100);
  // Truncated at t=0: bootstrap from V(final obs)=10, do not carry adv[1].
  EXPECT_FLOAT_EQ(adv[0], 1 + 0.5f * 10);
}

// Vectorised over E equals E independent single-env computations.
TEST(GaeTest, BatchMatchesPerEnvironmentReference) {
  const int T = 17, E = 5;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::bernoulli_distribution flag(0.1);
  std::vector<float> r(T * E), v(T * E), tv(T * E), nv(E);
  std::vector<uint8_t> term(T * E), trunc(T * E);
  for (int i = 0; i < T * E; ++i) {
    r[i] = u(rng), v[i] = u(rng), tv[i] = u(rng);
    term[i] = flag(rng), trunc[i] = flag(rng);
  }
  for (float& x : nv) x = u(rng);
  std::vector<float> adv(T * E), ret(T * E);
  ComputeGae({T, E, r.data(), v.data(), nv.data(), term.data(), trunc.data(),
              tv.data()},
             0.99f, 0.95f, adv.data(), ret.data());
  for (int e = 0; e < E; ++e) {
    std::vector<float> r1(T), v1(T), tv1(T);
    std::vector<uint8_t> te1(T), tr1(T);
    for (int t = 0; t < T; ++t) {
      r1[t] = r[t * E + e], v1[t] = v[t * E + e], tv1[t] = tv[t * E + e];
      te1[t] = term[t * E + e], tr1[t] = trunc[t * E + e];
    }
    std::vector<float> a1(T), ret1(T);
    ComputeGae({T, 1, r1.data(), v1.data(), &nv[e], te1.data(), tr1.data(),
                tv1.data()},
               0.99f, 0.95f, a1.data(), ret1.data());
    for (int t = 0; t < T; ++t) {
      EXPECT_FLOAT_EQ(adv[t * E + e], a1[t]);
      EXPECT_FLOAT_EQ(ret[t * E + e], ret1[t]);
    }
  }
}

}  // namespace
}  // namespace rl
