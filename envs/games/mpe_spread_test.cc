// SimpleSpread-v3 (envs/games/mpe_spread.h, mpe_spread_plugin.cc): the world
// replays PettingZoo's own simple_spread_v3 trajectories step for step
// (testdata/simple_spread_v3.txt, tools/record_mpe_golden.py), and the
// plugin plays its episodes as rows of one batch through the service's path.
#include "envs/games/mpe_spread.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "envs/env_check.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "envs/games/step_rows.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::rlenv::mpe::SpreadWorld;
using ::testing::HasSubstr;

constexpr char kGolden[] = "envs/games/testdata/simple_spread_v3.txt";
constexpr char kLibrary[] = "envs/games/libmpe_spread.so";

// One recorded step: the moves, then what PettingZoo returned.
struct GoldenStep {
  std::vector<int64_t> moves;
  std::vector<double> obs, rewards;
  bool truncated = false;
};
struct GoldenEpisode {
  int n = 0;
  double local_ratio = 0;
  int max_cycles = 0;
  std::vector<double> agents, landmarks;
  std::vector<GoldenStep> steps;
};

template <typename T>
std::vector<T> Rest(std::istringstream& line) {
  std::vector<T> out;
  for (T v; line >> v;) out.push_back(v);
  return out;
}

std::vector<GoldenEpisode> ReadGolden() {
  std::ifstream in(kGolden);
  EXPECT_TRUE(in.good()) << kGolden;
  std::vector<GoldenEpisode> episodes;
  for (std::string text; std::getline(in, text);) {
    std::istringstream line(text);
    std::string key;
    line >> key;
    if (key.empty() || key[0] == '#') continue;
    if (key == "episode") {
      episodes.emplace_back();
      line >> episodes.back().n >> episodes.back().local_ratio >>
          episodes.back().max_cycles;
      continue;
    }
    if (episodes.empty()) {
      ADD_FAILURE() << "a line before any episode: " << text;
      break;
    }
    GoldenEpisode& e = episodes.back();
    if (key == "agents") {
      e.agents = Rest<double>(line);
    } else if (key == "landmarks") {
      e.landmarks = Rest<double>(line);
    } else if (key == "step") {
      e.steps.emplace_back();
      e.steps.back().moves = Rest<int64_t>(line);
    } else if (e.steps.empty()) {
      ADD_FAILURE() << "a line before the episode's first step: " << text;
      break;
    } else if (key == "obs") {
      e.steps.back().obs = Rest<double>(line);
    } else if (key == "rewards") {
      e.steps.back().rewards = Rest<double>(line);
    } else if (key == "truncated") {
      int t = 0;
      line >> t;
      e.steps.back().truncated = t != 0;
    } else {
      ADD_FAILURE() << "unknown line: " << text;
    }
  }
  return episodes;
}

// Pairs of agents closer than their radii's sum (the collision penalty).
int OverlappingPairs(const SpreadWorld& world) {
  const std::vector<double>& p = world.agent_positions();
  int pairs = 0;
  for (int a = 0; a < world.n(); ++a) {
    for (int b = a + 1; b < world.n(); ++b) {
      const double dx = p[2 * a] - p[2 * b], dy = p[2 * a + 1] - p[2 * b + 1];
      if (std::sqrt(dx * dx + dy * dy) < 2 * SpreadWorld::kAgentSize) ++pairs;
    }
  }
  return pairs;
}

TEST(SpreadWorldTest, ReplaysPettingZoosTrajectoriesStepForStep) {
  const std::vector<GoldenEpisode> episodes = ReadGolden();
  ASSERT_EQ(episodes.size(), 5u);
  int collisions = 0;
  for (size_t k = 0; k < episodes.size(); ++k) {
    const GoldenEpisode& e = episodes[k];
    SCOPED_TRACE("episode " + std::to_string(k));
    ASSERT_EQ(e.agents.size(), 2u * e.n);
    ASSERT_EQ(e.landmarks.size(), 2u * e.n);
    ASSERT_EQ(static_cast<int>(e.steps.size()), e.max_cycles);
    SpreadWorld world(e.n, e.local_ratio);
    world.Place(e.agents.data(), e.landmarks.data());
    std::vector<float> obs(e.n * world.observation_size());
    std::vector<double> rewards(e.n);
    for (int t = 0; t < e.max_cycles; ++t) {
      const GoldenStep& s = e.steps[t];
      SCOPED_TRACE("step " + std::to_string(t + 1));
      ASSERT_EQ(s.moves.size(), static_cast<size_t>(e.n));
      ASSERT_EQ(s.obs.size(), obs.size());
      world.Step(s.moves.data(), rewards.data());
      world.Observe(obs.data());
      for (size_t i = 0; i < obs.size(); ++i) {
        // float32 both sides, PettingZoo's printed with 9 digits (which
        // round-trip): equal unless a libm call differs in its last bits.
        ASSERT_NEAR(obs[i], s.obs[i], 1e-6 * (1 + std::fabs(s.obs[i])))
            << "observation element " << i % world.observation_size()
            << " of agent_" << i / world.observation_size();
      }
      for (int i = 0; i < e.n; ++i) {
        ASSERT_NEAR(rewards[i], s.rewards[i], 1e-9) << "agent_" << i;
      }
      collisions += OverlappingPairs(world);
      EXPECT_EQ(s.truncated, t + 1 == e.max_cycles);
    }
  }
  // The crowded episodes exercised the contact forces and the penalty.
  EXPECT_GE(collisions, 6) << "pairs of agents in contact after a step";
}

TEST(SpreadWorldTest, AMoveOutsideTheFiveIsRefused) {
  SpreadWorld world(3, 0.5);
  const std::vector<double> at(6, 0.0);
  world.Place(at.data(), at.data());
  const std::vector<int64_t> moves = {0, 5, 0};
  std::vector<double> rewards(3);
  try {
    world.Step(moves.data(), rewards.data());
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("action 5 of agent_1"));
  }
}

EnvSpec Spread(int n, int agents_per_env, int max_cycles = 25) {
  EnvSpec spec;
  spec.set_id("SimpleSpread-v3");
  spec.set_plugin(kLibrary);
  spec.set_observation_size(SpreadWorld::ObservationSize(n));
  spec.set_num_discrete_actions(5);
  spec.set_agents_per_env(agents_per_env);
  auto& kwargs = *spec.mutable_kwargs()->mutable_fields();
  kwargs["N"].set_number_value(n);
  if (max_cycles != 25) kwargs["max_cycles"].set_number_value(max_cycles);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// What a batch's step writes, for `rows` rows of `obs_size` floats.
using Rows = StepRows;

// A batch of `rows` rows of `spec` under `seed`.
absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenRows(const EnvSpec& spec,
                                                     int rows, uint64_t seed) {
  EnvOpenOptions options;
  options.num_envs = rows;
  options.seed = seed;
  return OpenEnv(spec, options);
}

TEST(SimpleSpreadPluginTest, AgentsAreRowsTruncatedTogetherAfterMaxCycles) {
  constexpr int kRows = 6;  // 2 environments of 3 agents
  constexpr int kObs = 18;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BatchedEnv> env,
                       OpenRows(Spread(3, 3), kRows, 3));
  Rows r(kRows, kObs);
  const std::vector<float>& obs = r.obs;
  const std::vector<float>& final_obs = r.final_obs;
  const StepOutputs out = r.Outputs();
  ASSERT_OK(env->Reset(r.obs.data()));
  for (int row = 0; row < kRows; ++row) {
    const float* o = &obs[row * kObs];
    EXPECT_EQ(o[0], 0.f);  // at rest
    EXPECT_EQ(o[1], 0.f);
    EXPECT_LE(std::fabs(o[2]), 1.f);  // its position
    EXPECT_LE(std::fabs(o[3]), 1.f);
    for (int c = 14; c < kObs; ++c) EXPECT_EQ(o[c], 0.f) << "silent agents";
  }
  // The two environments start apart; the agents of one see one world.
  EXPECT_NE(obs[2], obs[3 * kObs + 2]);
  EXPECT_NEAR(obs[2] + obs[4], obs[kObs + 2] + obs[kObs + 4], 1e-6)
      << "landmark 0 seen from agent_0 and agent_1";
  const std::vector<int64_t> up(kRows, 4);
  for (int step = 1; step <= 25; ++step) {
    ASSERT_OK(env->StepDiscrete(up.data(), out));
    for (int row = 0; row < kRows; ++row) {
      EXPECT_EQ(r.term[row], 0);
      ASSERT_EQ(r.trunc[row], step == 25 ? 1 : 0) << "step " << step;
      EXPECT_LT(r.rewards[row], 0.f);
    }
  }
  for (int row = 0; row < kRows; ++row) {
    EXPECT_EQ(r.lengths[row], 25);
    // Pushed up for 25 steps: moving up at the end, then a fresh start.
    EXPECT_GT(final_obs[row * kObs + 1], 1.f);
    EXPECT_EQ(obs[row * kObs + 1], 0.f);
  }
}

// A batch's saved state (worlds, steps, random streams) restored into a
// batch of another seed plays on exactly as the first, across the resets
// at max_cycles; a state of another number of agents is refused.
TEST(SimpleSpreadPluginTest, ASavedStatePlaysOnExactlyElsewhere) {
  constexpr int kRows = 6;  // 2 environments of 3 agents
  constexpr int kObs = 18;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BatchedEnv> a,
                       OpenRows(Spread(3, 3), kRows, 3));
  Rows ra(kRows, kObs), rb(kRows, kObs);
  ASSERT_OK(a->Reset(ra.obs.data()));
  std::vector<int64_t> moves(kRows);
  for (int t = 0; t < 7; ++t) {
    for (int i = 0; i < kRows; ++i) moves[i] = (t + i) % 5;
    ASSERT_OK(a->StepDiscrete(moves.data(), ra.Outputs()));
  }
  const std::string state = a->SaveState();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BatchedEnv> b,
                       OpenRows(Spread(3, 3), kRows, 4));
  ASSERT_OK(b->Reset(rb.obs.data()));
  ASSERT_OK(b->RestoreState(state));
  int truncated = 0;
  for (int t = 0; t < 30; ++t) {  // past step 25: both reset alike
    for (int i = 0; i < kRows; ++i) moves[i] = (3 * t + i) % 5;
    ASSERT_OK(a->StepDiscrete(moves.data(), ra.Outputs()));
    ASSERT_OK(b->StepDiscrete(moves.data(), rb.Outputs()));
    ASSERT_EQ(ra.obs, rb.obs) << "step " << t;
    ASSERT_EQ(ra.rewards, rb.rewards) << "step " << t;
    ASSERT_EQ(ra.trunc, rb.trunc) << "step " << t;
    for (const uint8_t x : ra.trunc) truncated += x;
  }
  EXPECT_EQ(truncated, kRows);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BatchedEnv> two,
                       OpenRows(Spread(2, 2), 4, 4));
  Rows r2(4, SpreadWorld::ObservationSize(2));
  ASSERT_OK(two->Reset(r2.obs.data()));
  EXPECT_THAT(std::string(two->RestoreState(state).message()),
              HasSubstr("saved from 2 environments of 3 agents"));
}

TEST(SimpleSpreadPluginTest, TwoAgentsAndTenStepsAreTheKwargs) {
  constexpr int kRows = 4;  // 2 environments of 2 agents
  const int obs_size = SpreadWorld::ObservationSize(2);
  ASSERT_EQ(obs_size, 12);
  EnvOpenOptions options;
  options.num_envs = kRows;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BatchedEnv> env,
                       OpenEnv(Spread(2, 2, 10), options));
  Rows r(kRows, obs_size);
  const std::vector<float>& obs = r.obs;
  const StepOutputs out = r.Outputs();
  ASSERT_OK(env->Reset(r.obs.data()));
  // Agent_1's position is agent_0's plus the other agent's offset.
  EXPECT_NEAR(obs[2] + obs[8], obs[obs_size + 2], 1e-6);
  EXPECT_EQ(obs[10], 0.f);
  EXPECT_EQ(obs[11], 0.f);
  const std::vector<int64_t> none(kRows, 0);
  for (int step = 1; step <= 10; ++step) {
    ASSERT_OK(env->StepDiscrete(none.data(), out));
    for (int row = 0; row < kRows; ++row) {
      ASSERT_EQ(r.trunc[row], step == 10 ? 1 : 0) << "step " << step;
    }
  }
  EXPECT_EQ(r.lengths[0], 10);
}

TEST(SimpleSpreadPluginTest, BadKwargsAreRefusedByName) {
  EnvOpenOptions options;
  options.num_envs = 3;
  // The default spec with kwargs[key] = value: refused, naming `what`.
  const auto refused = [&](const std::string& key,
                           const google::protobuf::Value& value,
                           const std::string& what) {
    EnvSpec spec = Spread(3, 3);
    (*spec.mutable_kwargs()->mutable_fields())[key] = value;
    ASSERT_OK(ResolveEnvSpec(&spec));
    EXPECT_THAT(
        OpenEnv(spec, options),
        StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(what)))
        << key;
  };
  google::protobuf::Value number, yes, no;
  number.set_number_value(1.5);
  yes.set_bool_value(true);
  no.set_bool_value(false);
  refused("local_ratio", number, "kwargs.local_ratio: 1.5");
  refused("continuous_actions", yes, "kwargs.continuous_actions");
  number.set_number_value(1);
  refused("N", number, "kwargs.N: 1; 2 to 16 agents");
  refused("dynamic_rescaling", no, "kwargs.dynamic_rescaling: unknown");
}

TEST(SimpleSpreadPluginTest, CheckEnvFindsNoViolationAndRandomMovesScore) {
  EnvCheckOptions options;
  options.steps = 500;
  options.num_envs = 12;
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport report,
                       CheckEnv(Spread(3, 3), options));
  EXPECT_EQ(report.violation, "");
  EXPECT_EQ(report.agents,
            "3 agents per environment (agent_0, agent_1, agent_2)");
  EXPECT_GT(report.episodes, 200);
  // PettingZoo's own random moves score about -27 an agent (the bridge's
  // check-env, docs/multi_agent.md).
  EXPECT_GT(report.mean_return, -32.0);
  EXPECT_LT(report.mean_return, -22.0);
}

}  // namespace
}  // namespace rl
