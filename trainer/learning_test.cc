// Learning bar: train a run file over --seeds seeds (1, 2, ...; two at a
// time) and require that at least --need and at most --most of them reach
// --target (mean return of the last 100 episodes) within --steps
// environment steps (--most: a control that must not learn), --at_once
// seeds at a time (default 2). Not timed. Seeds that can no longer change
// the verdict (--need already met, or out of reach) are not trained.
// With --judge, the target is instead the trained policy's mean return on
// the judge's run file (another opponent: a game learned by self-play
// judged against a scripted player), over --judge_episodes episodes.
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runspec/run_spec.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "", "run file");
ABSL_FLAG(int64_t, steps, 0, "step budget");
ABSL_FLAG(double, target, 0, "target mean return");
ABSL_FLAG(int, need, 4, "seeds that must reach the target");
ABSL_FLAG(int, most, 5, "seeds that may reach the target");
ABSL_FLAG(int, seeds, 5, "seeds to train");
ABSL_FLAG(std::string, judge, "",
          "run file the trained policy is evaluated on (empty: the run's "
          "own mean return is judged)");
ABSL_FLAG(int, judge_episodes, 1000, "episodes of the --judge evaluation");
ABSL_FLAG(int, at_once, 2,
          "seeds trained at once (threads); 1 for an env stepped by the "
          "embedded Python, which crashed (SIGSEGV) with two");
ABSL_FLAG(std::string, precision, "",
          "execution.precision to train with (empty: the run file's)");

namespace rl {
namespace {

TEST(LearningTest, ReachesTargetInEnoughSeeds) {
  auto spec = LoadRunSpecFile(absl::GetFlag(FLAGS_run));
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_total_env_steps(absl::GetFlag(FLAGS_steps));
  spec->set_target_return(absl::GetFlag(FLAGS_target));
  if (!absl::GetFlag(FLAGS_precision).empty()) {
    spec->mutable_execution()->set_precision(absl::GetFlag(FLAGS_precision));
  }
  std::optional<RunSpec> judge;
  if (!absl::GetFlag(FLAGS_judge).empty()) {
    auto loaded = LoadRunSpecFile(absl::GetFlag(FLAGS_judge));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    judge = *loaded;
  }
  torch::set_num_threads(1);

  std::mutex mu;
  int reached = 0;
  std::vector<int> seeds;
  for (int seed = 1; seed <= absl::GetFlag(FLAGS_seeds); ++seed) {
    seeds.push_back(seed);
  }
  auto run_seed = [&](int seed) {
    RunSpec s = *spec;
    s.set_seed(seed);
    // With a judge, the run trains its whole budget; the judge decides.
    if (judge.has_value()) s.clear_target_return();
    auto trainer = LocalTrainer::Create(s, TrainerOptions{});
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    auto result = (*trainer)->Train();
    ASSERT_TRUE(result.ok()) << result.status();
    if (judge.has_value()) {
      // With several policies each is judged, and all must reach it.
      bool all = true;
      for (int i = 0; i < std::max(1, s.policies_size()); ++i) {
        std::vector<double> returns;
        auto judged = EvaluatePolicy(*judge, (*trainer)->policy(i),
                                     absl::GetFlag(FLAGS_judge_episodes),
                                     1000 + seed, &returns);
        ASSERT_TRUE(judged.ok()) << judged.status();
        const bool ok = *judged >= absl::GetFlag(FLAGS_target);
        all = all && ok;
        std::lock_guard<std::mutex> lock(mu);
        std::printf(
            "seed %d%s: %s on %s, mean return %.3f (%s) after %lld steps\n",
            seed,
            s.policies_size() > 0
                ? absl::StrCat(" policy ", s.policies(i).name()).c_str()
                : "",
            ok ? "reached" : "NOT reached", absl::GetFlag(FLAGS_judge).c_str(),
            *judged, DescribeGameOutcomes(returns).c_str(),
            static_cast<long long>(result->progress.env_steps));
        std::fflush(stdout);
      }
      std::lock_guard<std::mutex> lock(mu);
      reached += all;
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    std::printf(
        "seed %d: %s, mean return %.1f after %lld steps (%.0f steps/s)\n", seed,
        result->target_reached ? "reached" : "NOT reached",
        result->progress.mean_return,
        static_cast<long long>(result->progress.env_steps),
        result->progress.steps_per_second);
    std::fflush(stdout);
    reached += result->target_reached;
  };
  const size_t at_once =
      static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_at_once)));
  const int need = absl::GetFlag(FLAGS_need);
  const int most = absl::GetFlag(FLAGS_most);
  for (size_t i = 0; i < seeds.size(); i += at_once) {
    // Seeds left untrained once they cannot change the verdict: the bar is
    // met and no more may reach it than --most allows, or it can no longer
    // be met.
    const int left = static_cast<int>(seeds.size() - i);
    if ((reached >= need && most >= reached + left) || reached + left < need) {
      std::printf(
          "seeds %d-%zu: not trained, the verdict is decided (%d of "
          "%zu reached, %d needed)\n",
          seeds[i], seeds.size(), reached, i, need);
      break;
    }
    std::vector<std::thread> threads;
    for (size_t j = i; j < std::min(i + at_once, seeds.size()); ++j) {
      threads.emplace_back(run_seed, seeds[j]);
    }
    for (auto& t : threads) t.join();
  }
  EXPECT_GE(reached, need) << "target " << absl::GetFlag(FLAGS_target)
                           << " within " << absl::GetFlag(FLAGS_steps)
                           << " steps";
  EXPECT_LE(reached, most) << "target " << absl::GetFlag(FLAGS_target)
                           << " within " << absl::GetFlag(FLAGS_steps)
                           << " steps: the control learned";
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
