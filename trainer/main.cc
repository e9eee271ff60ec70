// rl_local: train a run on this machine (actor and learner in one process),
// or evaluate a checkpoint. Flags -> LocalRunOptions -> LocalRun (the work is
// in trainer/local_run.h).
//
//   rl_local train --run=examples/cartpole.yaml --run_dir=runs/cartpole
//   rl_local eval  --run=examples/cartpole.yaml --checkpoint=runs/cartpole
//   rl_local eval  --run=examples/cartpole.yaml --policy=cartpole.pt
//   rl_local check-env --run=examples/plugin_env/chase.yaml [--steps=N]
//   rl_local export --run=examples/cartpole.yaml --checkpoint=runs/cartpole
//       --output=cartpole.pt [--sampled]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/command_line.h"
#include "envs/call_watch.h"
#include "policy/cuda_runtime.h"
#include "trainer/local_run.h"
#include "trainer/local_sweep.h"

ABSL_FLAG(std::string, run, "", "Run file (YAML or JSON).");
ABSL_FLAG(std::string, sweep, "",
          "sweep: the sweep file (YAML or JSON; docs/sweeps.md).");
ABSL_FLAG(std::string, run_dir, "",
          "Directory for checkpoints (default: runs/<run name>).");
ABSL_FLAG(bool, resume, true,
          "train: continue from the newest checkpoint in --run_dir if any.");
ABSL_FLAG(std::string, checkpoint, "",
          "eval: a checkpoint directory, or a run directory (its newest).");
ABSL_FLAG(std::string, policy, "",
          "eval: an exported policy file (rl_local export) to play instead "
          "of a checkpoint.");
ABSL_FLAG(std::string, policy_name, "",
          "export: in a run of several policies (policies:), the one to "
          "export (default: the first).");
ABSL_FLAG(int, episodes, 100, "eval: episodes to play.");
ABSL_FLAG(uint64_t, eval_seed, 1000003, "eval: seed of the environments.");
ABSL_FLAG(int64_t, seed, -1,
          "train: the run's seed (every random stream), instead of the run "
          "file's `seed`; -1: the file's.");
ABSL_FLAG(int, env_threads, 1,
          "Threads stepping the environments; above 1 also the most a run's "
          "resources.actor_threads may ask for.");
ABSL_FLAG(int, torch_threads, 1, "LibTorch intra-op threads.");
ABSL_FLAG(bool, progress, true, "Show a live progress line.");
ABSL_FLAG(int, profile, 0,
          "train: write a Chrome trace (LibTorch's profiler) of the first N "
          "updates, collection included; 0: none.");
ABSL_FLAG(std::string, profile_output, "",
          "train: the trace file of --profile (default "
          "<run_dir>/profile.json).");
ABSL_FLAG(std::string, output, "", "export: the file to write.");
ABSL_FLAG(std::string, format, "torchscript", "export: torchscript or onnx.");
ABSL_FLAG(bool, sampled, false,
          "export: actions sampled from the policy (default: its most likely "
          "action).");
ABSL_FLAG(int64_t, steps, 10000,
          "check-env: batch steps of random actions (8 environments).");

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "rl_local train|eval|check-env|export --run=RUN_FILE [--run_dir=DIR] "
      "[--checkpoint=DIR] [--steps=N] [--output=FILE]\n"
      "       rl_local sweep --sweep=SWEEP_FILE [--run_dir=DIR]";
  const std::vector<std::string> args =
      rl::ParseCommandLineOrExit(argc, argv, kUsage, /*max_positional=*/1);
  // Before LibTorch is first asked about CUDA (policy/cuda_runtime.h).
  rl::PrepareCudaRuntime();
  // rl_local runs its own user's run file: any Python module it names may
  // be imported through the Gymnasium bridge, unless the environment says
  // otherwise (workers restrict this: docs/security.md).
  setenv("RL_PYTHON_ENV_MODULES", "*", /*overwrite=*/0);
  // A plugin call past env.call_timeout_s ends rl_local with
  // kEnvHungExitCode (75), naming the call, rather than waiting for ever.
  rl::CallWatch::Process().EnableEnd();
  if (args.size() == 1 && args[0] == "sweep") {
    if (absl::GetFlag(FLAGS_sweep).empty()) {
      std::fprintf(stderr, "error: sweep needs --sweep=SWEEP_FILE\nusage: %s\n",
                   kUsage);
      return rl::kExitBadInput;
    }
    torch::set_num_threads(std::max(1, absl::GetFlag(FLAGS_torch_threads)));
    const auto outcomes = rl::RunLocalSweepFile(
        absl::GetFlag(FLAGS_sweep), absl::GetFlag(FLAGS_run_dir),
        absl::GetFlag(FLAGS_env_threads));
    if (!outcomes.ok()) {
      const absl::StatusCode code = outcomes.status().code();
      return rl::PrintLocalRunError(
          outcomes.status(), code == absl::StatusCode::kInvalidArgument ||
                                     code == absl::StatusCode::kNotFound
                                 ? rl::kExitBadInput
                                 : rl::kExitFailed);
    }
    return 0;
  }
  if (args.size() == 1 && args[0] == "check-env") {
    return rl::CheckRunFileEnv(absl::GetFlag(FLAGS_run),
                               absl::GetFlag(FLAGS_steps));
  }
  if (args.size() == 1 && args[0] == "export") {
    rl::ExportOptions options;
    options.run_file = absl::GetFlag(FLAGS_run);
    options.checkpoint = absl::GetFlag(FLAGS_checkpoint);
    options.format = absl::GetFlag(FLAGS_format);
    options.output = absl::GetFlag(FLAGS_output);
    options.sampled = absl::GetFlag(FLAGS_sampled);
    options.policy_name = absl::GetFlag(FLAGS_policy_name);
    return rl::ExportRunPolicy(options);
  }
  if (!absl::GetFlag(FLAGS_output).empty() || absl::GetFlag(FLAGS_sampled) ||
      absl::GetFlag(FLAGS_format) != "torchscript" ||
      !absl::GetFlag(FLAGS_policy_name).empty()) {
    std::fprintf(stderr,
                 "error: --output, --format, --sampled and --policy_name are "
                 "export's flags\nusage: %s\n",
                 kUsage);
    return rl::kExitBadInput;
  }
  rl::LocalRunOptions options;
  if (args.size() != 1 || !rl::ParseLocalRunMode(args[0], &options.mode)) {
    std::fprintf(stderr, "usage: %s\n", kUsage);
    return rl::kExitBadInput;
  }
  options.run_file = absl::GetFlag(FLAGS_run);
  options.run_dir = absl::GetFlag(FLAGS_run_dir);
  options.resume = absl::GetFlag(FLAGS_resume);
  options.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  options.policy_file = absl::GetFlag(FLAGS_policy);
  options.episodes = absl::GetFlag(FLAGS_episodes);
  options.eval_seed = absl::GetFlag(FLAGS_eval_seed);
  if (const int64_t seed = absl::GetFlag(FLAGS_seed); seed >= 0) {
    options.seed = static_cast<uint64_t>(seed);
  } else if (seed != -1) {
    std::fprintf(stderr, "error: --seed: must be >= 0 (got %lld)\n",
                 static_cast<long long>(seed));
    return rl::kExitBadInput;
  }
  options.env_threads = absl::GetFlag(FLAGS_env_threads);
  options.torch_threads = absl::GetFlag(FLAGS_torch_threads);
  options.progress = absl::GetFlag(FLAGS_progress);
  options.profile_steps = absl::GetFlag(FLAGS_profile);
  if (options.profile_steps < 0) {
    std::fprintf(stderr, "error: --profile: must be >= 0 (got %d)\n",
                 options.profile_steps);
    return rl::kExitBadInput;
  }
  options.profile_output = absl::GetFlag(FLAGS_profile_output);

  auto run = rl::LocalRun::Create(options);
  if (!run.ok()) {
    // A run file that cannot be read (NOT_FOUND) is bad input too.
    const bool bad_input =
        run.status().code() == absl::StatusCode::kInvalidArgument ||
        run.status().code() == absl::StatusCode::kNotFound ||
        run.status().code() == absl::StatusCode::kUnimplemented;
    return rl::PrintLocalRunError(
        run.status(), bad_input ? rl::kExitBadInput : rl::kExitFailed);
  }
  auto outcome = (*run)->Wait();
  if (!outcome.ok()) {
    return rl::PrintLocalRunError(outcome.status(), rl::kExitFailed);
  }
  return *outcome == rl::LocalRunOutcome::kTargetMissed ? rl::kExitTargetMissed
                                                        : rl::kExitDone;
}
