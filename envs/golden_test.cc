// Replays trajectories recorded from Gymnasium 1.0 (tools/gen_golden.py):
// same starting state (SetState), same actions; observations, rewards and
// the terminated/truncated flags must agree to 1e-5 (relative above 1).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "envs/batched_env.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

struct GoldenStep {
  std::vector<double> action;
  std::vector<double> obs;
  double reward = 0;
  int terminated = 0;
  int truncated = 0;
  std::vector<double> state;  // after the step
};

struct Trajectory {
  std::string name;
  int num_steps = 0;
  // Anchored: open-loop unstable, so each step starts from the recorded
  // state (see tools/gen_golden.py).
  bool anchored = false;
  std::vector<double> state;
  std::vector<GoldenStep> steps;
};

struct GoldenFile {
  std::string env_id;
  int max_episode_steps = 0;
  int action_size = 0;
  int obs_size = 0;
  int state_size = 0;
  std::vector<Trajectory> trajectories;
};

std::vector<double> ReadDoubles(std::istringstream& in, int n) {
  std::vector<double> v(n);
  for (double& x : v) in >> x;
  return v;
}

GoldenFile ReadGolden(const std::string& path) {
  GoldenFile g;
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot open " << path;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "env") {
      in >> g.env_id >> g.max_episode_steps >> g.action_size >> g.obs_size >>
          g.state_size;
    } else if (tag == "trajectory") {
      g.trajectories.emplace_back();
      std::string mode;
      in >> g.trajectories.back().name >> g.trajectories.back().num_steps >>
          mode;
      EXPECT_TRUE(mode == "replay" || mode == "anchored") << line;
      g.trajectories.back().anchored = mode == "anchored";
    } else if (tag == "state") {
      g.trajectories.back().state = ReadDoubles(in, g.state_size);
    } else if (tag == "step") {
      GoldenStep step;
      step.action = ReadDoubles(in, g.action_size);
      step.obs = ReadDoubles(in, g.obs_size);
      in >> step.reward >> step.terminated >> step.truncated;
      step.state = ReadDoubles(in, g.state_size);
      g.trajectories.back().steps.push_back(step);
    } else {
      ADD_FAILURE() << path << ": unknown record: " << line;
    }
    EXPECT_FALSE(in.fail()) << path << ": bad line: " << line;
  }
  for (const Trajectory& t : g.trajectories) {
    EXPECT_EQ(t.steps.size(), static_cast<size_t>(t.num_steps)) << t.name;
  }
  return g;
}

::testing::AssertionResult Near(double got, double want) {
  if (std::fabs(got - want) <= 1e-5 * std::fmax(1.0, std::fabs(want))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

// Steps one environment per trajectory, all in one batch (so rows must not
// leak into each other). With anchor_all every trajectory is anchored: a
// one-step check of the dynamics from every recorded state.
void CheckTrajectories(const GoldenFile& g, bool anchor_all) {
  const int n = static_cast<int>(g.trajectories.size());
  auto env_or = BatchedEnv::Create(g.env_id, n, /*seed=*/7, /*num_threads=*/2);
  ASSERT_OK(env_or);
  BatchedEnv& env = **env_or;
  const EnvSpec& info = env.spec();
  ASSERT_EQ(info.max_episode_steps(), g.max_episode_steps);
  ASSERT_EQ(info.observation_size(), g.obs_size);
  ASSERT_EQ(env.state_size(), g.state_size);
  size_t longest = 0;
  for (int e = 0; e < n; ++e) {
    const Trajectory& t = g.trajectories[e];
    ASSERT_OK(env.SetState(e, t.state.data(), t.state.size()));
    longest = std::max(longest, t.steps.size());
  }
  std::vector<float> obs(n * g.obs_size), final_obs(n * g.obs_size);
  std::vector<float> rewards(n);
  std::vector<uint8_t> terminated(n), truncated(n);
  std::vector<int64_t> discrete(n, 0);
  std::vector<float> continuous(n, 0.0f);
  StepOutputs out;
  out.observations = obs.data();
  out.rewards = rewards.data();
  out.terminated = terminated.data();
  out.truncated = truncated.data();
  out.final_observations = final_obs.data();
  size_t checked = 0;
  for (size_t t = 0; t < longest; ++t) {
    for (int e = 0; e < n; ++e) {
      const Trajectory& traj = g.trajectories[e];
      // Trajectories that are over keep stepping with action 0, unchecked.
      const double a = t < traj.steps.size() ? traj.steps[t].action[0] : 0.0;
      discrete[e] = static_cast<int64_t>(a);
      continuous[e] = static_cast<float>(a);
      if ((anchor_all || traj.anchored) && t > 0 && t < traj.steps.size()) {
        const std::vector<double>& s = traj.steps[t - 1].state;
        ASSERT_OK(env.SetState(e, s.data(), s.size()));
        ASSERT_OK(env.SetElapsedSteps(e, static_cast<int>(t)));
      }
    }
    const absl::Status status =
        IsDiscrete(info) ? env.StepDiscrete(discrete.data(), out)
                         : env.StepContinuous(continuous.data(), out);
    ASSERT_OK(status);
    for (int e = 0; e < n; ++e) {
      const Trajectory& traj = g.trajectories[e];
      if (t >= traj.steps.size()) continue;
      const GoldenStep& want = traj.steps[t];
      const std::string where =
          absl::StrCat(g.env_id, " ", traj.name, " step ", t + 1,
                       anchor_all ? " (anchored)" : "");
      ASSERT_EQ(terminated[e], want.terminated) << where;
      ASSERT_EQ(truncated[e], want.truncated) << where;
      ASSERT_TRUE(Near(rewards[e], want.reward)) << where << " reward";
      // At the end of an episode `obs` already holds the next episode's
      // first observation; the recorded one is the final observation.
      const bool done = want.terminated || want.truncated;
      const float* got =
          (done ? final_obs.data() : obs.data()) + e * g.obs_size;
      for (int k = 0; k < g.obs_size; ++k) {
        ASSERT_TRUE(Near(got[k], want.obs[k])) << where << " obs[" << k << "]";
      }
      ++checked;
    }
  }
  size_t expected = 0;
  for (const Trajectory& t : g.trajectories) expected += t.steps.size();
  EXPECT_EQ(checked, expected);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  GoldenFile Load() {
    return ReadGolden(absl::StrCat("envs/testdata/golden/", GetParam()));
  }
};

TEST_P(GoldenTest, TrajectoriesMatchGymnasium) {
  const GoldenFile g = Load();
  ASSERT_FALSE(g.trajectories.empty());
  // Every file ends at least one trajectory by termination and one by the
  // registered time limit (except Pendulum, which never terminates).
  bool any_terminated = false, any_truncated = false;
  for (const Trajectory& t : g.trajectories) {
    any_terminated |= t.steps.back().terminated == 1;
    any_truncated |= t.steps.back().truncated == 1;
  }
  EXPECT_TRUE(any_truncated);
  EXPECT_TRUE(any_terminated || g.env_id == "Pendulum-v1");
  CheckTrajectories(g, /*anchor_all=*/false);
}

TEST_P(GoldenTest, EveryStepMatchesGymnasiumFromTheRecordedState) {
  CheckTrajectories(Load(), /*anchor_all=*/true);
}

INSTANTIATE_TEST_SUITE_P(ClassicControl, GoldenTest,
                         ::testing::Values("golden_cartpole.txt",
                                           "golden_acrobot.txt",
                                           "golden_mountain_car.txt",
                                           "golden_continuous_mountain_car.txt",
                                           "golden_pendulum.txt"));

}  // namespace
}  // namespace rl
