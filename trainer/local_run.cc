#include "trainer/local_run.h"

#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "envs/env_check.h"
#include "learner/checkpoint.h"
#include "policy/actor_critic.h"
#include "policy/onnx_export.h"
#include "policy/policy_export.h"
#include "policy/step_profiler.h"
#include "runspec/named_policies.h"
#include "runspec/run_footprint.h"
#include "runspec/run_spec.h"

namespace rl {
namespace {

// What of `spec` only the service uses: rl_local trains with one actor
// and one learner in this process, collection and update in turn.
std::vector<std::string> ServiceOnlySettings(const RunSpec& spec) {
  std::vector<std::string> unused;
  const Resources& res = spec.resources();
  if (res.num_actors() > 1) {
    unused.push_back(absl::StrCat(
        "resources.num_actors ", res.num_actors(),
        " (an update here learns from one actor's segment, the service's "
        "from ",
        res.num_actors(), ")"));
  }
  if (res.num_learners() > 1) {
    unused.push_back(
        absl::StrCat("resources.num_learners ", res.num_learners()));
  }
  if (res.learner_per_policy()) {
    unused.push_back(
        "resources.learner_per_policy (the policies update on threads of "
        "this process)");
  }
  if (spec.sync_mode() == ASYNC) {
    unused.push_back(absl::StrCat("sync_mode ASYNC, max_policy_lag ",
                                  spec.max_policy_lag(), " (on-policy here)"));
  }
  if (spec.execution().collective_backend() != "auto") {
    unused.push_back(absl::StrCat("execution.collective_backend ",
                                  spec.execution().collective_backend()));
  }
  return unused;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// " | return(100) red 0.31, blue -0.28" with several policies, else "".
std::string PolicyReturns(const TrainerProgress& p) {
  if (p.policies.empty()) return "";
  std::string out = " | return(100)";
  for (size_t i = 0; i < p.policies.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? " " : ", ", p.policies[i].name, " ",
                    std::isnan(p.policies[i].mean_return)
                        ? std::string("-")
                        : absl::StrFormat("%.2f", p.policies[i].mean_return));
  }
  return out;
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
             p.env_steps, p.total_env_steps, p.steps_per_second, ret,
             p.episodes, p.last_update.approx_kl, FormatDuration(eta)) +
         (p.league.empty() ? "" : " | " + p.league) + PolicyReturns(p);
}

void PrintSummary(const RunSpec& spec, const TrainResult& result) {
  const TrainerProgress& p = result.progress;
  const TimeBreakdown& t = result.time;
  if (result.target_reached) {
    std::printf(
        "solved at %lld steps in %.1f s, %.0f steps/s (mean return of "
        "the last 100 episodes %.1f >= %.1f)\n",
        static_cast<long long>(result.target_reached_at_steps), p.seconds,
        p.steps_per_second, p.mean_return, spec.target_return());
  } else {
    std::printf(
        "%s after %lld steps in %.1f s, %.0f steps/s (mean return of "
        "the last 100 episodes %.1f)\n",
        spec.has_target_return() ? "NOT solved" : "finished",
        static_cast<long long>(p.env_steps), p.seconds, p.steps_per_second,
        p.mean_return);
  }
  const double total = t.env + t.inference + t.gae + t.update + t.other;
  if (total > 0) {
    std::printf(
        "time: env %.0f%%, inference %.0f%%, GAE %.0f%%, update %.0f%%, "
        "other %.0f%%\n",
        100 * t.env / total, 100 * t.inference / total, 100 * t.gae / total,
        100 * t.update / total, 100 * t.other / total);
  }
  if (!p.league.empty()) std::printf("league: %s\n", p.league.c_str());
  for (const PolicyProgress& policy : p.policies) {
    std::printf(
        "policy %s: mean return of its last 100 episodes %.3f (%lld "
        "episodes)\n",
        policy.name.c_str(), policy.mean_return,
        static_cast<long long>(policy.episodes));
  }
  std::printf("checkpoint: %s\n", result.last_checkpoint.c_str());
}

}  // namespace

int CheckRunFileEnv(const std::string& run_file, int64_t steps) {
  if (run_file.empty()) {
    return PrintLocalRunError(
        absl::InvalidArgumentError("a run file is required (--run)"),
        kExitBadInput);
  }
  if (steps < 1) {
    return PrintLocalRunError(absl::InvalidArgumentError(absl::StrCat(
                                  "--steps: must be >= 1 (got ", steps, ")")),
                              kExitBadInput);
  }
  absl::StatusOr<RunSpec> spec = LoadRunSpecFile(run_file);
  if (!spec.ok()) {
    return PrintLocalRunError(spec.status(), kExitBadInput);
  }
  EnvCheckOptions options;
  options.steps = steps;
  absl::StatusOr<EnvCheckReport> report = CheckEnv(spec->env(), options);
  if (!report.ok()) return PrintLocalRunError(report.status(), kExitFailed);
  std::printf("%s", FormatEnvCheckReport(*report).c_str());
  std::fflush(stdout);
  return report->violation.empty() ? kExitDone : kExitFailed;
}

int ExportRunPolicy(const ExportOptions& options) {
  auto bad = [](const std::string& message) {
    return PrintLocalRunError(absl::InvalidArgumentError(message),
                              kExitBadInput);
  };
  if (options.run_file.empty()) return bad("a run file is required (--run)");
  if (options.checkpoint.empty()) {
    return bad(
        "a checkpoint is required (--checkpoint: a checkpoint or run "
        "directory)");
  }
  if (options.output.empty())
    return bad("an output file is required (--output)");
  if (options.format != "torchscript" && options.format != "onnx") {
    return bad(absl::StrCat("--format: must be torchscript or onnx (got \"",
                            options.format, "\")"));
  }
  absl::StatusOr<RunSpec> spec = LoadRunSpecFile(options.run_file);
  if (!spec.ok()) return PrintLocalRunError(spec.status(), kExitBadInput);
  // A run of several policies exports one: its network, its checkpoints.
  RunSpec network_run = *spec;
  std::string checkpoint = options.checkpoint;
  std::string which;
  if (spec->policies_size() > 0) {
    // Where the checkpoint is, as the run lays them out: <run_dir>,
    // <run_dir>/checkpoints[/ckpt-N] (the first policy's) or
    // <run_dir>/policies/<name>[/checkpoints[/ckpt-N]] (another's).
    std::filesystem::path given =
        std::filesystem::path(checkpoint).lexically_normal();
    if (given.has_parent_path() && given.filename().empty()) {
      given = given.parent_path();  // a trailing '/'
    }
    std::filesystem::path run_dir = given;
    std::string ckpt_name;  // ckpt-N, or empty: the newest
    if (run_dir.parent_path().filename() == "checkpoints") {
      ckpt_name = run_dir.filename().string();
      run_dir = run_dir.parent_path();
    }
    if (run_dir.filename() == "checkpoints") run_dir = run_dir.parent_path();
    std::string named_in_path;
    if (run_dir.parent_path().filename() == "policies") {
      named_in_path = run_dir.filename().string();
      run_dir = run_dir.parent_path().parent_path();
    }
    std::string name = options.policy_name;
    if (name.empty()) name = named_in_path;
    if (!named_in_path.empty() && named_in_path != name) {
      return bad(absl::StrCat("--checkpoint: ", options.checkpoint,
                              " holds policy ", named_in_path,
                              "'s checkpoints, not policy ", name, "'s"));
    }
    int index = name.empty() ? 0 : -1;
    std::vector<std::string> names;
    for (int i = 0; i < spec->policies_size(); ++i) {
      names.push_back(spec->policies(i).name());
      if (names.back() == name) index = i;
    }
    if (index < 0) {
      return bad(absl::StrCat(
          options.policy_name.empty() ? "--checkpoint: " : "--policy_name: ",
          options.run_file, " has no policy \"", name,
          "\" (its policies: ", absl::StrJoin(names, ", "), ")"));
    }
    network_run = NamedPolicyRun(*spec, index);
    which = absl::StrCat("policy ", names[index], " of ");
    // The first policy's checkpoints are the run's own; another's lie
    // beside them under policies/<name>, numbered alike.
    std::filesystem::path root =
        index == 0 ? run_dir : run_dir / "policies" / names[index];
    if (!std::filesystem::is_directory(root / "checkpoints")) {
      return bad(absl::StrCat("--checkpoint: ", options.checkpoint,
                              " holds no checkpoints of policy ", names[index],
                              " (looked in ", (root / "checkpoints").string(),
                              ")"));
    }
    checkpoint = ckpt_name.empty()
                     ? root.string()
                     : (root / "checkpoints" / ckpt_name).string();
  } else if (!options.policy_name.empty()) {
    return bad(absl::StrCat("--policy_name: ", options.run_file,
                            " has no policies: block (its one policy is "
                            "exported without --policy_name)"));
  }
  absl::StatusOr<ActorCritic> policy =
      CreateActorCritic(RunNetworkConfig(network_run));
  if (!policy.ok()) return PrintLocalRunError(policy.status(), kExitBadInput);
  for (const std::string& root : {checkpoint + "/checkpoints", checkpoint}) {
    auto latest = LatestCheckpoint(root);
    if (latest.ok()) {
      checkpoint = *latest;
      break;
    }
  }
  if (absl::Status read = ReadCheckpoint(checkpoint, *policy, nullptr, nullptr);
      !read.ok()) {
    return PrintLocalRunError(read, kExitFailed);
  }
  PolicyExportOptions export_options;
  export_options.sampled = options.sampled;
  const absl::Status written =
      options.format == "onnx"
          ? ExportOnnx(*policy, spec->env(), export_options, options.output)
          : ExportTorchScript(*policy, spec->env(), export_options,
                              options.output);
  if (!written.ok()) return PrintLocalRunError(written, kExitFailed);
  std::printf(
      "exported %s%s (%s, %s actions) to %s, its inputs and outputs in "
      "%s.json\n",
      which.c_str(), checkpoint.c_str(), options.format.c_str(),
      options.sampled ? "sampled" : "deterministic", options.output.c_str(),
      options.output.c_str());
  return kExitDone;
}

bool ParseLocalRunMode(absl::string_view word, LocalRunOptions::Mode* mode) {
  if (word == "train") {
    *mode = LocalRunOptions::Mode::kTrain;
  } else if (word == "eval") {
    *mode = LocalRunOptions::Mode::kEvaluate;
  } else {
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<LocalRun>> LocalRun::Create(
    const LocalRunOptions& options) {
  if (options.run_file.empty()) {
    return absl::InvalidArgumentError("a run file is required (--run)");
  }
  if (options.episodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("episodes must be >= 1 (got ", options.episodes, ")"));
  }
  if (!options.policy_file.empty() &&
      options.mode != LocalRunOptions::Mode::kEvaluate) {
    return absl::InvalidArgumentError("--policy: for eval only");
  }
  if (!options.policy_file.empty() && !options.checkpoint.empty()) {
    return absl::InvalidArgumentError(
        "--policy and --checkpoint: eval plays one of them; give one");
  }
  torch::set_num_threads(std::max(1, options.torch_threads));
  ASSIGN_OR_RETURN(RunSpec spec, LoadRunSpecFile(options.run_file));
  if (options.seed.has_value()) spec.set_seed(*options.seed);
  // The coordinator's admission, and this machine's memory for the actor
  // and learner that share this process: a run that cannot fit is bad
  // input, not an abort at the first allocation.
  // The coordinator's limits first: a file it refuses gets its words here.
  const RunFootprint need = EstimateRunFootprint(spec);
  absl::Status fits = CheckRunFootprint(spec, need, DefaultFootprintLimits());
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (fits.ok() && memory > 0 &&
      need.actor_bytes + need.learner_bytes > memory) {
    fits = absl::InvalidArgumentError(absl::StrCat(
        "envs_per_actor, segment_length, policy.hidden_sizes: the actor and "
        "learner need about ",
        FormatBytes(need.actor_bytes + need.learner_bytes),
        " together, over this machine's ", FormatBytes(memory), " of memory"));
  }
  if (!fits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.run_file, ": ", fits.message()));
  }
  LocalRunOptions resolved = options;
  if (resolved.run_dir.empty()) {
    resolved.run_dir =
        "runs/" + (spec.name().empty() ? spec.env().id() : spec.name());
  }
  TrainerOptions trainer_options;
  trainer_options.env_threads = resolved.env_threads;
  if (resolved.mode == LocalRunOptions::Mode::kTrain) {
    trainer_options.run_dir = resolved.run_dir;
  }
  ASSIGN_OR_RETURN(auto trainer, LocalTrainer::Create(spec, trainer_options));

  std::string checkpoint;
  std::unique_ptr<ExportedPolicy> exported;
  if (resolved.mode == LocalRunOptions::Mode::kEvaluate &&
      !resolved.policy_file.empty()) {
    ASSIGN_OR_RETURN(exported, ExportedPolicy::Load(resolved.policy_file));
    checkpoint = resolved.policy_file;
  } else if (resolved.mode == LocalRunOptions::Mode::kTrain) {
    const std::string root = resolved.run_dir + "/checkpoints";
    const bool any = LatestCheckpoint(root).ok();
    if (resolved.resume && any) {
      // The newest that reads: one a crash damaged is passed over.
      ASSIGN_OR_RETURN(checkpoint,
                       ReadNewestReadable(root, [&](const std::string& dir) {
                         return trainer->Restore(dir);
                       }));
    } else if (any && !resolved.resume) {
      // A fresh run's checkpoints would be pruned against the old ones
      // (the newest kept), and its matches file would replace theirs.
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume=false: ", root,
          " holds the checkpoints of an earlier run; give this run another "
          "--run_dir, or remove them first"));
    }
  } else {
    checkpoint =
        resolved.checkpoint.empty() ? resolved.run_dir : resolved.checkpoint;
    for (const std::string& root : {checkpoint + "/checkpoints", checkpoint}) {
      auto latest = LatestCheckpoint(root);
      if (latest.ok()) {
        checkpoint = *latest;
        break;
      }
    }
    RETURN_IF_ERROR(
        ReadCheckpoint(checkpoint, trainer->policy(), nullptr, nullptr));
  }
  return std::unique_ptr<LocalRun>(
      new LocalRun(resolved, spec, std::move(trainer), std::move(checkpoint),
                   std::move(exported)));
}

LocalRun::LocalRun(const LocalRunOptions& options, const RunSpec& spec,
                   std::unique_ptr<LocalTrainer> trainer,
                   std::string checkpoint,
                   std::unique_ptr<ExportedPolicy> exported)
    : options_(options),
      spec_(spec),
      trainer_(std::move(trainer)),
      checkpoint_(std::move(checkpoint)),
      exported_(std::move(exported)) {}

absl::StatusOr<LocalRunOutcome> LocalRun::Wait() {
  return options_.mode == LocalRunOptions::Mode::kTrain ? Train() : Evaluate();
}

absl::StatusOr<LocalRunOutcome> LocalRun::Train() {
  if (!checkpoint_.empty()) {
    std::printf("resumed from %s at %lld steps\n", checkpoint_.c_str(),
                static_cast<long long>(trainer_->progress().env_steps));
    // Its state goes on under the run file as it is now: say what changed.
    for (const std::string& change : trainer_->run_file_changes()) {
      std::printf("run file changed since that checkpoint: %s\n",
                  change.c_str());
    }
  }
  std::printf(
      "training %s on %s: %d envs x %d steps per update, budget %lld steps\n",
      spec_.name().c_str(), spec_.env().id().c_str(), spec_.envs_per_actor(),
      spec_.segment_length(), static_cast<long long>(spec_.total_env_steps()));
  if (const std::vector<std::string> unused = ServiceOnlySettings(spec_);
      !unused.empty()) {
    // Not refused: the same run file trains through the service.
    std::printf(
        "rl_local trains with one actor and one learner in this process; "
        "the service's settings are not used here: %s\n",
        absl::StrJoin(unused, "; ").c_str());
  }
  std::fflush(stdout);
  const bool tty = isatty(fileno(stdout));
  double last_print = -1e9;
  const std::string profile_path =
      options_.profile_output.empty()
          ? (std::filesystem::path(options_.run_dir) / "profile.json").string()
          : options_.profile_output;
  if (options_.profile_steps > 0) {
    std::error_code ec;
    std::filesystem::create_directories(
        std::filesystem::path(profile_path).parent_path(), ec);
  }
  StepProfiler profiler(
      profile_path, options_.profile_steps,
      absl::StartsWith(spec_.resources().learner_device(), "cuda") ||
          absl::StartsWith(spec_.resources().actor_device(), "cuda"));
  RETURN_IF_ERROR(profiler.BeforeStep());
  absl::Status profile_status;
  auto result = trainer_->Train([&](const TrainerProgress& p) {
    if (profile_status.ok()) profile_status = profiler.BeforeStep();
    if (!options_.progress) return;
    if (tty) {
      std::printf("\r\033[K%s", ProgressLine(p).c_str());
      std::fflush(stdout);
    } else if (p.seconds - last_print >= 5.0) {
      std::printf("%s\n", ProgressLine(p).c_str());
      std::fflush(stdout);
      last_print = p.seconds;
    }
  });
  if (options_.progress && tty) std::printf("\n");
  std::fflush(stdout);
  if (profile_status.ok()) profile_status = profiler.Finish();
  if (!result.ok()) return result.status();
  RETURN_IF_ERROR(profile_status);
  PrintSummary(spec_, *result);
  return spec_.has_target_return() && !result->target_reached
             ? LocalRunOutcome::kTargetMissed
             : LocalRunOutcome::kDone;
}

absl::StatusOr<LocalRunOutcome> LocalRun::Evaluate() {
  absl::StatusOr<double> mean;
  std::vector<double> returns;  // each episode's
  if (exported_ != nullptr) {
    // The file's own actions (deterministic or sampled, as exported).
    // A recurrent file's state, zeroed where an episode starts.
    torch::Tensor state;
    mean = EvaluateActions(
        spec_,
        [&](const torch::Tensor& obs, const torch::Tensor& masks,
            const torch::Tensor& starts) -> absl::StatusOr<torch::Tensor> {
          if (exported_->state_size() > 0) {
            if (!state.defined()) {
              state = torch::zeros({obs.size(0), exported_->state_size()});
            }
            state = state * starts.eq(0).unsqueeze(1);
          }
          ASSIGN_OR_RETURN(auto out, exported_->Act(obs, masks, &state));
          return out.first;
        },
        options_.episodes, options_.eval_seed, &returns);
  } else {
    mean = EvaluatePolicy(spec_, trainer_->policy(), options_.episodes,
                          options_.eval_seed, &returns);
  }
  if (!mean.ok()) return mean.status();
  std::printf(
      "evaluated %s: mean return %.2f over %d episodes (%s, seed %llu)\n",
      checkpoint_.c_str(), *mean, options_.episodes,
      exported_ != nullptr ? "the exported file's actions"
                           : "deterministic actions",
      static_cast<unsigned long long>(options_.eval_seed));
  // A game's scores (+1, 0, -1): how often each.
  if (const std::string outcomes = DescribeGameOutcomes(returns);
      !outcomes.empty()) {
    std::printf("games: %s\n", outcomes.c_str());
  }
  return LocalRunOutcome::kDone;
}

int PrintLocalRunError(const absl::Status& status, int exit_code) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
  return exit_code;
}

}  // namespace rl
