#include "coordinator/local_workers.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/secrets.h"
#include "common/status.h"

namespace rl {

namespace {

// The first `gpus` GPUs this process may use: its CUDA_VISIBLE_DEVICES
// entries where it has one, else 0 to gpus - 1.
absl::StatusOr<std::vector<std::string>> GpuIds(int gpus) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> ids;
  if (visible != nullptr) {  // set, if empty: no GPU at all
    ids = absl::StrSplit(visible, ',', absl::SkipWhitespace());
    if (static_cast<int>(ids.size()) < gpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("--local_workers: gpus=", gpus,
                       ", but this coordinator's "
                       "CUDA_VISIBLE_DEVICES names ",
                       ids.size(), " (", visible, ")"));
    }
    ids.resize(gpus);
    return ids;
  }
  for (int i = 0; i < gpus; ++i) ids.push_back(absl::StrCat(i));
  return ids;
}

}  // namespace

absl::Status ParseLocalWorkers(const std::string& text,
                               LocalWorkerOptions* options) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, '=');
    int count;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &count) || count < 0 ||
        count > 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--local_workers: expected learners=N,actors=M[,gpus=G] with N, M, "
          "G in [0, 64] (got \"",
          part, "\")"));
    }
    if (kv[0] == "learners") {
      options->learners = count;
    } else if (kv[0] == "actors") {
      options->actors = count;
    } else if (kv[0] == "gpus") {
      ASSIGN_OR_RETURN(options->gpu_ids, GpuIds(count));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--local_workers: unknown kind \"", kv[0],
                       "\" (learners, actors, gpus)"));
    }
  }
  return absl::OkStatus();
}

LocalWorkerPool::LocalWorkerPool(const LocalWorkerOptions& options)
    : options_(options) {
  std::error_code ec;
  std::filesystem::create_directories(options.log_dir, ec);
  if (!options.telemetry_argv.empty()) {
    Child child;
    child.name = "local-telemetry";
    child.argv = options.telemetry_argv;
    child.next_start = absl::InfinitePast();
    children_.push_back(std::move(child));
  }
  auto add = [&](const std::string& binary, const std::string& name,
                 std::vector<std::string> extra, int index) {
    Child child;
    child.name = name;
    if (!options.gpu_ids.empty()) {
      child.env.push_back(
          absl::StrCat("CUDA_VISIBLE_DEVICES=",
                       options.gpu_ids[index % options.gpu_ids.size()]));
    }
    child.argv = {binary, "--coordinator=" + options.coordinator_address,
                  "--worker_name=" + name};
    child.argv.insert(child.argv.end(), options.worker_args.begin(),
                      options.worker_args.end());
    if (options.credential) {
      const std::string path = (std::filesystem::path(options.credential_dir) /
                                (name + ".credential"))
                                   .string();
      std::error_code ec;
      std::filesystem::create_directories(options.credential_dir, ec);
      ::chmod(options.credential_dir.c_str(), 0700);
      if (absl::Status written =
              WriteSecretFile(path, options.credential(name) + "\n");
          written.ok()) {
        child.argv.push_back("--worker_credential_file=" + path);
      } else {
        RL_LOG_WARNING("no credential for {}: {}", name, written.ToString());
      }
    }
    child.argv.insert(child.argv.end(), extra.begin(), extra.end());
    child.next_start = absl::InfinitePast();
    children_.push_back(std::move(child));
  };
  int index = 0;
  for (const std::string& name : LocalWorkerNames(options, LEARNER)) {
    add(options.learner_binary, name, {"--port=0"}, index++);
  }
  index = 0;
  for (const std::string& name : LocalWorkerNames(options, ACTOR)) {
    add(options.actor_binary, name, {}, index++);
  }
}

LocalWorkerPool::~LocalWorkerPool() { Shutdown(); }

std::vector<std::string> LocalWorkerNames(const LocalWorkerOptions& options,
                                          WorkerRole role) {
  std::vector<std::string> names;
  const bool learners = role == LEARNER;
  for (int i = 0; i < (learners ? options.learners : options.actors); ++i) {
    names.push_back(
        absl::StrCat(learners ? "local-learner-" : "local-actor-", i));
  }
  return names;
}

std::string DescribeExit(int code) {
  if (code > 128 && code < 128 + 65) {
    const int signal = code - 128;
    const char* name = sigabbrev_np(signal);
    return absl::StrCat("killed by ", name != nullptr ? "SIG" : "",
                        name != nullptr ? name : "signal", " (signal ", signal,
                        ")");
  }
  return absl::StrCat("exited with ", code);
}

void LocalWorkerPool::Supervise() {
  const absl::Time now = absl::Now();
  for (Child& child : children_) {
    if (child.process != nullptr) {
      if (child.process->running()) {
        // A child that has stayed up a while starts its backoff afresh.
        if (now - child.started > absl::Minutes(1)) {
          child.backoff = absl::Seconds(1);
        }
        continue;
      }
      const int code = child.process->Wait(absl::ZeroDuration()).value_or(-1);
      RL_LOG_WARNING("{} {}; restarting in {}", child.name, DescribeExit(code),
                     absl::FormatDuration(child.backoff));
      if (options_.on_exit) options_.on_exit(child.name, DescribeExit(code));
      child.process.reset();
      child.next_start = now + child.backoff;
      child.backoff = std::min(child.backoff * 2, absl::Seconds(30));
      ++restarts_;
      continue;
    }
    if (now < child.next_start) continue;
    child.process = std::make_unique<Subprocess>(
        child.argv,
        (std::filesystem::path(options_.log_dir) / (child.name + ".log"))
            .string(),
        /*die_with_parent=*/true, child.env);
    child.started = now;
    ++child.starts;
  }
}

void LocalWorkerPool::Shutdown(absl::Duration grace) {
  for (Child& child : children_) {
    if (child.process != nullptr) child.process->Signal(SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  for (Child& child : children_) {
    if (child.process == nullptr) continue;
    if (!child.process->Wait(
            std::max(deadline - absl::Now(), absl::ZeroDuration()))) {
      child.process->Signal(SIGKILL);
      child.process->Wait(absl::Seconds(5));
    }
    child.process.reset();
  }
  children_.clear();
}

}  // namespace rl
