#include "runspec/run_footprint.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/learner.pb.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

RunSpec Resolved(const std::string& yaml) {
  absl::StatusOr<RunSpec> spec = LoadRunSpec(yaml, RunFileFormat::kYaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : RunSpec();
}

constexpr double kMessageLimit = 256 << 20;

TEST(RunFootprintTest, SegmentBytesFollowTheWireLayout) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 8
segment_length: 128
ppo: {num_minibatches: 4}
policy: {hidden_sizes: [64, 64]}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  // Per row: 4 observation floats, an int64 action, log prob, value,
  // reward, truncated value, two flag bytes, an episode (9 bytes); then
  // 8 x (4 + 1) floats, and what every message carries.
  EXPECT_EQ(f.segment_bytes, 8 * 128 * (16 + 8 + 16 + 2 + 9) + 8 * 5 * 4 +
                                 1024 + spec.env().ByteSizeLong() +
                                 spec.name().size());
  // Two trunks 4-64-64, a 64x2 policy head, a 64x1 value head.
  const double trunk = (4 * 64 + 64) + (64 * 64 + 64);
  EXPECT_EQ(f.parameters, 2 * trunk + (64 * 2 + 2) + (64 + 1));
  EXPECT_GT(f.actor_bytes, f.policy_bytes + f.segment_bytes);
  EXPECT_GT(f.learner_bytes, 4 * f.parameters * 4);
  EXPECT_OK(CheckRunFootprint(spec, f, {kMessageLimit, 1e9, 1e9}));
}

// uint8 observations are a byte per element on the wire, not four.
TEST(RunFootprintTest, ByteObservationsAreAQuarterOfFloats) {
  auto run = [](const char* dtype) {
    return Resolved(absl::StrCat(R"(
env: {id: Pixels-v0, plugin: libpixel_plugin.so, observation_shape: [84, 84, 4],
      num_discrete_actions: 6, observation_dtype: )",
                                 dtype, R"(}
envs_per_actor: 8
segment_length: 128
)"));
  };
  const RunFootprint floats = EstimateRunFootprint(run("float32"));
  const RunFootprint bytes = EstimateRunFootprint(run("uint8"));
  const double observation_rows = 8 * 128 + 8;  // segment rows + next obs
  EXPECT_NEAR(floats.segment_bytes - bytes.segment_bytes,
              observation_rows * 84 * 84 * 4 * 3, 64);
  EXPECT_LT(bytes.segment_bytes, 0.3 * floats.segment_bytes);
}

// A tensor field of `bytes` bytes with `shape`, as the codec writes it.
void Fill(Tensor* tensor, DType dtype, std::vector<int64_t> shape,
          int64_t bytes) {
  tensor->set_dtype(dtype);
  for (int64_t d : shape) tensor->add_shape(d);
  tensor->set_data(std::string(static_cast<size_t>(bytes), '\x7f'));
}

// The estimate is an upper bound of the encoded size, over a sweep of
// specs, for the largest segment each can send: every step ends an episode
// of the longest length, every id and counter at its widest.
TEST(RunFootprintTest, SegmentBytesBoundTheEncodedSize) {
  int checked = 0;
  for (const char* env : {"CartPole-v1", "Pendulum-v1", "Acrobot-v1",
                          "MountainCarContinuous-v0"}) {
    for (const int envs : {1, 3, 64}) {
      for (const int steps : {1, 7, 256}) {
        const RunSpec spec = Resolved(
            absl::StrCat("env: {id: ", env, "}\nenvs_per_actor: ", envs,
                         "\nsegment_length: ", steps,
                         "\nppo: {num_minibatches: 1}"
                         "\nname: a-run-name-of-some-length-for-the-test\n"));
        const EnvSpec& e = spec.env();
        const int64_t T = steps, E = envs, O = e.observation_size();
        const bool discrete = e.num_discrete_actions() > 0;
        const int64_t A = discrete ? 1 : e.continuous_action_size();
        RolloutSegment s;
        s.set_run_id("run-0000000000000042");
        s.set_actor_id(std::numeric_limits<int32_t>::max());
        s.set_sequence_number(std::numeric_limits<int64_t>::max());
        s.set_policy_version(std::numeric_limits<int64_t>::max());
        s.set_actor_incarnation(std::numeric_limits<uint64_t>::max());
        *s.mutable_env() = e;
        Fill(s.mutable_observations(), DTYPE_FLOAT32, {T, E, O}, T * E * O * 4);
        if (discrete) {
          Fill(s.mutable_actions(), DTYPE_INT64, {T, E}, T * E * 8);
        } else {
          Fill(s.mutable_actions(), DTYPE_FLOAT32, {T, E, A}, T * E * A * 4);
        }
        for (Tensor* t : {s.mutable_log_probs(), s.mutable_values(),
                          s.mutable_rewards(), s.mutable_truncated_values()}) {
          Fill(t, DTYPE_FLOAT32, {T, E}, T * E * 4);
        }
        Fill(s.mutable_terminated(), DTYPE_BOOL, {T, E}, T * E);
        Fill(s.mutable_truncated(), DTYPE_BOOL, {T, E}, T * E);
        Fill(s.mutable_next_observations(), DTYPE_FLOAT32, {E, O}, E * O * 4);
        Fill(s.mutable_next_values(), DTYPE_FLOAT32, {E}, E * 4);
        for (int64_t i = 0; i < T * E; ++i) {
          s.add_episode_returns(-1e30f);
          s.add_episode_lengths(std::numeric_limits<int32_t>::max());
        }
        const RunFootprint f = EstimateRunFootprint(spec);
        EXPECT_GE(f.segment_bytes, static_cast<double>(s.ByteSizeLong()))
            << env << " envs " << envs << " steps " << steps;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 36);
}

TEST(RunFootprintTest, ContinuousActionsAndLogStdCount) {
  const RunSpec spec = Resolved(R"(
env: {id: Pendulum-v1}
envs_per_actor: 2
segment_length: 4
ppo: {num_minibatches: 1}
policy: {hidden_sizes: [8]}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  // Pendulum: 3 observations, 1 continuous action (a float on the wire).
  EXPECT_EQ(f.segment_bytes, 2 * 4 * (12 + 4 + 16 + 2 + 9) + 2 * 4 * 4 + 1024 +
                                 spec.env().ByteSizeLong());
  EXPECT_EQ(f.parameters, 2 * (3 * 8 + 8) + (8 + 1) + (8 + 1) + 1);
}

// Simple Spread's spaces, 6 envs x 4 steps, with the policy block `policy`.
RunFootprint SpreadFootprint(const std::string& policy) {
  return EstimateRunFootprint(Resolved(absl::StrCat(R"(
env: {id: SimpleSpread-v3, plugin: mpe_spread, agents_per_env: 3,
      observation_size: 18, num_discrete_actions: 5}
envs_per_actor: 6
segment_length: 4
ppo: {num_minibatches: 1}
policy: )",
                                                    policy, "\n")));
}

// A central critic's value trunk reads the 3 agents' 18 observations.
TEST(RunFootprintTest, ACentralCriticsValueTrunkReadsEveryAgent) {
  const RunFootprint own = SpreadFootprint("{hidden_sizes: [8]}");
  const RunFootprint central =
      SpreadFootprint("{hidden_sizes: [8], central_value: true}");
  EXPECT_EQ(own.parameters, 2 * (18 * 8 + 8) + (8 * 5 + 5) + (8 + 1));
  EXPECT_EQ(central.parameters,
            (18 * 8 + 8) + (54 * 8 + 8) + (8 * 5 + 5) + (8 + 1));
  // Its gathered input (54 floats a row): the actor's 6 rows hold it once,
  // and its forward over a segment's 4 x 6 rows for truncated steps holds
  // their observations, that input and both trunks' 8 units; the learner's
  // minibatch of 24 rows forward and backward. The weights count 4 times
  // at the learner (with gradients and Adam's moments), their bytes once
  // at the actor.
  const double weights = (central.parameters - own.parameters) * 4;
  EXPECT_EQ(central.actor_bytes - own.actor_bytes,
            weights + 6 * 54 * 4 + 4 * 6 * (18 + 54 + 2 * 8) * 4);
  EXPECT_EQ(central.learner_bytes - own.learner_bytes,
            4 * weights + 24 * 2 * 54 * 4);
}

// Beside a core the value head reads the 3 agents' core outputs (3 x 6),
// and the forward for truncated steps holds the GRU's 3 gates and state.
TEST(RunFootprintTest, ACentralCriticBesideACoreReadsEveryAgentsCore) {
  const RunFootprint own =
      SpreadFootprint("{hidden_sizes: [8], core: gru, core_size: 6}");
  const RunFootprint central = SpreadFootprint(
      "{hidden_sizes: [8], core: gru, core_size: 6, central_value: true}");
  EXPECT_EQ(central.parameters - own.parameters, 18 - 6);
  const double weights = (central.parameters - own.parameters) * 4;
  EXPECT_EQ(central.actor_bytes - own.actor_bytes,
            weights + 6 * 18 * 4 + 4 * 6 * (18 + 18 + 2 * 8 + 3 * 6 + 6) * 4);
  EXPECT_EQ(central.learner_bytes - own.learner_bytes,
            4 * weights + 24 * 2 * 18 * 4);
}

// A policies block: one publication carries every policy's weights, an
// actor and a learner hold every policy, the rollout and the batch once.
RunSpec TwoPolicies(const std::string& blue, const std::string& resources) {
  return Resolved(absl::StrCat(R"(
env: {id: SimpleSpread-v3, plugin: mpe_spread, agents_per_env: 3,
      observation_size: 18, num_discrete_actions: 5}
envs_per_actor: 6
segment_length: 4
ppo: {num_minibatches: 1}
policy: {hidden_sizes: [8]}
resources: )",
                               resources, R"(
policies:
  - {name: red, agents: [0, 1]}
  - {name: blue, agents: [2], policy: )",
                               blue, "}\n"));
}

TEST(RunFootprintTest, EveryPolicyOfAPoliciesBlockCounts) {
  const RunFootprint red = SpreadFootprint("{hidden_sizes: [8]}");
  const RunFootprint blue = SpreadFootprint("{hidden_sizes: [16]}");
  const RunFootprint both =
      EstimateRunFootprint(TwoPolicies("{hidden_sizes: [16]}", "{}"));
  EXPECT_EQ(both.parameters, red.parameters + blue.parameters);
  EXPECT_EQ(both.policy_bytes, red.policy_bytes + blue.policy_bytes);
  EXPECT_EQ(both.segment_bytes, red.segment_bytes);
  EXPECT_EQ(both.actor_bytes,
            red.actor_bytes + blue.actor_bytes - 2 * red.segment_bytes);
  // The received segments (3 copies of one actor's) and the batch's 4
  // floats a row (24 rows) once.
  EXPECT_EQ(both.learner_bytes, red.learner_bytes + blue.learner_bytes -
                                    3 * red.segment_bytes - 24 * 4 * 4);
  EXPECT_EQ(both.policy_rows_bytes, 0);

  // A second policy too wide to publish, though the run's own is small.
  const RunSpec wide = TwoPolicies("{hidden_sizes: [8192, 8192]}", "{}");
  EXPECT_THAT(
      CheckRunFootprint(wide, EstimateRunFootprint(wide), {kMessageLimit}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("policy.hidden_sizes, "
                               "policies[].policy: the run's 2 "
                               "policies have about"),
                     HasSubstr("over the 256 MiB message limit"))));
}

// With a learner per policy, the run's learner sends blue (1 agent of 3)
// its rows of 4 actors' segments in one message: more than a segment.
TEST(RunFootprintTest, APolicysRowsMustFitOneMessageToItsLearner) {
  const RunSpec spec = TwoPolicies("{hidden_sizes: [8]}",
                                   "{num_actors: 4, learner_per_policy: true}");
  const RunFootprint f = EstimateRunFootprint(spec);
  EXPECT_DOUBLE_EQ(f.policy_rows_bytes, 4 * f.segment_bytes / 3);
  EXPECT_EQ(f.policy_rows_name, "blue");
  // The run's learner holds that message as built and as serialised.
  const RunFootprint shared = EstimateRunFootprint(
      TwoPolicies("{hidden_sizes: [8]}", "{num_actors: 4}"));
  EXPECT_EQ(shared.policy_rows_bytes, 0);
  EXPECT_DOUBLE_EQ(f.learner_bytes - shared.learner_bytes,
                   2 * f.policy_rows_bytes);
  EXPECT_OK(CheckRunFootprint(spec, f, {kMessageLimit}));
  const double limit = f.policy_rows_bytes - 1;
  ASSERT_LT(f.segment_bytes, limit);  // the segments themselves fit
  EXPECT_THAT(
      CheckRunFootprint(spec, f, {limit}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("resources.learner_per_policy: policy blue's rows "
                         "of one update (its agents' share of 4 actors' "
                         "segments) are about")));
}

TEST(RunFootprintTest, AProductOfInRangeFieldsIsRefusedNamingTheFields) {
  // Each field is in range; one segment would be about 18 TiB.
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 1048576
segment_length: 65536
ppo: {num_minibatches: 1}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  EXPECT_GT(f.segment_bytes, 1e12);
  const absl::Status status =
      CheckRunFootprint(spec, f, {kMessageLimit, 64e9, 64e9});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("envs_per_actor x segment_length"),
                    HasSubstr("TiB, over the 256 MiB message limit"),
                    HasSubstr("actor memory limit"),
                    HasSubstr("learner memory limit")));
}

TEST(RunFootprintTest, AVeryWideNetworkIsRefused) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
policy: {hidden_sizes: [65536, 65536, 65536, 65536]}
)");
  const RunFootprint f = EstimateRunFootprint(spec);
  EXPECT_GT(f.parameters, 6 * 65536.0 * 65536.0);
  const absl::Status status = CheckRunFootprint(spec, f, {kMessageLimit});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("policy.hidden_sizes: the policy has about"),
                    HasSubstr("GiB per publication")));
}

TEST(RunFootprintTest, ZeroLimitsAreOff) {
  const RunSpec spec = Resolved(R"(
env: {id: CartPole-v1}
envs_per_actor: 1048576
segment_length: 65536
ppo: {num_minibatches: 1}
)");
  EXPECT_OK(CheckRunFootprint(spec, EstimateRunFootprint(spec), {}));
}

TEST(RunFootprintTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(256 << 20), "256 MiB");
  EXPECT_EQ(FormatBytes(18.0 * (1ull << 40)), "18 TiB");
}

}  // namespace
}  // namespace rl
