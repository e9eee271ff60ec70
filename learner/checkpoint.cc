#include "learner/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
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
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && IsComplete(entry.path())) {
      found.push_back(entry.path());
    }
  }
  // Zero-padded counters: lexicographic order is numeric order.
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpoint(const std::string& root,
                                            int64_t counter,
                                            ActorCritic& policy,
                                            torch::optim::Optimizer& optimizer,
                                            const TensorMap& extra, int keep) {
  const fs::path final_dir =
      fs::path(root) / absl::StrFormat("%s%012d", kPrefix, counter);
  // Unique per process, so that a writer never removes another's work.
  const fs::path tmp_dir =
      fs::path(root) /
      absl::StrFormat(".tmp-%s%012d-%d", kPrefix, counter, getpid());
  std::error_code ec;
  fs::create_directories(root, ec);
  fs::remove_all(tmp_dir, ec);
  if (!fs::create_directories(tmp_dir, ec)) {
    return absl::InternalError(
        absl::StrCat("cannot create ", tmp_dir.string(), ": ", ec.message()));
  }
  const absl::Status written = CatchTorchErrors("writing checkpoint", [&] {
    torch::serialize::OutputArchive model;
    policy->save(model);
    model.save_to((tmp_dir / "policy.pt").string());
    torch::serialize::OutputArchive opt;
    optimizer.save(opt);
    opt.save_to((tmp_dir / "optimizer.pt").string());
    torch::serialize::OutputArchive state;
    for (const auto& [name, tensor] : extra) state.write(name, tensor);
    state.save_to((tmp_dir / "state.pt").string());
  });
  if (!written.ok()) {
    fs::remove_all(tmp_dir, ec);
    return written;
  }
  {
    std::ofstream marker(tmp_dir / kComplete);
    marker << counter << "\n";
    if (!marker) return absl::InternalError("cannot write COMPLETE marker");
  }
  fs::remove_all(final_dir, ec);
  fs::rename(tmp_dir, final_dir, ec);
  if (ec && IsComplete(final_dir)) {
    // Another writer (a learner being replaced) completed this checkpoint
    // between our remove and rename; its copy is as good as ours.
    fs::remove_all(tmp_dir, ec);
    ec.clear();
  }
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot rename checkpoint to ",
                                            final_dir.string(), ": ",
                                            ec.message()));
  }
  std::vector<fs::path> all = CompleteCheckpoints(root);
  for (size_t i = 0; i + std::max(keep, 1) < all.size(); ++i) {
    fs::remove_all(all[i], ec);
  }
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

// Loads the policy, the optimizer (may be null) and `extra` (may be null)
// from the archives `open(part, archive)` fills, for the parts "policy",
// "optimizer" and "state". `what` names the source in errors.
absl::Status LoadTrainingState(
    const std::function<void(const char*, torch::serialize::InputArchive&)>&
        open,
    const std::string& what, ActorCritic& policy,
    torch::optim::Optimizer* optimizer, TensorMap* extra) {
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
        if (optimizer != nullptr) {
          torch::serialize::InputArchive opt;
          open("optimizer", opt);
          optimizer->load(opt);
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

absl::Status ReadCheckpoint(const std::string& dir, ActorCritic& policy,
                            torch::optim::Optimizer* optimizer,
                            TensorMap* extra) {
  if (!IsComplete(dir)) {
    return absl::NotFoundError(absl::StrCat(
        dir, " is not a complete checkpoint (no COMPLETE marker)"));
  }
  return LoadTrainingState(
      [&](const char* part, torch::serialize::InputArchive& archive) {
        archive.load_from((fs::path(dir) / absl::StrCat(part, ".pt")).string());
      },
      absl::StrCat("checkpoint ", dir), policy, optimizer, extra);
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
        all.load_from(in);
      },
      absl::StatusCode::kInvalidArgument));
  return LoadTrainingState(
      [&](const char* part, torch::serialize::InputArchive& archive) {
        all.read(part, archive);
      },
      "the training state", policy, optimizer, extra);
}

}  // namespace rl
