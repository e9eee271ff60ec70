// Replays transitions recorded from Gymnasium 1.1.1's MuJoCo v5 classes
// (tools/record_mujoco_golden.py, testdata/<id>.txt) through the C++ tasks:
// the same starting state (as Gymnasium's set_state: mj_resetData, qpos,
// qvel, mj_forward), the same actions; every observation, the state after
// each step (qpos, qvel) and the reward must agree within 1e-6 relative
// (plus 1e-12 absolute for zeros; observations are float32 here, float64
// there), and the terminated flag exactly. A trajectory's later steps start
// from the state this side reached, solver warm start included, so a
// difference anywhere in the chain shows.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "envs/mujoco/mujoco_task.h"
#include "gtest/gtest.h"

namespace rl::mujoco_envs {
namespace {

struct Step {
  std::vector<double> action, obs, reward, terminated, next_qpos, next_qvel;
};

struct Trajectory {
  std::string env_id;
  std::vector<double> qpos, qvel;
  std::vector<Step> steps;
};

std::vector<Trajectory> ReadGolden(const std::string& path) {
  std::vector<Trajectory> out;
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot open " << path;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "trajectory") {
      out.emplace_back();
      in >> out.back().env_id;
      continue;
    }
    int n = 0;
    in >> n;
    std::vector<double> v(n);
    for (double& x : v) in >> x;
    EXPECT_FALSE(in.fail()) << path << ": bad line " << line.substr(0, 60);
    Trajectory& t = out.back();
    if (key == "qpos") {
      t.qpos = v;
    } else if (key == "qvel") {
      t.qvel = v;
    } else if (key == "action") {
      t.steps.emplace_back();
      t.steps.back().action = v;
    } else if (key == "obs") {
      t.steps.back().obs = v;
    } else if (key == "reward") {
      t.steps.back().reward = v;
    } else if (key == "terminated") {
      t.steps.back().terminated = v;
    } else if (key == "next_qpos") {
      t.steps.back().next_qpos = v;
    } else if (key == "next_qvel") {
      t.steps.back().next_qvel = v;
    } else {
      ADD_FAILURE() << path << ": unknown key " << key;
    }
  }
  return out;
}

bool Near(double ours, double theirs) {
  return std::abs(ours - theirs) <= 1e-6 * std::abs(theirs) + 1e-12;
}

// Compares `ours` with `theirs` element by element; the first difference
// names the quantity, the element and the step.
void ExpectNear(const std::string& what, const std::vector<double>& ours,
                const std::vector<double>& theirs, const std::string& where) {
  ASSERT_EQ(ours.size(), theirs.size()) << what << " size, " << where;
  for (size_t k = 0; k < ours.size(); ++k) {
    ASSERT_TRUE(Near(ours[k], theirs[k]))
        << what << "[" << k << "]: " << ours[k] << " here, " << theirs[k]
        << " in Gymnasium, " << where;
  }
}

class MujocoGoldenTest : public testing::TestWithParam<std::string> {};

TEST_P(MujocoGoldenTest, ReplaysGymnasiumsTransitions) {
  const std::string id = GetParam();
  const std::vector<Trajectory> golden =
      ReadGolden("envs/mujoco/testdata/" + id + ".txt");
  ASSERT_EQ(golden.size(), 3u);
  const std::unique_ptr<MujocoTask> task =
      MakeMujocoTask(id, rlenv::Kwargs("{}"));
  const mjModel* m = task->model();
  int steps = 0;
  for (size_t t = 0; t < golden.size(); ++t) {
    const Trajectory& g = golden[t];
    ASSERT_EQ(g.env_id, id);
    ASSERT_EQ(static_cast<int>(g.qpos.size()), m->nq);
    ASSERT_EQ(static_cast<int>(g.qvel.size()), m->nv);
    mjData* d = mj_makeData(m);
    mj_resetData(m, d);
    for (int k = 0; k < m->nq; ++k) d->qpos[k] = g.qpos[k];
    for (int k = 0; k < m->nv; ++k) d->qvel[k] = g.qvel[k];
    mj_forward(m, d);
    for (size_t s = 0; s < g.steps.size(); ++s) {
      const Step& step = g.steps[s];
      const std::string where =
          "trajectory " + std::to_string(t) + ", step " + std::to_string(s);
      std::vector<float> action(step.action.begin(), step.action.end());
      ASSERT_EQ(static_cast<int>(action.size()), m->nu) << where;
      const StepOutcome r = task->Step(d, action.data());
      std::vector<float> obs(task->observation_size());
      task->Observe(d, obs.data());
      ExpectNear("observation", std::vector<double>(obs.begin(), obs.end()),
                 step.obs, where);
      ExpectNear("qpos after", std::vector<double>(d->qpos, d->qpos + m->nq),
                 step.next_qpos, where);
      ExpectNear("qvel after", std::vector<double>(d->qvel, d->qvel + m->nv),
                 step.next_qvel, where);
      // Gymnasium sums the control cost of float32 actions in float32.
      ASSERT_NEAR(r.reward, step.reward.at(0),
                  1e-6 * std::max(1.0, std::abs(step.reward.at(0))))
          << "reward, " << where;
      ASSERT_EQ(r.terminated, step.terminated.at(0) != 0)
          << "terminated, " << where;
      ++steps;
    }
    mj_deleteData(d);
  }
  EXPECT_GT(steps, 3);
}

INSTANTIATE_TEST_SUITE_P(EveryEnv, MujocoGoldenTest,
                         testing::ValuesIn(MujocoTaskIds()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char c : info.param)
                             name += std::isalnum(c) ? c : '_';
                           return name;
                         });

TEST(MujocoTaskTest, RefusesUnknownIdsAndKwargsNamingThem) {
  try {
    MakeMujocoTask("Hopper-v4", rlenv::Kwargs("{}"));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Hopper-v5"), std::string::npos)
        << e.what();
  }
  try {
    MakeMujocoTask("Hopper-v5", rlenv::Kwargs(R"({"ctrl_cost": 1})"));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kwargs.ctrl_cost"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("ctrl_cost_weight"), std::string::npos)
        << e.what();
  }
  try {
    MakeMujocoTask("Hopper-v5",
                   rlenv::Kwargs(R"({"healthy_z_range": [2, 1]})"));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kwargs.healthy_z_range"),
              std::string::npos)
        << e.what();
  }
}

TEST(MujocoTaskTest, KwargsChangeWhatTheyName) {
  // Positions in the observation, as Gymnasium's flag says.
  EXPECT_EQ(
      MakeMujocoTask("HalfCheetah-v5", rlenv::Kwargs("{}"))->observation_size(),
      17);
  EXPECT_EQ(MakeMujocoTask(
                "HalfCheetah-v5",
                rlenv::Kwargs(
                    R"({"exclude_current_positions_from_observation": false})"))
                ->observation_size(),
            18);
  EXPECT_EQ(MakeMujocoTask(
                "Ant-v5",
                rlenv::Kwargs(R"({"include_cfrc_ext_in_observation": false})"))
                ->observation_size(),
            27);
  const auto skip5 =
      MakeMujocoTask("Hopper-v5", rlenv::Kwargs(R"({"frame_skip": 5})"));
  EXPECT_DOUBLE_EQ(skip5->dt(), 5 * skip5->model()->opt.timestep);
  // A zero control cost: the reward of a still cheetah with any action is
  // its forward progress only.
  const auto free_ctrl = MakeMujocoTask(
      "HalfCheetah-v5", rlenv::Kwargs(R"({"ctrl_cost_weight": 0})"));
  const auto costly = MakeMujocoTask("HalfCheetah-v5", rlenv::Kwargs("{}"));
  mjData* a = mj_makeData(free_ctrl->model());
  mjData* b = mj_makeData(costly->model());
  Rng rng_a(1), rng_b(1);
  free_ctrl->Reset(a, rng_a);
  costly->Reset(b, rng_b);
  const std::vector<float> action(6, 1.0f);
  const double r_free = free_ctrl->Step(a, action.data()).reward;
  const double r_costly = costly->Step(b, action.data()).reward;
  EXPECT_NEAR(r_free - r_costly, 0.1 * 6, 1e-9);
  mj_deleteData(a);
  mj_deleteData(b);
}

}  // namespace
}  // namespace rl::mujoco_envs
