#include "policy/segment_codec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

SegmentShape Shape() {
  SegmentShape shape;
  shape.env.set_id("CartPole-v1");
  shape.env.set_observation_size(4);
  shape.env.set_num_discrete_actions(2);
  shape.num_steps = 3;
  shape.num_envs = 2;
  return shape;
}

RolloutSegment Valid() {
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.observations.uniform_();
  r.actions.fill_(1);
  r.terminated[1][0] = 1;
  RolloutSegment s;
  EXPECT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = Shape().env;
  s.add_episode_returns(12.0f);
  s.add_episode_lengths(12);
  return s;
}

std::string Error(const RolloutSegment& s) {
  auto r = DecodeSegment(s, Shape());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(SegmentCodecTest, RoundTrip) {
  const RolloutSegment s = Valid();
  auto r = DecodeSegment(s, Shape());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->terminated.scalar_type(), torch::kUInt8);
  EXPECT_EQ(r->terminated[1][0].item<int>(), 1);
  EXPECT_EQ(r->num_steps(), 3);
  EXPECT_TRUE(torch::all(r->actions == 1).item<bool>());
}

// A deep copy.
Rollout Clone(const Rollout& r) {
  Rollout c;
  for (const auto member :
       {&Rollout::observations, &Rollout::actions, &Rollout::log_probs,
        &Rollout::values, &Rollout::rewards, &Rollout::terminated,
        &Rollout::truncated, &Rollout::truncated_values,
        &Rollout::next_observations, &Rollout::next_values,
        &Rollout::action_masks}) {
    if ((r.*member).defined()) c.*member = (r.*member).clone();
  }
  return c;
}

// uint8 observations (images) travel as bytes, come back as uint8, and a
// segment whose observations are of the other dtype is refused by name.
TEST(SegmentCodecTest, UInt8ObservationsRoundTripAsBytes) {
  SegmentShape shape = Shape();
  shape.env.set_observation_dtype("uint8");
  Rollout r = Rollout::Allocate(3, 2, 4, 0, 0, 0, torch::kUInt8);
  r.observations.random_(0, 256);
  r.next_observations.fill_(255);
  r.actions.fill_(1);
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = shape.env;
  EXPECT_EQ(s.observations().dtype(), DTYPE_UINT8);
  EXPECT_EQ(s.observations().data().size(), 3u * 2 * 4);  // a byte each
  auto decoded = DecodeSegment(s, shape);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->observations.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(decoded->observations, r.observations));
  EXPECT_TRUE(torch::equal(decoded->next_observations, r.next_observations));
  // A float32 segment for a uint8 run, and the reverse.
  EXPECT_THAT(std::string(DecodeSegment(Valid(), shape).status().message()),
              HasSubstr("segment.env.observation_dtype: must be uint8"));
  EXPECT_THAT(Error(s),
              HasSubstr("segment.env.observation_dtype: must be float32"));
  // The env says uint8 but the tensor is float32.
  RolloutSegment lying = Valid();
  lying.mutable_env()->set_observation_dtype("uint8");
  EXPECT_THAT(std::string(DecodeSegment(lying, shape).status().message()),
              HasSubstr("segment.observations"));
}

// Action masks travel as bool [T, E, n], come back as the rollout's uint8,
// concatenate, and are checked: every row allows an action, the action
// taken is allowed, and a run without masks gets none.
TEST(SegmentCodecTest, ActionMasksRoundTripAndAreChecked) {
  SegmentShape shape = Shape();
  shape.env.set_num_discrete_actions(3);
  shape.env.set_action_mask(true);
  Rollout r = Rollout::Allocate(3, 2, 4, 0, 3);
  r.actions.fill_(1);
  r.action_masks.fill_(1);
  r.action_masks[0][1][0] = 0;  // action 0 masked at step 0, env 1
  r.action_masks[2][0][2] = 0;
  auto encode = [&](const Rollout& rollout) {
    RolloutSegment s;
    EXPECT_TRUE(EncodeSegment(rollout, &s).ok());
    *s.mutable_env() = shape.env;
    return s;
  };
  const RolloutSegment s = encode(r);
  EXPECT_EQ(s.action_masks().dtype(), DTYPE_BOOL);
  auto decoded = DecodeSegment(s, shape);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->action_masks.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(decoded->action_masks, r.action_masks));
  auto both = ConcatenateRollouts({*decoded, *decoded});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->action_masks.sizes(), (std::vector<int64_t>{3, 4, 3}));
  EXPECT_FALSE(
      ConcatenateRollouts({*decoded, Rollout::Allocate(3, 2, 4, 0)}).ok());

  Rollout taken = Clone(r);
  taken.actions[0][1] = 0;  // the masked action
  EXPECT_THAT(
      std::string(DecodeSegment(encode(taken), shape).status().message()),
      HasSubstr("segment.action_masks: at step 0, env 1 the action "
                "taken (0) is masked"));
  Rollout none = Clone(r);
  none.action_masks[1][1].fill_(0);
  EXPECT_THAT(
      std::string(DecodeSegment(encode(none), shape).status().message()),
      HasSubstr("at step 1, env 1 no action is allowed"));
  RolloutSegment missing = s;
  missing.clear_action_masks();
  EXPECT_THAT(std::string(DecodeSegment(missing, shape).status().message()),
              HasSubstr("segment.action_masks"));
  // A run without masks refuses a segment that carries some.
  SegmentShape unmasked = shape;
  unmasked.env.set_action_mask(false);
  EXPECT_THAT(std::string(DecodeSegment(s, unmasked).status().message()),
              HasSubstr("the run's env writes no action masks"));
}

TEST(SegmentCodecTest, MultiDiscreteActionsRoundTripPerPart) {
  SegmentShape shape = Shape();
  shape.env.set_num_discrete_actions(0);
  shape.env.add_action_nvec(3);
  shape.env.add_action_nvec(2);
  shape.env.set_action_mask(true);
  Rollout r = Rollout::Allocate(3, 2, 4, 0, 5, 2);
  ASSERT_EQ(r.actions.sizes(), (std::vector<int64_t>{3, 2, 2}));
  r.actions.select(2, 0).fill_(2);
  r.actions.select(2, 1).fill_(1);
  r.action_masks.fill_(1);
  r.action_masks[1][0][3] = 0;  // part 1, choice 0: masked, not taken
  auto encode = [&](const Rollout& rollout) {
    RolloutSegment s;
    EXPECT_TRUE(EncodeSegment(rollout, &s).ok());
    *s.mutable_env() = shape.env;
    return s;
  };
  const RolloutSegment segment = encode(r);  // the decoded rollout aliases it
  auto decoded = DecodeSegment(segment, shape);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(torch::equal(decoded->actions, r.actions));
  Rollout out_of_range = Clone(r);
  out_of_range.actions[0][1][1] = 2;  // part 1 has 2 choices
  EXPECT_THAT(
      std::string(
          DecodeSegment(encode(out_of_range), shape).status().message()),
      HasSubstr("segment.actions: part 1 must be in [0, 2) (got 2)"));
  Rollout masked = Clone(r);
  masked.action_masks[2][1][4] = 0;  // part 1, choice 1: the one taken
  EXPECT_THAT(
      std::string(DecodeSegment(encode(masked), shape).status().message()),
      HasSubstr("at step 2, env 1, part 1 the action taken (1) is masked"));
}

TEST(SegmentCodecTest, EveryBadFieldIsNamed) {
  RolloutSegment s = Valid();
  s.mutable_env()->set_id("Acrobot-v1");
  EXPECT_THAT(Error(s), HasSubstr("segment.env.id"));

  s = Valid();
  s.mutable_env()->set_observation_size(6);
  EXPECT_THAT(Error(s), HasSubstr("segment.env: sizes"));

  s = Valid();
  s.mutable_rewards()->set_shape(0, 4);
  EXPECT_THAT(Error(s), HasSubstr("segment.rewards"));

  s = Valid();
  s.mutable_observations()->mutable_data()->pop_back();
  EXPECT_THAT(Error(s), HasSubstr("segment.observations.data"));

  // Empty, with strides that overflow: LibTorch threw (uncaught) on it.
  s = Valid();
  s.mutable_observations()->clear_shape();
  s.mutable_observations()->add_shape(0);
  s.mutable_observations()->add_shape(int64_t{1} << 40);
  s.mutable_observations()->add_shape(int64_t{1} << 40);
  s.mutable_observations()->clear_data();
  EXPECT_THAT(Error(s), HasSubstr("segment.observations.shape: [0, "
                                  "1099511627776, 1099511627776] overflows"));

  s = Valid();
  s.mutable_values()->set_dtype(DTYPE_INT32);  // same size, wrong type
  EXPECT_THAT(Error(s),
              HasSubstr("segment.values: expected Float[3, 2], got Int[3, 2]"));

  s = Valid();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  s.mutable_log_probs()->mutable_data()->replace(
      0, 4, reinterpret_cast<const char*>(&nan), 4);
  EXPECT_THAT(Error(s), HasSubstr("segment.log_probs: values must be finite"));

  s = Valid();
  (*s.mutable_actions()->mutable_data())[0] = 7;  // action 7 of 2
  EXPECT_THAT(Error(s), HasSubstr("segment.actions: must be in [0, 2)"));

  s = Valid();
  (*s.mutable_truncated()->mutable_data())[0] = 5;
  EXPECT_THAT(Error(s), HasSubstr("segment.truncated.data: DTYPE_BOOL element "
                                  "0 is 5 (must be 0 or 1)"));

  s = Valid();
  s.add_episode_returns(1.0f);
  EXPECT_THAT(Error(s), HasSubstr("segment.episode_returns"));

  s = Valid();
  s.clear_next_values();
  EXPECT_THAT(Error(s), HasSubstr("segment.next_values"));
}

TEST(SegmentCodecTest, RewardsAndReturnsOutsideTheEnvsRangeAreRefused) {
  SegmentShape shape = Shape();
  shape.min_reward = 0;  // CartPole: 1 a step
  shape.max_reward = 1;
  shape.min_step_return = 0;
  shape.max_step_return = 1;
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.rewards.fill_(1);
  r.terminated[1][0] = 1;
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = shape.env;
  s.add_episode_returns(12.0f);
  s.add_episode_lengths(12);
  ASSERT_TRUE(DecodeSegment(s, shape).ok());

  // Finite but huge: the reward that once poisoned a whole run.
  r.rewards[2][1] = 3e38f;
  RolloutSegment huge;
  ASSERT_TRUE(EncodeSegment(r, &huge).ok());
  *huge.mutable_env() = shape.env;
  huge.add_episode_returns(12.0f);
  huge.add_episode_lengths(12);
  auto decoded = DecodeSegment(huge, shape);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("segment.rewards: element 5 is 3e+38, outside the "
                        "environment's range"));

  RolloutSegment long_return = s;
  long_return.set_episode_returns(0, 13.0f);  // 12 steps of at most 1
  decoded = DecodeSegment(long_return, shape);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("segment.episode_returns[0]: 13 is outside the "
                        "environment's range"));
  // More episodes than a segment's steps can end: sized by the run.
  RolloutSegment padded = s;
  for (int i = 0; i < 6; ++i) {
    padded.add_episode_returns(1.0f);
    padded.add_episode_lengths(1);
  }
  decoded = DecodeSegment(padded, shape);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("segment.episode_returns: 7 entries, more than the 6 "
                        "episodes a segment of the run can end"));
  // Without bounds (the default shape) both pass the finite checks.
  EXPECT_TRUE(DecodeSegment(huge, Shape()).ok());
}

// A segment claims only the episodes its flags end, each as long as the
// segment's steps allow: a forged "solved" episode in an otherwise valid
// segment is refused.
TEST(SegmentCodecTest, EpisodesMustFitTheSegment) {
  SegmentShape shape = Shape();
  shape.env.set_max_episode_steps(500);
  shape.min_step_return = 0;
  shape.max_step_return = 1;
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.terminated[0][1] = 1;  // env 1 ends at steps 0 and 2
  r.truncated[2][1] = 1;
  r.terminated[2][0] = 1;  // env 0 at step 2
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = shape.env;
  // Row-major order: (0,1), (2,0), (2,1).
  for (const int length : {40, 3, 2}) {
    s.add_episode_returns(static_cast<float>(length));
    s.add_episode_lengths(length);
  }
  ASSERT_TRUE(DecodeSegment(s, shape).ok()) << DecodeSegment(s, shape).status();

  auto error = [&](const RolloutSegment& bad) {
    auto decoded = DecodeSegment(bad, shape);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(decoded.status().message());
  };
  // An extra episode that no flag ends: a "solved" claim from nothing.
  RolloutSegment extra = s;
  extra.add_episode_returns(500);
  extra.add_episode_lengths(500);
  EXPECT_THAT(error(extra),
              HasSubstr("segment.episode_lengths: 4 episodes, but the "
                        "segment's terminated/truncated flags end 3"));
  // One missing.
  RolloutSegment missing = s;
  missing.mutable_episode_returns()->RemoveLast();
  missing.mutable_episode_lengths()->RemoveLast();
  EXPECT_THAT(error(missing), HasSubstr("flags end more (env 1 at step 2)"));
  // A second episode of env 1 must last exactly the 2 steps since its end.
  RolloutSegment stretched = s;
  stretched.set_episode_lengths(2, 500);
  stretched.set_episode_returns(2, 500);
  EXPECT_THAT(error(stretched),
              HasSubstr("segment.episode_lengths[2]: 500 steps does not fit "
                        "the segment (env 1 ended at step 2, 2 steps after "
                        "its previous end"));
  // A first end at step 2 spans at least 3 steps, and at most the limit.
  RolloutSegment short_first = s;
  short_first.set_episode_lengths(1, 2);
  short_first.set_episode_returns(1, 2);
  EXPECT_THAT(error(short_first), HasSubstr("at least 3"));
  RolloutSegment over_limit = s;
  over_limit.set_episode_lengths(0, 501);
  EXPECT_THAT(error(over_limit), HasSubstr("time limit 500"));
  // A discrete action's probability is at most 1.
  r.log_probs[1][1] = 0.5f;
  RolloutSegment impossible;
  ASSERT_TRUE(EncodeSegment(r, &impossible).ok());
  *impossible.mutable_env() = shape.env;
  EXPECT_THAT(error(impossible), HasSubstr("segment.log_probs: element 3"));
}

// Finite but absurd: a log-probability no sampler gives (the update's ratio
// would overflow and skip the whole batch) is refused, naming the field.
TEST(SegmentCodecTest, ALogProbabilityNoSamplerGivesIsRefused) {
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.terminated[1][0] = 1;
  r.log_probs.fill_(-900.0f);  // unlikely, yet within the bound
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = Shape().env;
  s.add_episode_returns(12.0f);
  s.add_episode_lengths(12);
  EXPECT_TRUE(DecodeSegment(s, Shape()).ok());
  r.log_probs[2][0] = -1e30f;
  RolloutSegment absurd = s;
  ASSERT_TRUE(EncodeSegment(r, &absurd).ok());
  EXPECT_THAT(Error(absurd),
              HasSubstr("segment.log_probs: element 4 is -1e+30, outside a "
                        "sampled action's range [-1000.01"));
}

// Rows the run's learner sends on to a policy's learner of its own carry
// flags but no episodes (the run's learner counted them); any are refused.
TEST(SegmentCodecTest, RowsSentOnCarryNoEpisodes) {
  SegmentShape shape = Shape();
  shape.episodes = false;
  RolloutSegment rows = Valid();
  rows.clear_episode_returns();
  rows.clear_episode_lengths();
  ASSERT_TRUE(DecodeSegment(rows, shape).ok())
      << DecodeSegment(rows, shape).status();
  EXPECT_FALSE(DecodeSegment(rows, Shape()).ok());  // where episodes count
  auto decoded = DecodeSegment(Valid(), shape);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("rows sent on by the run's learner carry no episodes"));
}

// With env.episodic_life (Atari's lives) the episodes are games: fewer
// than the flags' ends, of any length, their returns in raw rewards beyond
// the clipped per-step range; never more than the flags end.
TEST(SegmentCodecTest, GamesEndOnSomeOfTheFlagsEnds) {
  SegmentShape shape = Shape();
  shape.env.set_episodic_life(true);
  shape.min_step_return = -1;
  shape.max_step_return = 1;
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.terminated[0][1] = 1;  // three lives lost, one of them the game's last
  r.terminated[1][0] = 1;
  r.terminated[2][1] = 1;
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = shape.env;
  s.add_episode_returns(420);  // a Breakout game of 900 steps, 7-point bricks
  s.add_episode_lengths(900);
  ASSERT_TRUE(DecodeSegment(s, shape).ok()) << DecodeSegment(s, shape).status();
  for (int i = 0; i < 2; ++i) {
    s.add_episode_returns(1);
    s.add_episode_lengths(10);
  }
  ASSERT_TRUE(DecodeSegment(s, shape).ok());  // three games: every end
  s.add_episode_returns(1);
  s.add_episode_lengths(10);
  const absl::Status status = DecodeSegment(s, shape).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("segment.episode_lengths: 4 games, but the "
                        "segment's terminated/truncated flags end 3 "
                        "episodes"));
  // Without lives the same 900-step return is refused (3 steps at most 1).
  RolloutSegment plain;
  ASSERT_TRUE(EncodeSegment(r, &plain).ok());
  shape.env.set_episodic_life(false);
  *plain.mutable_env() = shape.env;
  plain.add_episode_returns(420);
  plain.add_episode_lengths(900);
  EXPECT_FALSE(DecodeSegment(plain, shape).ok());
}

// Agents that leave early: alive travels with the segment of a run that
// allows it (and only there); padding pays and ends nothing, a row leaves
// only at its episode's end, and an episode lasts its alive steps.
TEST(SegmentCodecTest, AliveOfAgentsThatLeaveRoundTripsAndIsChecked) {
  SegmentShape shape = Shape();
  shape.num_steps = 4;
  shape.env.set_agents_per_env(2);
  shape.env.set_agents_leave(true);
  // Env 0 leaves after step 0 (its 5-step episode ends there), is padding
  // at steps 1-2, and its next episode runs step 3.
  Rollout r = Rollout::Allocate(4, 2, 4, 0, 0, 0, torch::kFloat32, 0, true);
  r.alive[1][0] = 0;
  r.alive[2][0] = 0;
  r.terminated[0][0] = 1;
  r.terminated[2][1] = 1;  // env 1's 3-step episode ends at step 2
  r.terminated[3][0] = 1;  // env 0's next episode: 1 alive step
  r.rewards.fill_(1);
  r.rewards[1][0] = 0;
  r.rewards[2][0] = 0;
  RolloutSegment s;
  ASSERT_TRUE(EncodeSegment(r, &s).ok());
  *s.mutable_env() = shape.env;
  for (const int length : {5, 3, 1}) {
    s.add_episode_returns(static_cast<float>(length));
    s.add_episode_lengths(length);
  }
  auto decoded = DecodeSegment(s, shape);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(torch::equal(decoded->alive, r.alive));
  ASSERT_TRUE(ConcatenateRollouts({*decoded, *decoded}).ok());
  EXPECT_EQ(ConcatenateRollouts({*decoded, *decoded})->alive.size(1), 4);

  const auto error = [&](RolloutSegment bad) {
    auto got = DecodeSegment(bad, shape);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(got.status().message());
  };
  // Counting the padding, env 0's last episode would be 3 steps long.
  RolloutSegment long_last = s;
  long_last.set_episode_lengths(2, 3);
  EXPECT_THAT(error(long_last), HasSubstr("segment.episode_lengths[2]: 3"));
  Rollout paid = r;
  paid.rewards = r.rewards.clone();
  paid.rewards[1][0] = 0.5;
  RolloutSegment paid_segment;
  ASSERT_TRUE(EncodeSegment(paid, &paid_segment).ok());
  *paid_segment.mutable_env() = shape.env;
  *paid_segment.mutable_episode_returns() = s.episode_returns();
  *paid_segment.mutable_episode_lengths() = s.episode_lengths();
  EXPECT_THAT(error(paid_segment),
              AllOf(HasSubstr("segment.alive: at step 1, env 0"),
                    HasSubstr("reward is 0.5")));
  Rollout leaves = r;
  leaves.terminated = r.terminated.clone();
  leaves.terminated[0][0] = 0;
  RolloutSegment leaves_segment;
  ASSERT_TRUE(EncodeSegment(leaves, &leaves_segment).ok());
  *leaves_segment.mutable_env() = shape.env;
  EXPECT_THAT(error(leaves_segment),
              HasSubstr("env 0 leaves its game after step 0 without its "
                        "episode ending there"));
  // A run whose agents do not leave takes no alive; one that does needs it.
  SegmentShape together = shape;
  together.env.set_agents_leave(false);
  auto refused = DecodeSegment(s, together);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("segment.alive: the run's agents do not leave early"));
  RolloutSegment none = s;
  none.clear_alive();
  EXPECT_THAT(error(none), HasSubstr("segment.alive"));
}

TEST(SegmentCodecTest, ConcatenatesAlongEnvironments) {
  Rollout a = Rollout::Allocate(3, 2, 4, 0), b = Rollout::Allocate(3, 5, 4, 0);
  b.rewards.fill_(1);
  auto c = ConcatenateRollouts({a, b});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_envs(), 7);
  EXPECT_EQ(c->next_observations.size(0), 7);
  EXPECT_EQ(c->rewards.sum().item<float>(), 15.0f);
}

// Shape failures inside LibTorch (torch::cat) come back as a Status naming
// the rollout, not as an exception.
TEST(SegmentCodecTest, RolloutsThatDoNotFitAreAnErrorStatus) {
  const Rollout a = Rollout::Allocate(3, 2, 4, 0);
  auto steps = ConcatenateRollouts({a, Rollout::Allocate(5, 2, 4, 0)});
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(steps.status().message()),
              HasSubstr("rollouts[1].observations: expected Float[3, -1, 4], "
                        "got Float[5, 2, 4]"));
  auto obs = ConcatenateRollouts({a, a, Rollout::Allocate(3, 2, 6, 0)});
  EXPECT_EQ(obs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(obs.status().message()),
              HasSubstr("rollouts[2].observations"));
  auto continuous = ConcatenateRollouts({a, Rollout::Allocate(3, 2, 4, 1)});
  EXPECT_THAT(std::string(continuous.status().message()),
              HasSubstr("rollouts[1].actions: expected Long[3, -1], got "
                        "Float[3, 2, 1]"));
  EXPECT_EQ(ConcatenateRollouts({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SegmentCodecTest, EncodingAnUnallocatedRolloutIsAnErrorStatus) {
  Rollout r = Rollout::Allocate(3, 2, 4, 0);
  r.truncated_values = torch::Tensor();
  RolloutSegment s;
  const absl::Status status = EncodeSegment(r, &s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("rollout.truncated_values: undefined"));
  EXPECT_EQ(EncodeSegment(Rollout(), &s).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rl
