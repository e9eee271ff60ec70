#include "learner/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/stat.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/env_registry.h"
#include "policy/torch_status.h"

namespace rl {
namespace fs = std::filesystem;
namespace {

constexpr char kPrefix[] = "ckpt-";
constexpr char kComplete[] = "COMPLETE";

bool IsComplete(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kComplete, ec);
}

std::vector<fs::path> CompleteCheckpoints(const std::string& root) {
  std::vector<fs::path> found;
  std::error_code ec;
  // increment(ec): a directory that fails mid-listing is not an exception.
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && IsComplete(it->path())) {
      found.push_back(it->path());
    }
  }
  // Zero-padded counters: lexicographic order is numeric order.
  std::sort(found.begin(), found.end());
  return found;
}

// A full disk is RESOURCE_EXHAUSTED, as is a file-size limit (EFBIG); other
// errors keep errno's canonical code.
absl::Status FileError(int error, absl::string_view what,
                       const fs::path& path) {
  const absl::StatusCode code = error == EFBIG
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::ErrnoToStatusCode(error);
  return absl::Status(code,
                      absl::StrCat("cannot ", what, " ", path.string(), ": ",
                                   std::generic_category().message(error)));
}

absl::Status FileError(const std::error_code& ec, absl::string_view what,
                       const fs::path& path) {
  return FileError(ec.value(), what, path);
}

// Writes `bytes` to a new file `path` and syncs it. LibTorch's own file
// writer throws from its destructor when a write fails (a full disk), which
// terminates the process; these calls return their errors instead.
absl::Status WriteFileSynced(const fs::path& path, absl::string_view bytes) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return FileError(errno, "create", path);
  absl::Status status;
  size_t written = 0;
  while (status.ok() && written < bytes.size()) {
    const ssize_t n =
        ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = FileError(n < 0 ? errno : ENOSPC, "write", path);
    } else {
      written += static_cast<size_t>(n);
    }
  }
  if (status.ok() && ::fsync(fd) != 0) status = FileError(errno, "sync", path);
  if (::close(fd) != 0 && status.ok()) {
    status = FileError(errno, "close", path);
  }
  return status;
}

// Makes the entries of `dir` (a rename, new files) durable.
absl::Status SyncDirectory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return FileError(errno, "open", dir);
  absl::Status status;
  // EINVAL: a file system that cannot sync directories (nothing to do).
  if (::fsync(fd) != 0 && errno != EINVAL) {
    status = FileError(errno, "sync", dir);
  }
  ::close(fd);
  return status;
}

struct CheckpointBytes {
  std::string policy, optimizer, state;
};

std::string SaveToString(torch::serialize::OutputArchive& archive) {
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

std::string HostName() {
  char host[256] = "";
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown-host";
  return host;
}

// Where checkpoint `counter` is written before it is complete: unique per
// process across the hosts that share `root` (a shared file system).
fs::path TemporaryDir(const std::string& root, int64_t counter) {
  return fs::path(root) / absl::StrFormat(".tmp-%s-%s-%d",
                                          CheckpointName(counter), HostName(),
                                          getpid());
}

// Removes the temporary directories that writers on this host left when
// they died mid-write (killed, crashed): those whose name holds this host
// and a process that no longer exists (or this one's pid: a restarted
// container's process often has its predecessor's), untouched for
// kLeftAfter. Another host's stay, as do a live writer's, and one written
// in the last kLeftAfter (a writer in another pid namespace that shares
// the host's name and the root).
// A name without the host (".tmp-ckpt-<12 digits>-<pid>", written before
// names held it) may be any host's, so its pid says nothing here: it goes
// once untouched for kOldFormatLeftAfter, far longer than any write.
constexpr absl::Duration kLeftAfter = absl::Minutes(10);
constexpr absl::Duration kOldFormatLeftAfter = absl::Hours(24);

void RemoveDeadWritersTemporaries(const std::string& root) {
  const std::string prefix = absl::StrCat(".tmp-", kPrefix);
  const std::string host = HostName();
  std::vector<fs::path> dead;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    // ".tmp-ckpt-<12 digits>-<host>-<pid>"
    const size_t host_at = prefix.size() + 13;
    const size_t pid_at = name.rfind('-');
    int pid = 0;
    struct stat info {};
    if (pid_at + 1 == host_at && absl::SimpleAtoi(name.substr(host_at), &pid)) {
      if (::stat(it->path().c_str(), &info) == 0 &&
          absl::Now() - absl::FromTimeT(info.st_mtime) >= kOldFormatLeftAfter) {
        dead.push_back(it->path());
      }
      continue;
    }
    if (pid_at == std::string::npos || pid_at <= host_at ||
        name.compare(host_at, pid_at - host_at, host) != 0 ||
        pid_at - host_at != host.size() ||
        !absl::SimpleAtoi(name.substr(pid_at + 1), &pid) || pid <= 0) {
      continue;
    }
    if (::stat(it->path().c_str(), &info) != 0 ||
        absl::Now() - absl::FromTimeT(info.st_mtime) < kLeftAfter) {
      continue;
    }
    // Our own pid: not ours now (this process writes one at a time, and
    // has finished), a predecessor's.
    if (pid == getpid() || (::kill(pid, 0) != 0 && errno == ESRCH)) {
      dead.push_back(it->path());
    }
  }
  for (const fs::path& path : dead) {
    fs::remove_all(path, ec);
    RL_LOG_WARNING("removed {}, left by a writer that died{}", path.string(),
                   ec ? absl::StrCat(" (failed: ", ec.message(), ")") : "");
  }
}

}  // namespace

std::string CheckpointName(int64_t counter) {
  return absl::StrFormat("%s%012d", kPrefix, counter);
}

std::optional<int64_t> CheckpointCounter(const std::string& path) {
  fs::path dir = fs::path(path).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "ckpt-N/"
  const std::string name = dir.filename().string();
  int64_t counter = 0;
  if (!absl::StartsWith(name, kPrefix) ||
      !absl::SimpleAtoi(name.substr(sizeof(kPrefix) - 1), &counter) ||
      counter < 0) {
    return std::nullopt;
  }
  return counter;
}

absl::StatusOr<std::set<int64_t>> CheckpointCounters(const std::string& root) {
  std::set<int64_t> counters;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (std::optional<int64_t> counter =
            CheckpointCounter(it->path().filename().string())) {
      counters.insert(*counter);
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("listing ", root, ": ", ec.message()));
  }
  return counters;
}

absl::Status PruneCheckpoints(const std::string& root,
                              const std::set<int64_t>& keep) {
  std::vector<fs::path> gone;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::optional<int64_t> counter =
        CheckpointCounter(it->path().filename().string());
    if (counter.has_value() && keep.count(*counter) == 0) {
      gone.push_back(it->path());
    }
  }
  for (const fs::path& path : gone) {
    if (ec) break;
    fs::remove_all(path, ec);
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("pruning ", root, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& root,
                                            int64_t counter,
                                            ActorCritic& policy,
                                            torch::optim::Optimizer& optimizer,
                                            const TensorMap& extra, int keep) {
  // In memory first, archives and their writers destroyed inside the
  // catch: nothing of LibTorch's touches the disk.
  ASSIGN_OR_RETURN(const CheckpointBytes bytes,
                   CatchTorchErrors("serialising checkpoint", [&] {
                     CheckpointBytes out;
                     torch::serialize::OutputArchive model;
                     policy->save(model);
                     out.policy = SaveToString(model);
                     torch::serialize::OutputArchive opt;
                     optimizer.save(opt);
                     out.optimizer = SaveToString(opt);
                     torch::serialize::OutputArchive state;
                     for (const auto& [name, tensor] : extra)
                       state.write(name, tensor);
                     out.state = SaveToString(state);
                     return out;
                   }));

  const fs::path final_dir = fs::path(root) / CheckpointName(counter);
  // Unique per process, so that a writer never removes another's work.
  const fs::path tmp_dir = TemporaryDir(root, counter);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return FileError(ec, "create checkpoint directory", root);
  fs::remove_all(tmp_dir, ec);
  fs::create_directory(tmp_dir, ec);
  if (ec) return FileError(ec, "create", tmp_dir);
  // Every failure from here on leaves no temporary directory behind.
  absl::Cleanup remove_tmp = [&tmp_dir] {
    std::error_code ignored;
    fs::remove_all(tmp_dir, ignored);
  };
  RETURN_IF_ERROR(WriteFileSynced(tmp_dir / "policy.pt", bytes.policy));
  RETURN_IF_ERROR(WriteFileSynced(tmp_dir / "optimizer.pt", bytes.optimizer));
  RETURN_IF_ERROR(WriteFileSynced(tmp_dir / "state.pt", bytes.state));
  RETURN_IF_ERROR(
      WriteFileSynced(tmp_dir / kComplete, absl::StrCat(counter, "\n")));
  RETURN_IF_ERROR(SyncDirectory(tmp_dir));
  // A checkpoint of this number already there (the same update written
  // again: periodic, then final; a finished run started again) is swapped
  // with the new one in one step, and then removed from where the new one
  // was: a crash leaves one complete copy or the other, never one that
  // still says COMPLETE with its files half removed.
  if (::renameat2(AT_FDCWD, tmp_dir.c_str(), AT_FDCWD, final_dir.c_str(),
                  RENAME_EXCHANGE) != 0) {
    if (errno != ENOENT) {
      // No exchange on this file system: the old copy stops being
      // complete before its files go.
      fs::remove(final_dir / kComplete, ec);
      if (!ec) (void)SyncDirectory(final_dir);
      fs::remove_all(final_dir, ec);
    }
    fs::rename(tmp_dir, final_dir, ec);
    if (ec && IsComplete(final_dir)) {
      // Another writer (a learner being replaced) completed this
      // checkpoint between our check and rename; its copy is as good as
      // ours.
      ec.clear();
    }
    if (ec) return FileError(ec, "rename checkpoint to", final_dir);
  }
  std::move(remove_tmp).Cancel();
  fs::remove_all(tmp_dir, ec);  // the old copy, or the other writer's
  // The rename is durable once the root is synced; a failure here leaves a
  // complete checkpoint that a crash might lose, not a partial one.
  RETURN_IF_ERROR(SyncDirectory(root));
  std::vector<fs::path> all = CompleteCheckpoints(root);
  for (size_t i = 0; i + std::max(keep, 1) < all.size(); ++i) {
    fs::remove_all(all[i], ec);
  }
  RemoveDeadWritersTemporaries(root);
  return final_dir.string();
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& root) {
  const std::vector<fs::path> all = CompleteCheckpoints(root);
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no complete checkpoint under ", root));
  }
  return all.back().string();
}

namespace {

// Adam's moments beside their parameters (a checkpoint's load onto the CPU).
void MoveOptimizerState(torch::optim::Optimizer& optimizer,
                        torch::Device device) {
  for (auto& [key, state] : optimizer.state()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state.get())) {
      adam->exp_avg(adam->exp_avg().to(device));
      adam->exp_avg_sq(adam->exp_avg_sq().to(device));
      if (adam->max_exp_avg_sq().defined()) {
        adam->max_exp_avg_sq(adam->max_exp_avg_sq().to(device));
      }
    }
  }
}

// Loads the policy, the optimizer (may be null) and `extra` (may be null)
// from the archives `open(part, archive)` fills, for the parts "policy",
// "optimizer" and "state". `what` names the source in errors.
absl::Status LoadTrainingState(
    const std::function<void(const char*, torch::serialize::InputArchive&)>&
        open,
    const std::string& what, ActorCritic& policy,
    torch::optim::Optimizer* optimizer, TensorMap* extra) {
  // Archives load onto the CPU (map location), whatever device wrote them,
  // and the state then moves to the policy's device: a checkpoint written
  // on a GPU resumes on a CPU-only machine and back.
  const torch::Device device = policy->device();
  // Module::load replaces tensors whatever their shape; check it ourselves.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& item : policy->named_parameters()) {
    shapes.emplace_back(item.key(), item.value().sizes().vec());
  }
  // A source that does not load is its fault, not ours.
  return CatchTorchErrors(
      absl::StrCat(what, " does not fit this run"),
      [&]() -> absl::Status {
        torch::serialize::InputArchive model;
        open("policy", model);
        policy->load(model);
        const auto loaded = policy->named_parameters();
        for (const auto& [name, shape] : shapes) {
          if (loaded[name].sizes().vec() != shape) {
            return absl::InvalidArgumentError(absl::StrCat(
                what, " does not fit this run: parameter ", name, " has shape ",
                c10::str(loaded[name].sizes()), ", the policy has ",
                c10::str(c10::IntArrayRef(shape))));
          }
        }
        policy->to(device);
        if (optimizer != nullptr) {
          torch::serialize::InputArchive opt;
          open("optimizer", opt);
          optimizer->load(opt);
          MoveOptimizerState(*optimizer, device);
        }
        if (extra != nullptr) {
          torch::serialize::InputArchive state;
          open("state", state);
          for (const std::string& key : state.keys()) {
            torch::Tensor t;
            state.read(key, t);
            (*extra)[key] = t;
          }
        }
        return absl::OkStatus();
      },
      absl::StatusCode::kInvalidArgument);
}

}  // namespace

namespace {

// Checkpoint `dir`'s archive `part` ("policy", "optimizer", "state"), onto
// the CPU; throws as LibTorch does for a file that does not read.
void LoadPart(const fs::path& dir, const char* part,
              torch::serialize::InputArchive& archive) {
  archive.load_from((dir / absl::StrCat(part, ".pt")).string(),
                    torch::Device(torch::kCPU));
}

}  // namespace

absl::Status ReadCheckpoint(const std::string& dir, ActorCritic& policy,
                            torch::optim::Optimizer* optimizer,
                            TensorMap* extra) {
  if (!IsComplete(dir)) {
    return absl::NotFoundError(absl::StrCat(
        dir, " is not a complete checkpoint (no COMPLETE marker)"));
  }
  // A part that does not read as an archive is the checkpoint's damage,
  // not a run that does not fit it.
  std::string damaged;
  const absl::Status loaded = LoadTrainingState(
      [&](const char* part, torch::serialize::InputArchive& archive) {
        try {
          LoadPart(dir, part, archive);
        } catch (const std::exception& e) {
          std::string what = e.what();
          what = what.substr(0, what.find('\n'));  // LibTorch's first line
          damaged = absl::StrCat(part, ".pt does not read: ", what);
          throw;
        }
      },
      absl::StrCat("checkpoint ", dir), policy, optimizer, extra);
  if (!loaded.ok() && !damaged.empty()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", dir, " is damaged: ", damaged));
  }
  return loaded;
}

namespace {

// Whether checkpoint `dir`'s three archives load (nothing applied).
bool FilesRead(const fs::path& dir) {
  try {
    for (const char* part : {"policy", "optimizer", "state"}) {
      torch::serialize::InputArchive archive;
      LoadPart(dir, part, archive);
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

absl::StatusOr<std::string> ReadNewestReadable(
    const std::string& root,
    const std::function<absl::Status(const std::string&)>& read) {
  std::vector<fs::path> all = CompleteCheckpoints(root);
  if (all.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no complete checkpoint under ", root));
  }
  absl::Status newest;
  std::vector<fs::path> damaged;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const absl::Status status = read(it->string());
    if (status.ok()) {
      // Set aside (renamed "damaged-ckpt-N"), so that neither the next
      // resume nor the pruning of the checkpoints to come counts them: each
      // whose own files still do not read (not one a passing fault or a
      // writer finishing it made fail, nor a run checkpoint that reads
      // when a policy's beside it did not).
      for (const fs::path& dir : damaged) {
        if (FilesRead(dir)) {
          RL_LOG_WARNING("{} reads now: left in place", dir.string());
          continue;
        }
        const fs::path aside =
            dir.parent_path() / ("damaged-" + dir.filename().string());
        std::error_code ec;
        fs::remove_all(aside, ec);
        fs::rename(dir, aside, ec);
        RL_LOG_WARNING("{} set aside as {}{}", dir.string(), aside.string(),
                       ec ? absl::StrCat(" failed: ", ec.message()) : "");
      }
      return it->string();
    }
    if (status.code() != absl::StatusCode::kDataLoss) return status;
    if (newest.ok()) newest = status;
    damaged.push_back(*it);
    RL_LOG_WARNING("{}; trying the checkpoint before it",
                   std::string(status.message()));
  }
  return newest;  // every one damaged: all left where they are
}

absl::StatusOr<std::string> EncodeTrainingState(
    ActorCritic& policy, torch::optim::Optimizer& optimizer,
    const TensorMap& extra) {
  return CatchTorchErrors("encoding the training state", [&] {
    torch::serialize::OutputArchive all, model, opt, state;
    policy->save(model);
    optimizer.save(opt);
    for (const auto& [name, tensor] : extra) state.write(name, tensor);
    all.write("policy", model);
    all.write("optimizer", opt);
    all.write("state", state);
    std::ostringstream out;
    all.save_to(out);
    return out.str();
  });
}

absl::Status DecodeTrainingState(const std::string& bytes, ActorCritic& policy,
                                 torch::optim::Optimizer* optimizer,
                                 TensorMap* extra) {
  torch::serialize::InputArchive all;
  RETURN_IF_ERROR(CatchTorchErrors(
      "the training state does not load",
      [&] {
        std::istringstream in(bytes);
        all.load_from(in, torch::Device(torch::kCPU));
      },
      absl::StatusCode::kInvalidArgument));
  return LoadTrainingState(
      [&](const char* part, torch::serialize::InputArchive& archive) {
        all.read(part, archive);
      },
      "the training state", policy, optimizer, extra);
}

absl::StatusOr<ActorCritic> ReadRunPolicy(const RunSpec& spec,
                                          const std::string& dir) {
  RETURN_IF_ERROR(CheckResolvedEnvSpec(spec.env()));
  ASSIGN_OR_RETURN(ActorCritic policy,
                   CreateActorCritic(RunNetworkConfig(spec)));
  RETURN_IF_ERROR(ReadCheckpoint(dir, policy, nullptr, nullptr));
  return policy;
}

}  // namespace rl
