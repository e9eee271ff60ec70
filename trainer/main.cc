// rl_local: train a run on this machine (actor and learner in one process),
// or evaluate a checkpoint.
//
//   rl_local train --run=examples/cartpole.yaml --run_dir=runs/cartpole
//   rl_local eval  --run=examples/cartpole.yaml --checkpoint=runs/cartpole
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "common/run_spec.h"
#include "learner/checkpoint.h"
#include "trainer/local_trainer.h"

ABSL_FLAG(std::string, run, "", "Run file (YAML or JSON).");
ABSL_FLAG(std::string, run_dir, "",
          "Directory for checkpoints (default: runs/<run name>).");
ABSL_FLAG(bool, resume, true,
          "train: continue from the newest checkpoint in --run_dir if any.");
ABSL_FLAG(std::string, checkpoint, "",
          "eval: a checkpoint directory, or a run directory (its newest).");
ABSL_FLAG(int, episodes, 100, "eval: episodes to play.");
ABSL_FLAG(uint64_t, eval_seed, 1000003, "eval: seed of the environments.");
ABSL_FLAG(int, env_threads, 1, "Threads stepping the environments.");
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(bool, progress, true, "Show a live progress line.");

namespace rl {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string ProgressLine(const TrainerProgress& p) {
  const double eta =
      (p.total_env_steps - p.env_steps) / std::max(p.steps_per_second, 1e-9);
  const std::string ret = std::isnan(p.mean_return)
                              ? std::string("-")
                              : absl::StrFormat("%.1f", p.mean_return);
  return absl::StrFormat(
      "steps %d/%d | %.0f steps/s | return(100) %s | episodes %d | "
      "kl %.4f | ETA %s",
      p.env_steps, p.total_env_steps, p.steps_per_second, ret, p.episodes,
      p.last_update.approx_kl, FormatDuration(eta));
}

std::string RunDir(const RunSpec& spec) {
  const std::string flag = absl::GetFlag(FLAGS_run_dir);
  if (!flag.empty()) return flag;
  return "runs/" + (spec.name().empty() ? spec.env().id() : spec.name());
}

int Train(const RunSpec& spec) {
  TrainerOptions options;
  options.run_dir = RunDir(spec);
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  auto trainer = LocalTrainer::Create(spec, options);
  if (!trainer.ok()) return Fail(trainer.status());
  if (absl::GetFlag(FLAGS_resume)) {
    auto latest = LatestCheckpoint(options.run_dir + "/checkpoints");
    if (latest.ok()) {
      const absl::Status restored = (*trainer)->Restore(*latest);
      if (!restored.ok()) return Fail(restored);
      std::printf("resumed from %s at %lld steps\n", latest->c_str(),
                  static_cast<long long>((*trainer)->progress().env_steps));
    }
  }
  std::printf(
      "training %s on %s: %d envs x %d steps per update, budget %lld steps\n",
      spec.name().c_str(), spec.env().id().c_str(), spec.envs_per_actor(),
      spec.segment_length(), static_cast<long long>(spec.total_env_steps()));
  const bool live = absl::GetFlag(FLAGS_progress);
  const bool tty = isatty(fileno(stdout));
  double last_print = -1e9;
  auto result = (*trainer)->Train([&](const TrainerProgress& p) {
    if (!live) return;
    if (tty) {
      std::printf("\r\033[K%s", ProgressLine(p).c_str());
      std::fflush(stdout);
    } else if (p.seconds - last_print >= 5.0) {
      std::printf("%s\n", ProgressLine(p).c_str());
      std::fflush(stdout);
      last_print = p.seconds;
    }
  });
  if (live && tty) std::printf("\n");
  if (!result.ok()) return Fail(result.status());
  const TrainerProgress& p = result->progress;
  const TimeBreakdown& t = result->time;
  const double total = t.env + t.inference + t.gae + t.update + t.other;
  if (result->target_reached) {
    std::printf(
        "solved at %lld steps in %.1f s, %.0f steps/s (mean return of "
        "the last 100 episodes %.1f >= %.1f)\n",
        static_cast<long long>(result->target_reached_at_steps), p.seconds,
        p.steps_per_second, p.mean_return, spec.target_return());
  } else {
    std::printf(
        "%s after %lld steps in %.1f s, %.0f steps/s (mean return of "
        "the last 100 episodes %.1f)\n",
        spec.has_target_return() ? "NOT solved" : "finished",
        static_cast<long long>(p.env_steps), p.seconds, p.steps_per_second,
        p.mean_return);
  }
  if (total > 0) {
    std::printf(
        "time: env %.0f%%, inference %.0f%%, GAE %.0f%%, update %.0f%%, "
        "other %.0f%%\n",
        100 * t.env / total, 100 * t.inference / total, 100 * t.gae / total,
        100 * t.update / total, 100 * t.other / total);
  }
  std::printf("checkpoint: %s\n", result->last_checkpoint.c_str());
  return spec.has_target_return() && !result->target_reached ? 3 : 0;
}

int Evaluate(const RunSpec& spec) {
  std::string path = absl::GetFlag(FLAGS_checkpoint);
  if (path.empty()) path = RunDir(spec);
  for (const std::string& root : {path + "/checkpoints", path}) {
    auto latest = LatestCheckpoint(root);
    if (latest.ok()) {
      path = *latest;
      break;
    }
  }
  TrainerOptions options;
  auto trainer = LocalTrainer::Create(spec, options);
  if (!trainer.ok()) return Fail(trainer.status());
  const absl::Status restored =
      ReadCheckpoint(path, (*trainer)->policy(), nullptr, nullptr);
  if (!restored.ok()) return Fail(restored);
  auto mean =
      EvaluatePolicy(spec, (*trainer)->policy(), absl::GetFlag(FLAGS_episodes),
                     absl::GetFlag(FLAGS_eval_seed));
  if (!mean.ok()) return Fail(mean.status());
  std::printf(
      "evaluated %s: mean return %.2f over %d episodes "
      "(deterministic actions, seed %llu)\n",
      path.c_str(), *mean, absl::GetFlag(FLAGS_episodes),
      static_cast<unsigned long long>(absl::GetFlag(FLAGS_eval_seed)));
  return 0;
}

}  // namespace
}  // namespace rl

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "rl_local train|eval --run=RUN_FILE [--run_dir=DIR] [--checkpoint=DIR]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 ||
      (std::string(args[1]) != "train" && std::string(args[1]) != "eval")) {
    std::fprintf(stderr, "usage: rl_local train|eval --run=RUN_FILE [flags]\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_run).empty()) {
    std::fprintf(stderr, "error: --run is required (a run file)\n");
    return 2;
  }
  torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_torch_threads)));
  auto spec = rl::LoadRunSpecFile(absl::GetFlag(FLAGS_run));
  if (!spec.ok()) return rl::Fail(spec.status());
  return std::string(args[1]) == "train" ? rl::Train(*spec)
                                         : rl::Evaluate(*spec);
}
