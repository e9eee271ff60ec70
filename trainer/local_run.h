// rl_local's work, behind its flags: a run file -> a LocalTrainer ->
// training with a live progress line and a summary on stdout (or the
// evaluation of a checkpoint). main.cc only fills LocalRunOptions from flags
// and maps the outcome to an exit code.
#ifndef RL_TRAINER_LOCAL_RUN_H_
#define RL_TRAINER_LOCAL_RUN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "policy/policy_export.h"
#include "proto/common.pb.h"
#include "trainer/local_trainer.h"

namespace rl {

struct LocalRunOptions {
  enum class Mode { kTrain, kEvaluate };
  Mode mode = Mode::kTrain;
  // Run file (YAML or JSON); required.
  std::string run_file;
  // Checkpoints live under <run_dir>/checkpoints; empty: runs/<run name>
  // (the environment id when the run has no name).
  std::string run_dir;
  // Train: continue from the newest checkpoint in run_dir if there is one.
  bool resume = true;
  // Evaluate: a checkpoint directory, or a run directory (its newest);
  // empty: run_dir.
  std::string checkpoint;
  // Evaluate: an exported policy file (rl_local export) to play instead of
  // a checkpoint.
  std::string policy_file;
  int episodes = 100;
  uint64_t eval_seed = 1000003;
  // Train: the run's seed instead of the run file's (rl_local --seed).
  std::optional<uint64_t> seed;
  int env_threads = 1;
  int torch_threads = 1;
  // Train: a live progress line (redrawn on a terminal, every 5 s else).
  bool progress = true;
  // Train: a Chrome trace of this many updates (collection and update, the
  // first ones) written to profile_output (empty: <run_dir>/profile.json);
  // 0: none.
  int profile_steps = 0;
  std::string profile_output;
};

// "train" or "eval"; false for anything else.
bool ParseLocalRunMode(absl::string_view word, LocalRunOptions::Mode* mode);

// Exit codes of rl_local, as the README documents them.
inline constexpr int kExitDone = 0;          // done, or target reached
inline constexpr int kExitFailed = 1;        // any other error
inline constexpr int kExitBadInput = 2;      // run file, flags, checkpoint
inline constexpr int kExitTargetMissed = 3;  // budget used, target not met

enum class LocalRunOutcome { kDone, kTargetMissed };

// rl_local check-env: the run file's environment stepped `steps` times with
// random actions against the plugin contract (envs/env_check.h); prints
// the report on stdout. Returns the exit code: kExitDone when no violation
// is found, kExitFailed for a violation or a plugin that cannot be used,
// kExitBadInput for a run file that is wrong.
int CheckRunFileEnv(const std::string& run_file, int64_t steps);

// rl_local export: a checkpoint's policy as a file people deploy.
struct ExportOptions {
  std::string run_file;    // the run's file (YAML or JSON); required
  std::string checkpoint;  // a checkpoint directory, or a run directory
  std::string format = "torchscript";  // "torchscript" or "onnx"
  std::string output;                  // the file to write; required
  bool sampled = false;  // actions drawn from the policy, not its argmax
  // A run of several policies (policies:): the one to export, by name
  // (default: the first, whose checkpoints are the run's).
  std::string policy_name;
};

// Loads the run file's policy from the checkpoint (without making its
// environments: a cluster run's plugin need not be here) and writes it
// with its sidecar (policy/policy_export.h); prints what it wrote. Returns
// the exit code: kExitBadInput for wrong options or run file, kExitFailed
// for a checkpoint that cannot be read or a file that cannot be written.
int ExportRunPolicy(const ExportOptions& options);

class LocalRun {
 public:
  // Reads the run file and builds the trainer: for training resumed from
  // the newest checkpoint (with `resume`), for evaluation loaded from the
  // checkpoint. Errors here are the input's: INVALID_ARGUMENT for a run
  // file, option or checkpoint that is wrong, NOT_FOUND for a missing one.
  static absl::StatusOr<std::unique_ptr<LocalRun>> Create(
      const LocalRunOptions& options);

  // Trains until the budget is used or the target return is reached, or
  // plays the evaluation episodes; prints progress and the summary on
  // stdout. An error here (a NaN in an update, a failed checkpoint write)
  // is the run's failure, whatever its code: kExitFailed, not kExitBadInput.
  absl::StatusOr<LocalRunOutcome> Wait();

 private:
  LocalRun(const LocalRunOptions& options, const RunSpec& spec,
           std::unique_ptr<LocalTrainer> trainer, std::string checkpoint,
           std::unique_ptr<ExportedPolicy> exported);

  absl::StatusOr<LocalRunOutcome> Train();
  absl::StatusOr<LocalRunOutcome> Evaluate();

  LocalRunOptions options_;
  RunSpec spec_;
  std::unique_ptr<LocalTrainer> trainer_;
  // Train: the checkpoint resumed from (empty: a fresh run). Evaluate: the
  // checkpoint loaded.
  std::string checkpoint_;
  // Evaluate: the exported file played instead (policy_file).
  std::unique_ptr<ExportedPolicy> exported_;
};

// Prints "error: <message>" on stderr and returns `exit_code`.
int PrintLocalRunError(const absl::Status& status, int exit_code);

}  // namespace rl

#endif  // RL_TRAINER_LOCAL_RUN_H_
