// LightCycles-v0 (envs/games/light_cycles.cc) through the service's plugin
// path: two agents per environment as rows of one batch, the game's rules
// and rewards, agents that end together, and the run's agents_per_env
// checked against the plugin's both ways.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "envs/env_agents.h"
#include "envs/env_check.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"
#include "envs/games/step_rows.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kLibrary[] = "envs/games/liblight_cycles.so";
constexpr int kWindow = 15;  // 2 * 8 - 1
constexpr int64_t kObs = 2 * kWindow * kWindow;

EnvSpec LightCycles(const std::string& opponent, int agents) {
  EnvSpec spec;
  spec.set_id("LightCycles-v0");
  spec.set_plugin(kLibrary);
  spec.set_observation_size(kObs);
  spec.set_num_discrete_actions(3);
  spec.set_reward_low(-1);
  spec.set_reward_high(1);
  spec.set_agents_per_env(agents);
  (*spec.mutable_kwargs()->mutable_fields())["opponent"].set_string_value(
      opponent);
  EXPECT_OK(ResolveEnvSpec(&spec));
  return spec;
}

// A step's outputs for `n` rows of this board.
struct Rows : StepRows {
  explicit Rows(int n) : StepRows(n, kObs) {}
};

std::unique_ptr<BatchedEnv> Open(const EnvSpec& spec, int rows) {
  EnvOpenOptions options;
  options.num_envs = rows;
  options.seed = 5;
  auto env = OpenEnv(spec, options);
  EXPECT_TRUE(env.ok()) << env.status();
  return env.ok() ? std::move(*env) : nullptr;
}

// Plane `plane` of row `row`'s window at (i, j); the head is at (7, 7).
float At(const Rows& r, int row, int plane, int i, int j) {
  return r.obs[row * kObs + plane * kWindow * kWindow + i * kWindow + j];
}

TEST(LightCyclesTest, EachEnvironmentIsTwoRowsThatSeeTheGameFromTheirSide) {
  auto env = Open(LightCycles("self", 2), 6);  // 3 games
  ASSERT_NE(env, nullptr);
  Rows r(6);
  ASSERT_OK(env->Reset(r.obs.data()));
  for (int row = 0; row < 6; ++row) {
    // Its own head is taken; the cell ahead is free (heading at the
    // board's far side), and the board's edge is 2 cells behind.
    EXPECT_EQ(At(r, row, 0, 7, 7), 1.f) << "row " << row;
    EXPECT_EQ(At(r, row, 0, 6, 7), 0.f) << "row " << row;
    EXPECT_EQ(At(r, row, 0, 9, 7), 1.f) << "row " << row;
    // The other head, in one cell of its plane.
    float heads = 0;
    for (int k = 0; k < kWindow * kWindow; ++k) {
      heads += r.obs[row * kObs + kWindow * kWindow + k];
    }
    EXPECT_EQ(heads, 1.f) << "row " << row;
  }
}

TEST(LightCyclesTest, StartsDifferFromGameToGameAndRepeatUnderASeed) {
  Rows a(64), b(64);
  auto one = Open(LightCycles("self", 2), 64);
  auto two = Open(LightCycles("self", 2), 64);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  ASSERT_OK(one->Reset(a.obs.data()));
  ASSERT_OK(two->Reset(b.obs.data()));
  EXPECT_EQ(a.obs, b.obs);
  // The two players never start as each other's mirror image (which would
  // see the same window and, playing one policy, always draw), and games
  // start in different rows.
  std::set<std::vector<float>> firsts;
  for (int game = 0; game < 32; ++game) {
    const auto player_0 = a.obs.begin() + 2 * game * kObs;
    const auto player_1 = player_0 + kObs;
    EXPECT_FALSE(std::equal(player_0, player_1, player_1)) << "game " << game;
    firsts.emplace(player_0, player_1);
  }
  EXPECT_GT(firsts.size(), 3u);
}

// Rows of `env` riding straight until each ended once: its length and
// return.
void RideStraightToTheEnd(BatchedEnv& env, int rows, std::vector<int>* lengths,
                          std::vector<float>* returns) {
  Rows r(rows);
  ASSERT_OK(env.Reset(r.obs.data()));
  const std::vector<int64_t> straight(rows, 0);
  lengths->assign(rows, 0);
  returns->assign(rows, 0.f);
  for (int step = 1; step <= 8; ++step) {
    ASSERT_OK(env.StepDiscrete(straight.data(), r.Outputs()));
    for (int row = 0; row < rows; ++row) {
      if (r.term[row] && (*lengths)[row] == 0) {
        (*lengths)[row] = r.lengths[row];
        (*returns)[row] = r.returns[row];
        EXPECT_EQ(r.lengths[row], step);
      }
      EXPECT_EQ(r.trunc[row], 0);
    }
  }
}

// A batch's saved state (the helper's save_state: the boards, cycles,
// random streams, counters) restored into another batch plays on exactly
// as the first: same observations, rewards, ends and returns; a state of
// another shape is refused, naming both, and changes nothing.
TEST(LightCyclesTest, ASavedStatePlaysOnExactlyElsewhere) {
  for (const std::string opponent : {"self", "scripted"}) {
    SCOPED_TRACE(opponent);
    const int agents = opponent == "self" ? 2 : 1;
    const int rows = 4 * agents;
    auto a = Open(LightCycles(opponent, agents), rows);
    ASSERT_NE(a, nullptr);
    Rows ra(rows), rb(rows);
    ASSERT_OK(a->Reset(ra.obs.data()));
    uint64_t draw = 7;
    std::vector<int64_t> actions(rows);
    auto next_actions = [&] {
      for (int64_t& x : actions) {
        draw = draw * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<int64_t>((draw >> 33) % 3);
      }
    };
    for (int t = 0; t < 9; ++t) {
      next_actions();
      ASSERT_OK(a->StepDiscrete(actions.data(), ra.Outputs()));
    }
    const std::string state = a->SaveState();
    ASSERT_FALSE(state.empty());
    EnvOpenOptions other;
    other.num_envs = rows;
    other.seed = 99;  // another stream: the state brings the first's
    ASSERT_OK_AND_ASSIGN(auto b, OpenEnv(LightCycles(opponent, agents), other));
    ASSERT_OK(b->Reset(rb.obs.data()));
    ASSERT_OK(b->RestoreState(state));
    int ended = 0;
    for (int t = 0; t < 40; ++t) {
      next_actions();
      ASSERT_OK(a->StepDiscrete(actions.data(), ra.Outputs()));
      ASSERT_OK(b->StepDiscrete(actions.data(), rb.Outputs()));
      ASSERT_EQ(ra.obs, rb.obs) << "step " << t;
      ASSERT_EQ(ra.rewards, rb.rewards) << "step " << t;
      ASSERT_EQ(ra.term, rb.term) << "step " << t;
      ASSERT_EQ(ra.returns, rb.returns) << "step " << t;
      for (const uint8_t x : ra.term) ended += x;
    }
    EXPECT_GT(ended, 0);  // games ended and started again on both
    // Two games are not four.
    auto small = Open(LightCycles(opponent, agents), 2 * agents);
    ASSERT_NE(small, nullptr);
    Rows rs(2 * agents);
    ASSERT_OK(small->Reset(rs.obs.data()));
    EXPECT_THAT(std::string(small->RestoreState(state).message()),
                HasSubstr("restore_state failed: restore_state: saved from 4 "
                          "environments"));
    EXPECT_THAT(std::string(small->RestoreState("not a state").message()),
                HasSubstr("not a state this helper saved"));
    // A cycle off the board (a damaged checkpoint): refused by the game.
    std::string off_board = small->SaveState();
    off_board[off_board.size() - 2] = 99;  // player_1's column
    EXPECT_THAT(std::string(small->RestoreState(off_board).message()),
                HasSubstr("player_1's cycle is off the board"));
    // The refusals changed nothing: it plays on as a twin never touched.
    auto twin = Open(LightCycles(opponent, agents), 2 * agents);
    ASSERT_NE(twin, nullptr);
    Rows rt(2 * agents);
    ASSERT_OK(twin->Reset(rt.obs.data()));
    std::vector<int64_t> few(2 * agents, 0);
    for (int t = 0; t < 12; ++t) {
      ASSERT_OK(small->StepDiscrete(few.data(), rs.Outputs()));
      ASSERT_OK(twin->StepDiscrete(few.data(), rt.Outputs()));
      ASSERT_EQ(rs.obs, rt.obs) << "step " << t;
      ASSERT_EQ(rs.rewards, rt.rewards) << "step " << t;
    }
  }
}

TEST(LightCyclesTest, RidingStraightBothCrashTogetherAndDraw) {
  auto env = Open(LightCycles("self", 2), 16);
  ASSERT_NE(env, nullptr);
  std::vector<int> lengths;
  std::vector<float> returns;
  RideStraightToTheEnd(*env, 16, &lengths, &returns);
  for (int row = 0; row < 16; ++row) {
    // Six free cells ahead of each, the seventh off the board; in one row,
    // head on at the third step.
    EXPECT_TRUE(lengths[row] == 7 || lengths[row] == 3) << lengths[row];
    EXPECT_EQ(lengths[row], lengths[row ^ 1]) << "row " << row;
    EXPECT_EQ(returns[row], 0.f) << "row " << row;
  }
}

// kwargs.draw_reward: what both players get for a draw (0 by default),
// from -1 to 0, so that training can make a draw worse than nothing.
TEST(LightCyclesTest, ADrawPaysBothPlayersTheDrawReward) {
  EnvSpec spec = LightCycles("self", 2);
  (*spec.mutable_kwargs()->mutable_fields())["draw_reward"].set_number_value(
      -0.5);
  auto env = Open(spec, 16);
  ASSERT_NE(env, nullptr);
  std::vector<int> lengths;
  std::vector<float> returns;
  RideStraightToTheEnd(*env, 16, &lengths, &returns);
  for (int row = 0; row < 16; ++row) {
    EXPECT_EQ(returns[row], -0.5f) << "row " << row;
  }
  (*spec.mutable_kwargs()->mutable_fields())["draw_reward"].set_number_value(
      0.5);
  EnvOpenOptions options;
  options.num_envs = 2;
  EXPECT_THAT(OpenEnv(spec, options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kwargs.draw_reward: 0.5")));
}

TEST(LightCyclesTest, OnePlayersCrashIsTheOthersWin) {
  auto env = Open(LightCycles("self", 2), 2);
  ASSERT_NE(env, nullptr);
  Rows r(2);
  ASSERT_OK(env->Reset(r.obs.data()));
  // player_0 turns right four times: down, left, up, then right into its
  // first cell (columns 0 and 1 only); player_1 rides straight (columns 5
  // to 2).
  const std::vector<int64_t> turn_right = {2, 0};
  for (int step = 1; step <= 3; ++step) {
    ASSERT_OK(env->StepDiscrete(turn_right.data(), r.Outputs()));
    ASSERT_EQ(r.term[0], 0) << "step " << step;
    ASSERT_EQ(r.term[1], 0) << "step " << step;
  }
  ASSERT_OK(env->StepDiscrete(turn_right.data(), r.Outputs()));
  ASSERT_EQ(r.term[0], 1);
  EXPECT_EQ(r.term[1], 1) << "the agents of one game end together";
  EXPECT_EQ(r.rewards[0], -1.f);
  EXPECT_EQ(r.rewards[1], 1.f);
  EXPECT_EQ(r.returns[0], -1.f);
  EXPECT_EQ(r.returns[1], 1.f);
  // The next game has begun: both heads free to move again.
  EXPECT_EQ(At(r, 0, 0, 6, 7), 0.f);
}

TEST(LightCyclesTest, TheScriptedCycleTurnsAwayWhereStraightCrashes) {
  auto env = Open(LightCycles("scripted", 0), 16);
  ASSERT_NE(env, nullptr);
  std::vector<int> lengths;
  std::vector<float> returns;
  RideStraightToTheEnd(*env, 16, &lengths, &returns);
  for (int row = 0; row < 16; ++row) {
    EXPECT_TRUE(lengths[row] == 7 || lengths[row] == 3) << lengths[row];
    EXPECT_EQ(returns[row], -1.f) << "row " << row;
  }
}

TEST(LightCyclesTest, TheRunsAgentsPerEnvMustBeThePlugins) {
  EnvOpenOptions options;
  options.num_envs = 4;
  // Two agents, the run says one: refused naming the field to set.
  EXPECT_THAT(OpenEnv(LightCycles("self", 0), options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("2 agents per environment (player_0, "
                                       "player_1)"),
                             HasSubstr("env.agents_per_env is 1"),
                             HasSubstr("declare env.agents_per_env: 2"))));
  // One agent, the run says two.
  EXPECT_THAT(OpenEnv(LightCycles("random", 2), options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("env.agents_per_env is 2")));
  // Rows that are not whole games.
  options.num_envs = 5;
  EXPECT_THAT(OpenEnv(LightCycles("self", 2), options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_envs 5 is not a multiple of 2")));
  EnvSpec unknown = LightCycles("self", 2);
  (*unknown.mutable_kwargs()->mutable_fields())["opponent"].set_string_value(
      "league");
  ASSERT_OK(ResolveEnvSpec(&unknown));
  options.num_envs = 4;
  EXPECT_THAT(OpenEnv(unknown, options),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("kwargs.opponent: \"league\"")));
}

TEST(LightCyclesTest, CheckEnvReportsTheAgentsAndFindsNoViolation) {
  EnvCheckOptions options;
  options.steps = 2000;
  options.num_envs = 7;  // rounded up to 4 games
  ASSERT_OK_AND_ASSIGN(const EnvCheckReport report,
                       CheckEnv(LightCycles("self", 2), options));
  EXPECT_EQ(report.violation, "");
  EXPECT_EQ(report.agents, "2 agents per environment (player_0, player_1)");
  EXPECT_EQ(report.steps, 2000 * 8);
  EXPECT_GT(report.episodes, 100);
  // Zero-sum: every game's returns sum to 0 over its two players.
  EXPECT_NEAR(report.mean_return, 0.0, 1e-9);
  EXPECT_THAT(FormatEnvCheckReport(report),
              HasSubstr("agents:      2 agents per environment"));
}

TEST(LightCyclesTest, RunFilesCountRowsInWholeEnvironments) {
  const std::string head =
      "env: {id: LightCycles-v0, plugin: light_cycles, observation_size: "
      "450, num_discrete_actions: 3, ";
  EXPECT_THAT(LoadRunSpec(head + "agents_per_env: 2}\nenvs_per_actor: 9\n",
                          RunFileFormat::kYaml),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("envs_per_actor"),
                             HasSubstr("multiple of env.agents_per_env (2)"))));
  EXPECT_THAT(
      LoadRunSpec("env: {id: CartPole-v1, agents_per_env: 2}\n",
                  RunFileFormat::kYaml),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("env.agents_per_env"),
                     HasSubstr("built-in environments have one agent"))));
  EXPECT_THAT(LoadRunSpec(head + "agents_per_env: -1}\n", RunFileFormat::kYaml),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("env.agents_per_env")));
  ASSERT_OK_AND_ASSIGN(
      const RunSpec ok,
      LoadRunSpec(head + "agents_per_env: 2}\nenvs_per_actor: 8\n",
                  RunFileFormat::kYaml));
  EXPECT_EQ(AgentsPerEnv(ok.env()), 2);
}

}  // namespace
}  // namespace rl
