#include "envs/env_plugin.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"
#include "envs/env_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kProbe[] = "envs/testdata/libtest_plugin.so";

// A resolved spec of the probe plugin (envs/testdata/test_plugin.cc).
EnvSpec ProbeSpec(const std::string& mode = "ok", int obs_size = 3,
                  int fail_at = 3) {
  EnvSpec spec;
  spec.set_id("Probe-v0");
  spec.set_plugin(kProbe);
  spec.set_observation_size(obs_size);
  spec.set_num_discrete_actions(2);
  (*spec.mutable_kwargs()->mutable_fields())["mode"].set_string_value(mode);
  (*spec.mutable_kwargs()->mutable_fields())["obs_size"].set_number_value(
      obs_size);
  (*spec.mutable_kwargs()->mutable_fields())["fail_at"].set_number_value(
      fail_at);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

struct Buffers {
  explicit Buffers(int n, int obs)
      : obs(n * obs),
        final_obs(n * obs),
        rewards(n),
        terminated(n),
        truncated(n),
        returns(n),
        lengths(n) {}
  StepOutputs Outputs() {
    StepOutputs out;
    out.observations = obs.data();
    out.final_observations = final_obs.data();
    out.rewards = rewards.data();
    out.terminated = terminated.data();
    out.truncated = truncated.data();
    out.episode_returns = returns.data();
    out.episode_lengths = lengths.data();
    return out;
  }
  std::vector<float> obs, final_obs, rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<float> returns;
  std::vector<int32_t> lengths;
};

EnvOpenOptions Options(int num_envs, uint64_t seed = 7) {
  EnvOpenOptions o;
  o.num_envs = num_envs;
  o.seed = seed;
  o.search_path = std::vector<std::string>{};
  return o;
}

// The built-in table gives exactly what the classic-control batch gives.
TEST(EnvPluginTest, BuiltinsGoThroughTheSameTable) {
  for (const std::string& id : RegisteredEnvIds()) {
    EnvSpec spec;
    spec.set_id(id);
    ASSERT_OK(ResolveEnvSpec(&spec));
    ASSERT_OK_AND_ASSIGN(auto via_table, OpenEnv(spec, Options(5, 3)));
    ASSERT_OK_AND_ASSIGN(auto direct, BatchedEnv::Create(id, 5, 3));
    const int obs = spec.observation_size();
    Buffers a(5, obs), b(5, obs);
    ASSERT_OK(via_table->Reset(a.obs.data()));
    ASSERT_OK(direct->Reset(b.obs.data()));
    std::mt19937 rng(1);
    for (int t = 0; t < 300; ++t) {
      if (IsDiscrete(spec)) {
        std::vector<int64_t> actions(5);
        for (auto& x : actions) x = rng() % spec.num_discrete_actions();
        ASSERT_OK(via_table->StepDiscrete(actions.data(), a.Outputs()));
        ASSERT_OK(direct->StepDiscrete(actions.data(), b.Outputs()));
      } else {
        std::vector<float> actions(5 * spec.continuous_action_size());
        for (auto& x : actions) x = (rng() % 200) / 100.0f - 1.0f;
        ASSERT_OK(via_table->StepContinuous(actions.data(), a.Outputs()));
        ASSERT_OK(direct->StepContinuous(actions.data(), b.Outputs()));
      }
      ASSERT_EQ(a.obs, b.obs) << id << " step " << t;
      ASSERT_EQ(a.rewards, b.rewards) << id << " step " << t;
      ASSERT_EQ(a.terminated, b.terminated) << id;
      ASSERT_EQ(a.truncated, b.truncated) << id;
    }
    // Checkpoints go through the table too.
    const std::string state = via_table->SaveState();
    EXPECT_FALSE(state.empty()) << id;
    EXPECT_OK(via_table->RestoreState(state));
  }
}

TEST(EnvPluginTest, AHelperPluginStepsWithAutoResetAndEpisodeInfo) {
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(ProbeSpec(), Options(4)));
  Buffers out(4, 3);
  ASSERT_OK(env->Reset(out.obs.data()));
  EXPECT_EQ(out.obs[0], 0.0f);
  const std::vector<int64_t> ones(4, 1);
  for (int t = 1; t <= 10; ++t) {
    ASSERT_OK(env->StepDiscrete(ones.data(), out.Outputs()));
    EXPECT_EQ(out.rewards[2], 1.0f);
    if (t < 10) {
      EXPECT_FLOAT_EQ(out.obs[3], t / 10.0f);
      EXPECT_EQ(out.terminated[3], 0);
    }
  }
  // Step 10 ended every episode: the final observation is t = 10, the row
  // starts over, and the episode's return and length are reported.
  EXPECT_EQ(out.terminated[1], 1);
  EXPECT_EQ(out.truncated[1], 0);
  EXPECT_FLOAT_EQ(out.final_obs[3], 1.0f);
  EXPECT_FLOAT_EQ(out.obs[3], 0.0f);
  EXPECT_FLOAT_EQ(out.returns[1], 10.0f);
  EXPECT_EQ(out.lengths[1], 10);
  // An out-of-range action never reaches the plugin.
  const std::vector<int64_t> bad = {0, 1, 2, 0};
  EXPECT_THAT(env->StepDiscrete(bad.data(), out.Outputs()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("action 2 of env row 2")));
}

TEST(EnvPluginTest, TheSameSeedGivesTheSameEpisodesAndKwargsArrive) {
  auto first_obs = [](uint64_t seed) {
    auto env = OpenEnv(ProbeSpec("ok", 5), Options(3, seed));
    EXPECT_OK(env.status());
    Buffers out(3, 5);
    EXPECT_OK((*env)->Reset(out.obs.data()));
    return out.obs;
  };
  EXPECT_EQ(first_obs(11), first_obs(11));
  EXPECT_NE(first_obs(11), first_obs(12));
  EXPECT_EQ(first_obs(11).size(), 15u);  // kwargs.obs_size = 5
}

TEST(EnvPluginTest, APluginNamedWithoutASlashIsLookedUpInTheSearchPath) {
  EnvSpec spec = ProbeSpec();
  spec.set_plugin("libtest_plugin.so");
  EnvOpenOptions options = Options(2);
  EXPECT_THAT(OpenEnv(spec, options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("not found in $RL_ENV_PLUGIN_PATH")));
  options.search_path =
      std::vector<std::string>{"/nonexistent", "envs/testdata"};
  EXPECT_OK(OpenEnv(spec, options).status());
}

TEST(EnvPluginTest, AWorkerCanLimitWherePluginsComeFrom) {
  EnvOpenOptions options = Options(1);
  // Where the library really is, or where it is named (the runfiles tree
  // holds a symbolic link the operator's build put there).
  options.allowed_dirs = {
      std::filesystem::canonical(kProbe).parent_path().string()};
  EXPECT_OK(OpenEnv(ProbeSpec(), options).status());
  options.allowed_dirs = {"envs/testdata"};
  EXPECT_OK(OpenEnv(ProbeSpec(), options).status());
  options.allowed_dirs = {"/opt/plugins",
                          "envs/test"};  // a prefix is not a dir
  const absl::Status outside = OpenEnv(ProbeSpec(), options).status();
  EXPECT_THAT(outside,
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("outside the directories this worker loads "
                                 "plugins from (/opt/plugins:envs/test; the "
                                 "operator sets them with the actor's "
                                 "--env_plugin_dirs")));
  // Issue 46: a run file's "../" cannot climb out of an allowed directory.
  const std::string allowed = ::testing::TempDir() + "/allowed_plugins";
  std::filesystem::create_directories(allowed);
  options.allowed_dirs = {allowed};
  EnvSpec climbing = ProbeSpec();
  std::string up;
  for (int i = 0; i < 64; ++i) up += "/..";  // to "/", however deep
  climbing.set_plugin(allowed + up +
                      std::filesystem::absolute(kProbe).string());
  EXPECT_THAT(OpenEnv(climbing, options).status(),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // "*": the operator lifts the limit.
  options.allowed_dirs = {"*"};
  EXPECT_OK(OpenEnv(ProbeSpec(), options).status());
  // The default: beside the binaries, $RL_ENV_PLUGIN_PATH, the working
  // directory (the test's runfiles, where the probe lies).
  options.allowed_dirs = DefaultEnvPluginDirs();
  EXPECT_OK(OpenEnv(ProbeSpec(), options).status());
  EnvSpec elsewhere = ProbeSpec();
  elsewhere.set_plugin("/usr/lib/x86_64-linux-gnu/libm.so.6");
  EXPECT_THAT(OpenEnv(elsewhere, options).status(),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("libm.so.6: outside the directories")));
  // Built-in environments need no directory.
  options.allowed_dirs = {"/opt/plugins"};
  EnvSpec cartpole;
  cartpole.set_id("CartPole-v1");
  ASSERT_OK(ResolveEnvSpec(&cartpole));
  EXPECT_OK(OpenEnv(cartpole, options).status());
}

TEST(EnvPluginTest, EveryLoadFailureNamesItsReason) {
  EnvSpec spec = ProbeSpec();
  spec.set_plugin("envs/testdata/libno_entry_plugin.so");
  const absl::Status no_entry = OpenEnv(spec, Options(1)).status();
  EXPECT_THAT(no_entry,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("does not export rl_env_plugin_v1")));
  // It would fail on any actor: the run fails at once (common/status.h).
  EXPECT_TRUE(IsRunFatal(no_entry));
  spec.set_plugin("envs/testdata/libbad_abi_plugin.so");
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("built for plugin ABI version 42; this "
                                 "service loads version 1")));
  spec.set_plugin("envs/testdata/missing.so");
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot load it")));
  EXPECT_THAT(OpenEnv(ProbeSpec("create_error"), Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("create failed: the probe refuses")));
}

TEST(EnvPluginTest, SpacesThatDisagreeWithTheSpecAreRefused) {
  EnvSpec spec = ProbeSpec();
  spec.set_observation_size(4);  // the plugin is asked for 3
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("disagree"),
                             HasSubstr("Box(float32, [3]) has 3 elements, "
                                       "env.observation_size is 4"))));
  spec = ProbeSpec();
  spec.set_num_discrete_actions(3);
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("action Discrete(2), env.num_discrete_"
                                 "actions is 3")));
  // Rewards the plugin may give beyond the run's declared range.
  spec = ProbeSpec("big_reward");
  spec.set_reward_low(0);
  spec.set_reward_high(1);
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("rewards lie in [0, 1000]")));
}

TEST(EnvPluginTest, StepFailuresEndWithThePluginsReason) {
  const std::vector<int64_t> actions(2, 1);
  struct Case {
    std::string mode;
    int fail_at;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"step_error", 3, "step failed: the probe broke"},
           {"nan", 3, "non-finite observation (nan) at env row 0, element 0"},
           // The last step of an episode: only its final observation is bad.
           {"nan", 10, "non-finite final observation (nan) at env row 0"}}) {
    const std::string& mode = c.mode;
    const std::string& message = c.message;
    ASSERT_OK_AND_ASSIGN(auto env,
                         OpenEnv(ProbeSpec(mode, 3, c.fail_at), Options(2)));
    Buffers out(2, 3);
    ASSERT_OK(env->Reset(out.obs.data()));
    absl::Status status;
    for (int t = 0; t < 12 && status.ok(); ++t) {
      status = env->StepDiscrete(actions.data(), out.Outputs());
    }
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 AllOf(HasSubstr(kProbe), HasSubstr(message))))
        << mode;
    EXPECT_TRUE(IsRunFatal(status)) << mode;
  }
}

TEST(EnvPluginTest, ActionMasksComeWithEveryObservation) {
  EnvSpec spec;
  spec.set_id("Probe-v0");
  spec.set_plugin(kProbe);
  spec.set_observation_size(6);
  spec.set_num_discrete_actions(3);
  (*spec.mutable_kwargs()->mutable_fields())["mode"].set_string_value("masked");
  ASSERT_OK(ResolveEnvSpec(&spec));
  // The plugin writes masks; a run that does not declare them is refused.
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("declare env.action_mask: true")));
  spec.set_action_mask(true);
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(4)));
  std::vector<float> obs(24);
  std::vector<uint8_t> masks(12, 7);
  ASSERT_OK(env->Reset(obs.data(), masks.data()));
  std::vector<float> rewards(4);
  std::vector<uint8_t> term(4), trunc(4);
  for (int t = 0; t < 30; ++t) {
    // The mask is the observation's second one-hot, inverted; take the
    // first allowed action.
    std::vector<int64_t> actions(4);
    for (int i = 0; i < 4; ++i) {
      int allowed = 0;
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(masks[i * 3 + k], obs[i * 6 + 3 + k] == 1.f ? 0 : 1);
        allowed += masks[i * 3 + k];
      }
      EXPECT_EQ(allowed, 2);
      actions[i] = masks[i * 3] ? 0 : 1;
    }
    StepOutputs out;
    out.observations = obs.data();
    out.rewards = rewards.data();
    out.terminated = term.data();
    out.truncated = trunc.data();
    out.action_masks = masks.data();
    ASSERT_OK(env->StepDiscrete(actions.data(), out));
  }
  // The env refuses a masked action (its own check).
  std::vector<int64_t> masked(4);
  for (int i = 0; i < 4; ++i)
    masked[i] = masks[i * 3] ? (masks[i * 3 + 1] ? 2 : 1) : 0;
  StepOutputs out;
  out.observations = obs.data();
  out.rewards = rewards.data();
  out.terminated = term.data();
  out.truncated = trunc.data();
  EXPECT_THAT(env->StepDiscrete(masked.data(), out),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the masked action was taken")));
  // Masks are for discrete actions, and built-ins write none.
  EnvSpec bad = spec;
  bad.set_num_discrete_actions(0);
  bad.set_continuous_action_size(2);
  bad.set_action_low(-1);
  bad.set_action_high(1);
  EXPECT_THAT(ResolveEnvSpec(&bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.action_mask: masks are for discrete")));
  EnvSpec cartpole;
  cartpole.set_id("CartPole-v1");
  cartpole.set_action_mask(true);
  EXPECT_THAT(ResolveEnvSpec(&cartpole),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("CartPole-v1 writes no action masks")));
}

TEST(EnvPluginTest, ResolveChecksAPluginsDeclaredSpaces) {
  EnvSpec spec;
  spec.set_id("Probe-v0");
  spec.set_plugin(kProbe);
  EXPECT_THAT(
      ResolveEnvSpec(&spec),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("env.observation_size: a plugin env "
                               "declares its spaces"),
                     HasSubstr("exactly one of num_discrete_actions"))));
  spec.set_observation_size(3);
  spec.set_continuous_action_size(2);
  EXPECT_THAT(ResolveEnvSpec(&spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("action_low < action_high")));
  spec.set_action_low(-1);
  spec.set_action_high(1);
  ASSERT_OK(ResolveEnvSpec(&spec));
  EXPECT_EQ(spec.reward_low(), -INFINITY);  // unbounded unless declared
  EXPECT_OK(CheckResolvedEnvSpec(spec));
  EnvSpec builtin;
  builtin.set_id("CartPole-v1");
  (*builtin.mutable_kwargs()->mutable_fields())["x"].set_number_value(1);
  EXPECT_THAT(ResolveEnvSpec(&builtin),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.kwargs: only a plugin env")));
}

constexpr char kPixels[] = "envs/testdata/libpixel_plugin.so";

// The pixel plugin (envs/testdata/pixel_plugin.cc): uint8 [4, 4, 1] images.
EnvSpec PixelSpec(const std::string& dtype) {
  EnvSpec spec;
  spec.set_id("Pixels-v0");
  spec.set_plugin(kPixels);
  for (int d : {4, 4, 1}) spec.add_observation_shape(d);
  spec.set_observation_dtype(dtype);
  spec.set_num_discrete_actions(4);
  (*spec.mutable_kwargs()->mutable_fields())["size"].set_number_value(4);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// One white pixel per image, and the rest black.
template <typename T>
void ExpectOneWhitePixelPerRow(const std::vector<T>& obs, int rows,
                               float white) {
  for (int i = 0; i < rows; ++i) {
    int white_pixels = 0, black_pixels = 0;
    for (int k = 0; k < 16; ++k) {
      white_pixels += obs[i * 16 + k] == static_cast<T>(white);
      black_pixels += obs[i * 16 + k] == 0;
    }
    EXPECT_EQ(white_pixels, 1) << "row " << i;
    EXPECT_EQ(black_pixels, 15) << "row " << i;
  }
}

constexpr char kLookout[] = "envs/testdata/libdict_plugin.so";

// The Dict plugin (envs/testdata/dict_plugin.cc) with 4x4 images, its
// observation declared by parts (or, `parts` false, as one flat vector).
EnvSpec LookoutSpec(bool parts = true) {
  EnvSpec spec;
  spec.set_id("Lookout-v0");
  spec.set_plugin(kLookout);
  (*spec.mutable_kwargs()->mutable_fields())["size"].set_number_value(4);
  if (parts) {
    ObservationPart* hint = spec.add_observation_parts();
    hint->set_name("hint");
    hint->add_shape(2);
    ObservationPart* image = spec.add_observation_parts();
    image->set_name("image");
    for (int d : {4, 4, 1}) image->add_shape(d);
    image->set_dtype("uint8");
  } else {
    spec.set_observation_size(18);
  }
  spec.add_action_nvec(2);
  spec.add_action_nvec(2);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// A plugin's Dict observation and Dict action: the run declares the parts
// (size and dtype follow), the actor checks them against the plugin's, the
// flat vector is laid out as Gymnasium flattens it, and the Dict action is
// a MultiDiscrete of its parts.
TEST(EnvPluginTest, DictSpacesThroughTheAbi) {
  const EnvSpec spec = LookoutSpec();
  EXPECT_EQ(spec.observation_size(), 18);
  EXPECT_EQ(spec.observation_dtype(), "float32");  // a float part
  EXPECT_OK(CheckResolvedEnvSpec(spec));
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(4)));
  Buffers b(4, 18);
  ASSERT_OK(env->Reset(b.obs.data()));
  // Rewarded actions: the hint as col, the pixel's row half as row.
  std::vector<int64_t> actions(8);
  for (int i = 0; i < 4; ++i) {
    const float* row = b.obs.data() + 18 * i;
    ASSERT_EQ(row[0] + row[1], 1.f) << "the hint is a one-hot";
    int white = -1;
    for (int k = 0; k < 16; ++k) {
      if (row[2 + k] == 255.f) white = k;
    }
    ASSERT_GE(white, 0) << "one white pixel, its byte value as a float";
    actions[2 * i] = row[1] == 1.f;       // col: the hint
    actions[2 * i + 1] = white / 4 >= 2;  // row: the pixel's half
  }
  // Env 2 takes both wrong, env 3 its col.
  actions[4] ^= 1;
  actions[5] ^= 1;
  actions[6] ^= 1;
  ASSERT_OK(env->StepDiscrete(actions.data(), b.Outputs()));
  EXPECT_EQ(b.rewards, (std::vector<float>{1, 1, 0, 0.5}));
  // A run that takes the observation whole opens it too.
  EXPECT_OK(OpenEnv(LookoutSpec(/*parts=*/false), Options(1)).status());
}

TEST(EnvPluginTest, PartsThatDisagreeWithThePluginsAreRefused) {
  EnvSpec spec = LookoutSpec();
  spec.mutable_observation_parts(0)->set_name("flop");
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("its observation parts are (hint float32 "
                                 "[2]; image uint8 [4, 4, 1]), "
                                 "env.observation_parts are (flop")));
  // Parts on a plugin whose observation is one Box.
  EnvSpec pixels;
  pixels.set_id("Pixels-v0");
  pixels.set_plugin(kPixels);
  (*pixels.mutable_kwargs()->mutable_fields())["size"].set_number_value(4);
  ObservationPart* image = pixels.add_observation_parts();
  image->set_name("image");
  for (int d : {4, 4, 1}) image->add_shape(d);
  image->set_dtype("uint8");
  pixels.set_num_discrete_actions(4);
  ASSERT_OK(ResolveEnvSpec(&pixels));
  EXPECT_EQ(pixels.observation_dtype(), "uint8");  // every part is
  EXPECT_THAT(OpenEnv(pixels, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("its observation is not a Dict or Tuple")));
}

TEST(EnvPluginTest, ObservationPartsAreCheckedWhenResolved) {
  EnvSpec spec;
  spec.set_id("Lookout-v0");
  spec.set_plugin(kLookout);
  spec.add_action_nvec(2);
  ObservationPart* a = spec.add_observation_parts();
  a->set_name("a");
  a->add_shape(0);
  ObservationPart* again = spec.add_observation_parts();
  again->set_name("a");
  again->add_shape(2);
  again->set_dtype("float64");
  EXPECT_THAT(ResolveEnvSpec(&spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("env.observation_parts[0].shape[0]: "
                                       "must be >= 1 (got 0)"),
                             HasSubstr("env.observation_parts[1].name: \"a\" "
                                       "names an earlier part too"),
                             HasSubstr("env.observation_parts[1].dtype: "
                                       "\"float64\" is not"))));
  EnvSpec both = LookoutSpec();
  both.clear_observation_size();
  both.clear_observation_dtype();
  both.add_observation_shape(18);
  EXPECT_THAT(ResolveEnvSpec(&both),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.observation_shape: a Dict or Tuple "
                                 "observation's shape is its parts'")));
  EnvSpec wrong_size = LookoutSpec();
  wrong_size.set_observation_size(17);
  EXPECT_THAT(ResolveEnvSpec(&wrong_size),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.observation_size: 17 disagrees with "
                                 "env.observation_parts (18 elements)")));
  EnvSpec wrong_dtype = LookoutSpec();
  wrong_dtype.set_observation_dtype("uint8");
  EXPECT_THAT(ResolveEnvSpec(&wrong_dtype),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("their flat vector is float32")));
  EnvSpec builtin;
  builtin.set_id("CartPole-v1");
  *builtin.add_observation_parts() = spec.observation_parts(1);
  EXPECT_THAT(ResolveEnvSpec(&builtin),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.observation_parts: CartPole-v1 "
                                 "observes one vector")));
}

// A plugin built before the ABI's optional space_parts (a shorter function
// table) loads and steps as before.
TEST(EnvPluginTest, AFirstReleasePluginLoadsUnchanged) {
  EnvSpec spec;
  spec.set_id("Old-v0");
  spec.set_plugin("envs/testdata/libfirst_release_plugin.so");
  spec.set_observation_size(1);
  spec.set_num_discrete_actions(2);
  spec.set_reward_low(0);
  spec.set_reward_high(1);
  ASSERT_OK(ResolveEnvSpec(&spec));
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(spec, Options(2)));
  Buffers b(2, 1);
  ASSERT_OK(env->Reset(b.obs.data()));
  const std::vector<int64_t> actions = {0, 1};
  ASSERT_OK(env->StepDiscrete(actions.data(), b.Outputs()));
  EXPECT_EQ(b.rewards, (std::vector<float>{1, 1}));
  EXPECT_EQ(b.terminated, (std::vector<uint8_t>{1, 1}));
}

// The helper's Leavers-v0 (envs/testdata/leaving_plugin.cc): 3 agents, agent
// k's episode ends after 2 (k + 1) steps.
EnvSpec LeaversSpec(bool leave) {
  EnvSpec spec;
  spec.set_id("Leavers-v0");
  spec.set_plugin("envs/testdata/libleaving_plugin.so");
  spec.set_observation_size(2);
  spec.set_num_discrete_actions(2);
  spec.set_agents_per_env(3);
  spec.set_agents_leave(leave);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// Where the run allows it, an agent leaves at the step its episode ends
// (its return and length reported there), its row is padding (reward and
// flags 0, alive 0) while the others play on, and the copy resets as one
// when its last agent's episode ends. Where the run does not, the first
// agent's end ends everyone's.
TEST(EnvPluginTest, AgentsThatLeaveEarlyArePaddingUntilTheirCopyResets) {
  ASSERT_OK_AND_ASSIGN(auto env, OpenEnv(LeaversSpec(true), Options(6)));
  Buffers b(6, 2);
  std::vector<uint8_t> alive(6, 9);
  StepOutputs out = b.Outputs();
  out.alive = alive.data();
  ASSERT_OK(env->Reset(b.obs.data()));
  const std::vector<int64_t> actions(6, 1);
  using Bytes = std::vector<uint8_t>;
  using Floats = std::vector<float>;
  // Step by step, the first copy's rows (the second is the same).
  const std::vector<Bytes> want_alive = {{1, 1, 1}, {0, 1, 1}, {0, 1, 1},
                                         {0, 0, 1}, {0, 0, 1}, {1, 1, 1}};
  const std::vector<Floats> want_rewards = {{1, 1, 1}, {1, 1, 1}, {0, 1, 1},
                                            {0, 1, 1}, {0, 0, 1}, {0, 0, 1}};
  const std::vector<Bytes> want_terminated = {{0, 0, 0}, {1, 0, 0}, {0, 0, 0},
                                              {0, 1, 0}, {0, 0, 0}, {0, 0, 1}};
  const std::vector<Floats> want_returns = {{0, 0, 0}, {2, 0, 0}, {0, 0, 0},
                                            {0, 4, 0}, {0, 0, 0}, {0, 0, 6}};
  for (int t = 0; t < 6; ++t) {
    ASSERT_OK(env->StepDiscrete(actions.data(), out));
    for (int c = 0; c < 2; ++c) {
      SCOPED_TRACE(testing::Message() << "step " << t + 1 << ", copy " << c);
      EXPECT_EQ(Bytes(alive.begin() + 3 * c, alive.begin() + 3 * c + 3),
                want_alive[t]);
      EXPECT_EQ(
          Floats(b.rewards.begin() + 3 * c, b.rewards.begin() + 3 * c + 3),
          want_rewards[t]);
      EXPECT_EQ(
          Bytes(b.terminated.begin() + 3 * c, b.terminated.begin() + 3 * c + 3),
          want_terminated[t]);
      EXPECT_EQ(
          Floats(b.returns.begin() + 3 * c, b.returns.begin() + 3 * c + 3),
          want_returns[t]);
      EXPECT_EQ(b.truncated, Bytes(6, 0));
    }
  }
  // Reset: the steps count from 0 again.
  EXPECT_EQ(b.obs[1], 0.f);
  EXPECT_EQ(b.lengths[2], 6);
  EXPECT_EQ(b.final_obs[2 * 2 + 1], 6.f) << "agent 2's last observation";

  // Without env.agents_leave: agent 0's end is everyone's, the others cut.
  ASSERT_OK_AND_ASSIGN(auto together, OpenEnv(LeaversSpec(false), Options(3)));
  Buffers t(3, 2);
  std::vector<uint8_t> all(3, 9);
  StepOutputs o = t.Outputs();
  o.alive = all.data();
  ASSERT_OK(together->Reset(t.obs.data()));
  for (int step = 0; step < 2; ++step) {
    ASSERT_OK(together->StepDiscrete(actions.data(), o));
  }
  EXPECT_EQ(t.terminated, (Bytes{1, 0, 0}));
  EXPECT_EQ(t.truncated, (Bytes{0, 1, 1}));
  EXPECT_EQ(t.returns, (Floats{2, 2, 2}));
  EXPECT_EQ(all, (Bytes{1, 1, 1})) << "no agent ever leaves";

  // A plugin without allow_leaving cannot serve a run that allows leaving.
  EnvSpec old;
  old.set_id("Old-v0");
  old.set_plugin("envs/testdata/libfirst_release_plugin.so");
  old.set_observation_size(1);
  old.set_num_discrete_actions(2);
  old.set_reward_low(0);
  old.set_reward_high(1);
  old.set_agents_leave(true);
  ASSERT_OK(ResolveEnvSpec(&old));
  EXPECT_THAT(OpenEnv(old, Options(2)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("has no allow_leaving"),
                             HasSubstr("env.agents_leave"))));
}

// uint8 images pass as bytes where the run says uint8, and are widened to
// float32 where it says float32 (the same values, final observations too).
TEST(EnvPluginTest, UInt8ObservationsStayBytesOrAreWidened) {
  const EnvSpec bytes_spec = PixelSpec("uint8");
  EXPECT_EQ(bytes_spec.observation_size(), 16);  // from observation_shape
  ASSERT_OK_AND_ASSIGN(auto bytes_env, OpenEnv(bytes_spec, Options(3)));
  ASSERT_OK_AND_ASSIGN(auto float_env, OpenEnv(PixelSpec(""), Options(3)));
  std::vector<uint8_t> b_obs(3 * 16), b_final(3 * 16, 7);
  Buffers f(3, 16);
  ASSERT_OK(bytes_env->Reset(b_obs.data()));
  ASSERT_OK(float_env->Reset(f.obs.data()));
  ExpectOneWhitePixelPerRow(b_obs, 3, 255);
  ExpectOneWhitePixelPerRow(f.obs, 3, 255.f);
  std::vector<float> rewards(3);
  std::vector<uint8_t> terminated(3), truncated(3);
  for (int t = 0; t < 10; ++t) {
    const std::vector<int64_t> actions = {0, 1, 2};
    StepOutputs out;
    out.observations = b_obs.data();
    out.final_observations = b_final.data();
    out.rewards = rewards.data();
    out.terminated = terminated.data();
    out.truncated = truncated.data();
    ASSERT_OK(bytes_env->StepDiscrete(actions.data(), out));
    ASSERT_OK(float_env->StepDiscrete(actions.data(), f.Outputs()));
    for (int k = 0; k < 3 * 16; ++k) {
      ASSERT_EQ(static_cast<float>(b_obs[k]), f.obs[k]) << "element " << k;
    }
    EXPECT_EQ(rewards, f.rewards);
  }
  // The 10th step ended every episode: final observations in both forms.
  EXPECT_EQ(terminated, (std::vector<uint8_t>{1, 1, 1}));
  ExpectOneWhitePixelPerRow(b_final, 3, 255);
  for (int k = 0; k < 3 * 16; ++k) {
    EXPECT_EQ(static_cast<float>(b_final[k]), f.final_obs[k]);
  }
}

TEST(EnvPluginTest, ObservationDtypeAndShapeMustFitThePlugin) {
  // A float32 plugin cannot serve a uint8 run.
  EnvSpec spec = ProbeSpec();
  spec.set_observation_dtype("uint8");
  EXPECT_THAT(OpenEnv(spec, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("observation Box(float32, [3]), "
                                 "env.observation_dtype is uint8")));
  // The shape, where the run gives one, is compared as a shape.
  EnvSpec pixels = PixelSpec("uint8");
  pixels.clear_observation_shape();
  for (int d : {1, 4, 4}) pixels.add_observation_shape(d);
  EXPECT_THAT(OpenEnv(pixels, Options(1)).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("observation Box(uint8, [4, 4, 1]), "
                                 "env.observation_shape is [1, 4, 4]")));
}

TEST(EnvPluginTest, ResolveChecksObservationShapeAndDtype) {
  EnvSpec spec = PixelSpec("uint8");
  EXPECT_OK(CheckResolvedEnvSpec(spec));
  spec.set_observation_size(17);
  EXPECT_THAT(ResolveEnvSpec(&spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.observation_size: 17 disagrees with "
                                 "env.observation_shape [4, 4, 1]")));
  spec.set_observation_size(0);
  spec.set_observation_shape(1, 0);
  spec.set_observation_dtype("float64");
  EXPECT_THAT(
      ResolveEnvSpec(&spec),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("env.observation_shape[1]: must be >= 1"),
                     HasSubstr("env.observation_dtype: \"float64\" is not "
                               "\"float32\" or \"uint8\""))));
  spec.set_observation_shape(1, 4096);
  spec.set_observation_shape(0, 4096);
  spec.set_observation_dtype("uint8");
  EXPECT_THAT(ResolveEnvSpec(&spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.observation_shape: at most 4194304 "
                                 "elements")));
  EnvSpec builtin;
  builtin.set_id("CartPole-v1");
  builtin.set_observation_dtype("uint8");
  EXPECT_THAT(ResolveEnvSpec(&builtin),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("CartPole-v1 observes a float32 vector of 4 "
                                 "(these fields are for plugins)")));
}

}  // namespace
}  // namespace rl
