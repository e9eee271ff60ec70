#include "policy/policy_export.h"

#include <torch/script.h>

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/export_cases.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// Each registered part (action head, image encoder, recurrent core) is
// exported by some case, so that a part added without its exports fails
// here.
TEST(PolicyExportTest, EveryNetworkPartHasAnExportCase) {
  std::set<std::string> heads, encoders, cores;
  for (const ExportCase& c : ExportCases()) {
    ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
    heads.insert(policy->head().name());
    if (policy->image_encoder() != nullptr) {
      encoders.insert(policy->image_encoder()->name());
    }
    if (policy->core() != nullptr) cores.insert(policy->core()->name());
  }
  for (const ActionHeadEntry& entry : ActionHeads()) {
    EXPECT_EQ(heads.count(entry.name), 1u)
        << "no export case has the head " << entry.name;
  }
  EXPECT_EQ(ImageEncoderNames(),
            std::vector<std::string>(encoders.begin(), encoders.end()));
  EXPECT_EQ(RecurrentCoreNames(),
            std::vector<std::string>(cores.begin(), cores.end()));
  EXPECT_THAT(ImageEncoderNames(),
              ::testing::ElementsAre("impala_cnn", "nature_cnn"));
  EXPECT_THAT(RecurrentCoreNames(), ::testing::ElementsAre("gru", "lstm"));
}

// Every kind of policy, exported and loaded back with torch::jit::load,
// gives the learner's policy's actions and values on 1,000 observations.
TEST(PolicyExportTest, TheLoadedModuleActsAsThePolicy) {
  const std::string dir = MakeTestDir("export");
  for (const ExportCase& c : ExportCases()) {
    torch::manual_seed(1);
    ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
    const std::vector<torch::Tensor> inputs = ExportInputs(c.config);
    if (c.config.normalize_observations) {
      ASSERT_OK(policy->UpdateObservationStatistics(inputs[0] + 1));
    }
    const std::string path = dir + "/" + c.name + ".pt";
    ASSERT_OK(ExportTorchScript(policy, c.env, {}, path)) << c.name;

    ASSERT_OK_AND_ASSIGN(auto loaded, ExportedPolicy::Load(path));
    ASSERT_EQ(loaded->state_size(), policy->state_size()) << c.name;
    // A recurrent policy: both from the same nonzero state.
    torch::Tensor state, want_state;
    if (policy->recurrent()) {
      state = torch::randn({1000, policy->state_size()});
      want_state = state.clone();
    }
    ASSERT_OK_AND_ASSIGN(
        const auto out,
        loaded->Act(inputs[0], inputs.size() > 1 ? inputs[1] : torch::Tensor(),
                    &state));
    const auto& [actions, values] = out;
    torch::NoGradGuard no_grad;
    const PolicyStep want =
        policy->Act(inputs[0], c10::nullopt, true,
                    inputs.size() > 1 ? inputs[1] : torch::Tensor(),
                    policy->recurrent() ? &want_state : nullptr);
    EXPECT_LE((values - want.values).abs().max().item<double>(), 1e-5)
        << c.name;
    if (policy->recurrent()) {
      EXPECT_LE((state - want_state).abs().max().item<double>(), 1e-5)
          << c.name;
      const std::string sidecar = ReadTestFile(path + ".json");
      EXPECT_THAT(sidecar, HasSubstr("\"name\": \"next_state\""));
      EXPECT_THAT(
          loaded
              ->Act(inputs[0], inputs.size() > 1 ? inputs[1] : torch::Tensor())
              .status(),
          StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("recurrent")));
    }
    if (c.config.action_size > 0) {
      const torch::Tensor clipped =
          want.actions.clamp(c.env.action_low(), c.env.action_high());
      EXPECT_LE((actions - clipped).abs().max().item<double>(), 1e-5) << c.name;
      EXPECT_LE(actions.max().item<float>(), c.env.action_high()) << c.name;
    } else {
      EXPECT_EQ(actions.scalar_type(), torch::kInt64) << c.name;
      EXPECT_TRUE(torch::equal(actions, want.actions)) << c.name;
    }
    const std::string sidecar = ReadTestFile(path + ".json");
    EXPECT_THAT(sidecar,
                HasSubstr("\"name\": \"obs\", \"dtype\": \"" +
                          std::string(c.config.byte_observations ? "uint8"
                                                                 : "float32")))
        << c.name;
    EXPECT_THAT(sidecar, HasSubstr("\"name\": \"values\"")) << c.name;
    if (c.config.central_value_agents > 1) {
      EXPECT_THAT(sidecar, HasSubstr("rows of whole copies of 2 agents"));
    }
    if (c.config.central_value_agents > 1 &&
        c.config.core == ActorCriticConfig::Core::kNone) {
      // Acting needs no whole copies: 3 rows, the second copy incomplete.
      ASSERT_OK_AND_ASSIGN(const auto three,
                           loaded->Act(inputs[0].narrow(0, 0, 3), {}));
      EXPECT_TRUE(torch::equal(three.first, want.actions.narrow(0, 0, 3)));
      EXPECT_LE((three.second.narrow(0, 0, 2) - want.values.narrow(0, 0, 2))
                    .abs()
                    .max()
                    .item<double>(),
                1e-5);
    }
    EXPECT_EQ(c.config.action_masks,
              sidecar.find("\"name\": \"mask\"") != std::string::npos)
        << c.name;
  }
}

// Sampled actions follow the policy's probabilities and never take a
// masked action.
TEST(PolicyExportTest, SampledActionsFollowTheProbabilities) {
  ExportCase c = ExportCases()[0];
  c.config.normalize_observations = false;
  torch::manual_seed(2);
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  const std::string path = MakeTestDir("sampled") + "/policy.pt";
  PolicyExportOptions options;
  options.sampled = true;
  ASSERT_OK(ExportTorchScript(policy, c.env, options, path));
  torch::jit::Module module = torch::jit::load(path);
  const int64_t n = 20000;
  const torch::Tensor obs = (torch::randn({1, 5}) * 4).expand({n, 5});
  const torch::Tensor mask =
      torch::tensor({1, 1, 0, 1}, torch::kUInt8).expand({n, 4});
  const torch::Tensor actions =
      module.forward({obs, mask}).toTuple()->elements()[0].toTensor();
  torch::NoGradGuard no_grad;
  for (int64_t a = 0; a < 4; ++a) {
    const double p = policy
                         ->Evaluate(obs.slice(0, 0, 1), torch::tensor({a}),
                                    mask.slice(0, 0, 1))
                         .log_probs.exp()
                         .item<double>();
    const double seen = (actions == a).sum().item<double>() / n;
    EXPECT_NEAR(seen, p, 0.015) << "action " << a;
  }
  EXPECT_EQ((actions == 2).sum().item<int64_t>(), 0);  // masked
}

TEST(PolicyExportTest, LoadingNamesWhatIsWrong) {
  const std::string dir = MakeTestDir("load");
  EXPECT_THAT(ExportedPolicy::Load(dir + "/none.pt").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("none.pt: not a TorchScript module")));
  ExportCase c = ExportCases()[0];
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  ASSERT_OK(ExportTorchScript(policy, c.env, {}, dir + "/p.pt"));
  ASSERT_OK_AND_ASSIGN(auto loaded, ExportedPolicy::Load(dir + "/p.pt"));
  EXPECT_THAT(loaded->Act(torch::zeros({2, 5}), torch::Tensor()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("refused its inputs")));  // no mask
}

TEST(PolicyExportTest, TheSourceIsReadable) {
  ExportCase c = ExportCases()[0];
  ASSERT_OK_AND_ASSIGN(ActorCritic policy, CreateActorCritic(c.config));
  ASSERT_OK_AND_ASSIGN(const std::string source,
                       PolicySource(policy, c.env, {}));
  EXPECT_THAT(source,
              HasSubstr("def forward(self, obs: Tensor, mask: Tensor)"));
  EXPECT_THAT(source, HasSubstr("torch.rsqrt(self.obs_var + 1e-08)"));
  EXPECT_THAT(source, HasSubstr("action = torch.argmax(out, -1)"));
}

}  // namespace
}  // namespace rl
