#include "runspec/policy_rules.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

EnvSpec Image(int a, int b, int c) {
  EnvSpec env;
  env.set_observation_dtype("uint8");
  env.add_observation_shape(a);
  env.add_observation_shape(b);
  env.add_observation_shape(c);
  return env;
}

// A resolved spec of `env` with `policy`'s fields given and the rest
// defaulted.
RunSpec Spec(const EnvSpec& env, const PolicyConfig& policy) {
  RunSpec spec;
  *spec.mutable_env() = env;
  *spec.mutable_policy() = policy;
  spec.set_envs_per_actor(8);
  spec.mutable_ppo()->set_num_minibatches(4);
  spec.mutable_execution()->set_cpu_kernels("auto");
  spec.mutable_resources()->set_learner_device("cpu");
  spec.mutable_resources()->set_actor_device("cpu");
  ApplyPolicyDefaults(spec.env(), spec.ppo(), spec.mutable_policy());
  return spec;
}

std::string Problems(const RunSpec& spec) {
  return absl::StrJoin(PolicyProblems(spec), "; ");
}

TEST(PolicyRulesTest, DefaultsFollowTheSpace) {
  PolicyConfig policy;
  ApplyPolicyDefaults(EnvSpec(), PPOConfig(), &policy);
  EXPECT_EQ(policy.encoder(), "mlp");
  EXPECT_EQ(policy.image_layout(), "");
  EXPECT_EQ(policy.core(), "none");
  EXPECT_EQ(policy.core_size(), 128);
  EXPECT_THAT(policy.hidden_sizes(), ElementsAre(64, 64));
  EXPECT_EQ(policy.activation(), "tanh");

  PolicyConfig atari;
  ApplyPolicyDefaults(Image(4, 84, 84), PPOConfig(), &atari);
  EXPECT_EQ(atari.encoder(), "nature_cnn");
  EXPECT_EQ(atari.image_layout(), "chw");  // 84 channels last is not HWC
  EXPECT_THAT(atari.hidden_sizes(), IsEmpty());

  PolicyConfig small;
  ApplyPolicyDefaults(Image(10, 10, 3), PPOConfig(), &small);
  EXPECT_EQ(small.encoder(), "impala_cnn");
  EXPECT_EQ(small.image_layout(), "hwc");

  // A given layout decides which dimensions are the height and width.
  PolicyConfig given;
  given.set_image_layout("chw");
  ApplyPolicyDefaults(Image(3, 40, 40), PPOConfig(), &given);
  EXPECT_EQ(given.encoder(), "nature_cnn");

  PolicyConfig lstm;
  lstm.set_core("lstm");
  lstm.set_core_size(32);
  ApplyPolicyDefaults(EnvSpec(), PPOConfig(), &lstm);
  EXPECT_EQ(lstm.core(), "lstm");
  EXPECT_EQ(lstm.core_size(), 32);
  EXPECT_TRUE(HasRecurrentCore(lstm));
  EXPECT_FALSE(IsCnnEncoder(lstm));
}

// A Dict observation with image parts: the per-key CNN (Nature only where
// every image is 36x36 or more), two hidden layers; image layouts that
// guess differently must be given.
EnvSpec Parts(std::vector<std::vector<int>> images) {
  EnvSpec env;
  ObservationPart* hint = env.add_observation_parts();
  hint->set_name("hint");
  hint->add_shape(2);
  for (size_t i = 0; i < images.size(); ++i) {
    ObservationPart* part = env.add_observation_parts();
    part->set_name("image" + std::to_string(i));
    part->set_dtype("uint8");
    for (int d : images[i]) part->add_shape(d);
  }
  return env;
}

TEST(PolicyRulesTest, DictImagesGetACnnEach) {
  PolicyConfig large;
  ApplyPolicyDefaults(Parts({{84, 84, 3}, {40, 40, 1}}), PPOConfig(), &large);
  EXPECT_EQ(large.encoder(), "nature_cnn");
  EXPECT_EQ(large.image_layout(), "hwc");
  EXPECT_THAT(large.hidden_sizes(), ElementsAre(64, 64));
  PolicyConfig small;
  ApplyPolicyDefaults(Parts({{84, 84, 3}, {8, 8, 1}}), PPOConfig(), &small);
  EXPECT_EQ(small.encoder(), "impala_cnn");
  PolicyConfig none;
  ApplyPolicyDefaults(Parts({}), PPOConfig(), &none);
  EXPECT_EQ(none.encoder(), "mlp");
  EXPECT_EQ(Problems(Spec(Parts({{84, 84, 3}, {8, 8, 1}}), PolicyConfig())),
            "");
  EXPECT_THAT(Problems(Spec(Parts({{84, 84, 3}, {3, 9, 9}}), PolicyConfig())),
              HasSubstr("policy.image_layout: the image parts of "
                        "env.observation_parts read as different layouts"));
  PolicyConfig cnn;
  cnn.set_encoder("impala_cnn");
  EXPECT_THAT(Problems(Spec(Parts({}), cnn)),
              HasSubstr("no part of env.observation_parts is uint8 with 3 "
                        "dimensions"));
  PolicyConfig nature;
  nature.set_encoder("nature_cnn");
  EXPECT_THAT(Problems(Spec(Parts({{84, 84, 3}, {8, 8, 1}}), nature)),
              HasSubstr("nature_cnn needs images of at least 36x36; this one "
                        "is 8x8"));
}

TEST(PolicyRulesTest, DefaultSpecsHaveNoProblems) {
  EXPECT_EQ(Problems(Spec(EnvSpec(), PolicyConfig())), "");
  EXPECT_EQ(Problems(Spec(Image(84, 84, 3), PolicyConfig())), "");
  PolicyConfig gru;
  gru.set_core("gru");
  EXPECT_EQ(Problems(Spec(EnvSpec(), gru)), "");
}

TEST(PolicyRulesTest, EncoderProblemsNameTheField) {
  PolicyConfig typo;
  typo.set_encoder("nature");
  EXPECT_EQ(Problems(Spec(EnvSpec(), typo)),
            "policy.encoder: must be mlp, nature_cnn or impala_cnn (got "
            "\"nature\")");

  PolicyConfig cnn;
  cnn.set_encoder("impala_cnn");
  EXPECT_THAT(Problems(Spec(EnvSpec(), cnn)),
              HasSubstr("observation_dtype is float32"));

  EnvSpec flat;
  flat.set_observation_dtype("uint8");
  flat.add_observation_shape(16);
  EXPECT_THAT(Problems(Spec(flat, cnn)), HasSubstr("it has 1"));

  PolicyConfig nature;
  nature.set_encoder("nature_cnn");
  EXPECT_THAT(Problems(Spec(Image(20, 20, 1), nature)),
              HasSubstr("at least 36x36; this one is 20x20"));

  PolicyConfig layout;
  layout.set_image_layout("hwc");
  EXPECT_THAT(Problems(Spec(EnvSpec(), layout)),
              HasSubstr("policy.image_layout: is for a CNN encoder"));
  PolicyConfig bad_layout;
  bad_layout.set_image_layout("nhwc");
  EXPECT_THAT(Problems(Spec(Image(8, 8, 1), bad_layout)),
              HasSubstr("policy.image_layout: must be hwc or chw"));
}

TEST(PolicyRulesTest, CoreProblemsNameTheField) {
  PolicyConfig typo;
  typo.set_core("rnn");
  EXPECT_EQ(Problems(Spec(EnvSpec(), typo)),
            "policy.core: must be none, lstm or gru (got \"rnn\")");

  PolicyConfig big;
  big.set_core("lstm");
  big.set_core_size(5000);
  EXPECT_THAT(Problems(Spec(EnvSpec(), big)),
              HasSubstr("policy.core_size: must be in [1, 4096] (got 5000)"));

  // Whole env sequences per minibatch: 8 envs do not split in 3.
  PolicyConfig lstm;
  lstm.set_core("lstm");
  RunSpec spec = Spec(EnvSpec(), lstm);
  spec.mutable_ppo()->set_num_minibatches(3);
  EXPECT_THAT(Problems(spec),
              HasSubstr("ppo.num_minibatches: a recurrent policy (policy.core "
                        "lstm) learns from whole env sequences"));
  // Without a core the same split is a question for the batch size only.
  RunSpec plain = Spec(EnvSpec(), PolicyConfig());
  plain.mutable_ppo()->set_num_minibatches(3);
  EXPECT_EQ(Problems(plain), "");
}

TEST(PolicyRulesTest, ACentralCriticNeedsAgentsAndWholeCopies) {
  PolicyConfig central;
  central.set_central_value(true);
  // One agent: nothing to read besides its own observation.
  EXPECT_EQ(Problems(Spec(EnvSpec(), central)),
            "policy.central_value: reads every agent's observation: it needs "
            "an environment of several agents (env.agents_per_env >= 2) (got "
            "env.agents_per_env 1)");
  EnvSpec pairs;
  pairs.set_agents_per_env(2);
  RunSpec spec = Spec(pairs, central);  // 4 copies x 1 step: 4 minibatches
  spec.set_segment_length(1);
  EXPECT_EQ(Problems(spec), "");
  spec.mutable_ppo()->set_num_minibatches(3);
  EXPECT_THAT(Problems(spec),
              HasSubstr("ppo.num_minibatches: a central critic "
                        "(policy.central_value) learns from minibatches of "
                        "whole environment copies: num_minibatches must "
                        "divide a segment's 4 copy steps"));
  spec.mutable_ppo()->set_num_minibatches(4);
  // The fused kernels have a central critic, but keep only the rows of
  // agents still there.
  spec.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_EQ(Problems(spec), "");
  spec.mutable_env()->set_agents_leave(true);
  spec.mutable_policy()->set_shared_trunk(true);
  const std::string problems = Problems(spec);
  EXPECT_THAT(problems, HasSubstr("cannot share a trunk"));
  EXPECT_THAT(problems,
              HasSubstr("execution.cpu_kernels: fused leaves out the rows of "
                        "agents that left (env.agents_leave)"));
}

// Beside a core a central critic learns from whole sequences of whole
// copies: num_minibatches divides an actor's copies, not its copy steps.
TEST(PolicyRulesTest, ACentralCriticBesideACoreSplitsCopies) {
  PolicyConfig central;
  central.set_central_value(true);
  central.set_core("lstm");
  EnvSpec pairs;
  pairs.set_agents_per_env(2);
  RunSpec spec = Spec(pairs, central);  // 8 envs: 4 copies of 2
  spec.set_segment_length(16);
  spec.mutable_ppo()->set_num_minibatches(4);
  EXPECT_EQ(Problems(spec), "");
  // 8 minibatches split the 8 envs' sequences, but not the 4 copies.
  spec.mutable_ppo()->set_num_minibatches(8);
  EXPECT_EQ(Problems(spec),
            "ppo.num_minibatches: a central critic (policy.central_value) "
            "beside a recurrent core learns from the whole sequences of "
            "whole environment copies: num_minibatches must divide the 4 "
            "copies of an actor (envs_per_actor / env.agents_per_env) (got "
            "8)");
  spec.mutable_ppo()->set_num_minibatches(2);
  spec.mutable_policy()->set_core("gru");
  EXPECT_EQ(Problems(spec), "");
}

TEST(PolicyRulesTest, FusedKernelsRunTanhMlpsOnFloats) {
  RunSpec spec = Spec(EnvSpec(), PolicyConfig());
  spec.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_EQ(Problems(spec), "");

  PolicyConfig gru;
  gru.set_core("gru");
  RunSpec recurrent = Spec(EnvSpec(), gru);
  recurrent.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_THAT(Problems(recurrent), HasSubstr("fused runs MLPs only"));
  EXPECT_THAT(Problems(recurrent), HasSubstr("policy.core is gru"));

  RunSpec image = Spec(Image(84, 84, 3), PolicyConfig());
  image.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_THAT(Problems(image), HasSubstr("policy.encoder is a CNN"));

  EnvSpec bytes;
  bytes.set_observation_dtype("uint8");
  bytes.add_observation_shape(16);
  RunSpec flat_bytes = Spec(bytes, PolicyConfig());
  flat_bytes.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_THAT(Problems(flat_bytes),
              HasSubstr("env.observation_dtype is uint8"));

  spec.mutable_policy()->set_activation("relu");
  EXPECT_THAT(Problems(spec), HasSubstr("fused runs tanh networks only"));
  spec.mutable_resources()->set_learner_device("cuda");
  EXPECT_THAT(Problems(spec), HasSubstr("fused is the CPU path"));
  spec.mutable_execution()->set_cpu_kernels("fast");
  EXPECT_THAT(
      Problems(spec),
      HasSubstr("execution.cpu_kernels: must be auto, fused or libtorch"));
}

TEST(PolicyRulesTest, TheHeadMustExistAndTakeTheActions) {
  EnvSpec box;
  box.set_observation_size(3);
  box.set_continuous_action_size(1);
  box.set_action_low(-2);
  box.set_action_high(2);
  PolicyConfig policy;
  policy.set_head("tanh_gaussian");
  EXPECT_EQ(Problems(Spec(box, policy)), "");

  EnvSpec discrete;
  discrete.set_observation_size(4);
  discrete.set_num_discrete_actions(2);
  EXPECT_THAT(Problems(Spec(discrete, policy)),
              HasSubstr("policy.head: it takes Box actions"));

  box.set_action_high(INFINITY);
  EXPECT_THAT(Problems(Spec(box, policy)), HasSubstr("finite bounds"));

  policy.set_head("beta");
  EXPECT_THAT(Problems(Spec(discrete, policy)),
              HasSubstr("policy.head: must be one of bernoulli, categorical, "
                        "gaussian, tanh_gaussian (got \"beta\")"));

  // The fused path computes the categorical and Gaussian heads only.
  box.set_action_high(2);
  policy.set_head("tanh_gaussian");
  RunSpec fused = Spec(box, policy);
  fused.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_THAT(Problems(fused),
              HasSubstr("fused has the categorical and gaussian heads; this "
                        "run's policy.head is tanh_gaussian"));
  policy.set_head("gaussian");
  fused = Spec(box, policy);
  fused.mutable_execution()->set_cpu_kernels("fused");
  EXPECT_EQ(Problems(fused), "");
}

}  // namespace
}  // namespace rl
