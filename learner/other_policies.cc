#include "learner/other_policies.h"

#include <filesystem>
#include <future>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/checkpoint.h"
#include "learner/device_self_check.h"
#include "learner/gang_sync.h"
#include "learner/update_metrics.h"
#include "policy/policy_codec.h"
#include "policy/tensor_bytes.h"
#include "policy/torch_status.h"
#include "runspec/named_policies.h"

namespace rl {
namespace {

// The key of a policy's shuffling stream in its checkpoint (as rl_local
// writes it).
constexpr char kGeneratorKey[] = "policy.updater_generator";

torch::Tensor RowsTensor(const RunSpec& spec, int index, int64_t rows) {
  return torch::tensor(RowsOfPolicy(spec, index, rows), torch::kInt64);
}

std::string Named(const OtherPolicies::Policy& p) {
  return absl::StrCat("policy ", p.name);
}

}  // namespace

absl::Status WritePolicyCheckpoint(const std::string& run_dir,
                                   const std::string& name, int64_t updates,
                                   ActorCritic& policy, PpoUpdater& updater,
                                   int keep) {
  TensorMap own;
  own[kGeneratorKey] = BytesTensor(GeneratorStateBytes(updater.generator()));
  absl::StatusOr<std::string> written =
      WriteCheckpoint(PolicyCheckpointRoot(run_dir, name), updates, policy,
                      updater.optimizer(), own, keep);
  return Prefixed(written.status(), absl::StrCat("policy ", name));
}

absl::Status ReadPolicyCheckpoint(const std::string& run_checkpoint,
                                  const std::string& name, ActorCritic& policy,
                                  PpoUpdater& updater) {
  std::filesystem::path ckpt =
      std::filesystem::path(run_checkpoint).lexically_normal();
  if (!ckpt.has_filename()) ckpt = ckpt.parent_path();  // "ckpt-N/"
  const std::string run_dir = ckpt.parent_path().parent_path().string();
  const std::string dir =
      (std::filesystem::path(PolicyCheckpointRoot(run_dir, name)) /
       ckpt.filename())
          .string();
  TensorMap own;
  const absl::Status read =
      ReadCheckpoint(dir, policy, &updater.optimizer(), &own);
  if (!read.ok()) {
    return Prefixed(read, absl::StrCat("policy ", name, "'s checkpoint beside ",
                                       run_checkpoint));
  }
  auto generator = own.find(kGeneratorKey);
  if (generator == own.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", dir, " has no ", kGeneratorKey));
  }
  return SetGeneratorState(TensorBytes(generator->second), updater.generator(),
                           dir);
}

absl::StatusOr<OtherPolicies::Policy> OtherPolicies::CreatePolicy(
    const RunSpec& spec, int index, torch::Device device,
    Collective* collective, int max_nonfinite_updates) {
  const RunSpec own = NamedPolicyRun(spec, index);
  const ActorCriticConfig config = RunNetworkConfig(own);
  Policy p;
  p.name = spec.policies(index).name();
  p.index = index;
  RETURN_IF_ERROR(
      CheckDeviceOnFirstUse(config, own.ppo(), own.execution(), device));
  ASSIGN_OR_RETURN(p.policy,
                   CreateSeededActorCritic(config, spec.seed() + index));
  RETURN_IF_ERROR(
      CatchTorchErrors(absl::StrCat(Named(p), ": moving it to ", device.str()),
                       [&] { p.policy->to(device); }));
  p.updater =
      std::make_unique<PpoUpdater>(p.policy, own.ppo(), own.total_env_steps(),
                                   spec.seed() + index, own.execution());
  p.updater->set_collective(collective);
  p.updater->set_max_nonfinite_updates(max_nonfinite_updates);
  return p;
}

absl::Status OtherPolicies::UpdatePolicy(Policy& p, const Rollout& rows,
                                         int64_t env_steps_before,
                                         int64_t update) {
  const std::string where = absl::StrCat(
      Named(p), ": update ", update, " (after ", env_steps_before, " steps)");
  absl::StatusOr<UpdateStats> stats = p.updater->Update(rows, env_steps_before);
  if (!stats.ok()) return Prefixed(stats.status(), where);
  p.last_update = *stats;
  if (stats->nonfinite_minibatches > 0) {
    RL_LOG_WARNING(
        "{}: the loss or gradient was not finite in {} minibatches; their "
        "gradients were not applied ({} such updates in a row)",
        where, stats->nonfinite_minibatches,
        stats->consecutive_nonfinite_updates);
  }
  return absl::OkStatus();
}

absl::StatusOr<OtherPolicies> OtherPolicies::Create(const RunSpec& spec,
                                                    torch::Device device,
                                                    Collective* collective,
                                                    int max_nonfinite_updates,
                                                    const Remotes& remotes) {
  OtherPolicies out;
  if (spec.policies_size() == 0) return out;
  const int others = spec.policies_size() - 1;
  if (!remotes.addresses.empty() &&
      static_cast<int>(remotes.addresses.size()) != others) {
    return absl::InvalidArgumentError(absl::StrCat(
        remotes.addresses.size(), " learners of their own for the run's ",
        others, " policies after its first"));
  }
  out.spec_ = spec;
  for (int i = 1; i < spec.policies_size(); ++i) {
    // A policy trained elsewhere keeps a copy here, made as its learner
    // makes it (the same seed: the same first weights), for publishing; in
    // a gang, its own gang all-reduces its gradients, not this one.
    ASSIGN_OR_RETURN(
        Policy p, CreatePolicy(spec, i, device,
                               remotes.addresses.empty() ? collective : nullptr,
                               max_nonfinite_updates));
    if (!remotes.addresses.empty()) {
      PolicyLearnerClientOptions client = remotes.client;
      client.address = remotes.addresses[i - 1];
      client.policy = p.name;
      p.remote = std::make_shared<PolicyLearnerClient>(std::move(client));
    }
    out.policies_.push_back(std::move(p));
  }
  return out;
}

absl::Status OtherPolicies::UpdateRemote(Policy& p, const Rollout& rows,
                                         int64_t env_steps_before,
                                         int64_t update) {
  ASSIGN_OR_RETURN(
      UpdatePolicyResponse response,
      p.remote->Update(rows, spec_.env(), update, env_steps_before));
  RETURN_IF_ERROR(Take(p, response.parameters()));
  p.last_update = UpdateStatsOf(response.figures());
  return absl::OkStatus();
}

absl::Status OtherPolicies::Take(Policy& p,
                                 const NamedPolicyParameters& parameters) {
  if (parameters.name() != p.name) {
    return absl::InternalError(
        absl::StrCat(Named(p), ": its learner answered with policy \"",
                     parameters.name(), "\"'s weights"));
  }
  return Prefixed(
      DecodePolicyTensors(parameters.parameters(), "parameters", p.policy),
      absl::StrCat(Named(p), ": the weights its learner sent"));
}

absl::Status OtherPolicies::Update(const Rollout& rollout,
                                   int64_t env_steps_before, int64_t update,
                                   const ToDevice& to_device) {
  // Those trained elsewhere all at once, beside those trained here.
  std::vector<std::future<absl::Status>> remote;
  for (Policy& p : policies_) {
    if (p.remote == nullptr) continue;
    remote.push_back(std::async(std::launch::async, [&, this] {
      return UpdateRemote(
          p, rollout.Rows(RowsTensor(spec_, p.index, rollout.num_envs())),
          env_steps_before, update);
    }));
  }
  absl::Status status;
  for (Policy& p : policies_) {
    if (p.remote != nullptr) continue;
    absl::StatusOr<Rollout> rows =
        to_device(rollout.Rows(RowsTensor(spec_, p.index, rollout.num_envs())));
    if (!rows.ok()) {
      status = Prefixed(rows.status(),
                        absl::StrCat(Named(p), ": update ", update, " (after ",
                                     env_steps_before, " steps)"));
      break;
    }
    status = UpdatePolicy(p, *rows, env_steps_before, update);
    if (!status.ok()) break;
  }
  for (std::future<absl::Status>& done : remote) {
    const absl::Status s = done.get();
    if (status.ok()) status = s;
  }
  return status;
}

Rollout OtherPolicies::FirstRows(const Rollout& rollout) const {
  if (spec_.policies_size() == 0) return rollout;
  return rollout.Rows(RowsTensor(spec_, 0, rollout.num_envs()));
}

absl::Status OtherPolicies::CheckWeightsFinite(int64_t update) {
  for (Policy& p : policies_) {
    ASSIGN_OR_RETURN(const std::string where, FirstNonFiniteWeight(p.policy));
    if (where.empty()) continue;
    return absl::InternalError(
        absl::StrCat("after update ", update, " policy ", p.name,
                     "'s weights are not finite (NaN or inf in ", where,
                     "); they were not published or checkpointed. Lower its "
                     "ppo.learning_rate, or check the scale of the rewards"));
  }
  return absl::OkStatus();
}

void OtherPolicies::StopWaiting() {
  for (Policy& p : policies_) {
    if (p.remote != nullptr) p.remote->StopWaiting();
  }
}

absl::Status OtherPolicies::Encode(PolicyUpdate* update) {
  update->clear_policies();
  for (Policy& p : policies_) {
    NamedPolicyParameters* named = update->add_policies();
    named->set_name(p.name);
    RETURN_IF_ERROR(EncodePolicyTensors(p.policy, named->mutable_parameters()));
  }
  return absl::OkStatus();
}

absl::Status OtherPolicies::Write(const std::string& run_dir, int64_t updates) {
  for (Policy& p : policies_) {
    if (p.remote != nullptr) {
      RETURN_IF_ERROR(
          p.remote->Checkpoint(CheckpointPolicyRequest::WRITE, updates)
              .status());
      continue;
    }
    RETURN_IF_ERROR(WritePolicyCheckpoint(run_dir, p.name, updates, p.policy,
                                          *p.updater,
                                          std::numeric_limits<int>::max()));
  }
  return absl::OkStatus();
}

absl::Status OtherPolicies::Prune(const std::string& run_dir) {
  ASSIGN_OR_RETURN(
      const std::set<int64_t> kept,
      CheckpointCounters(
          (std::filesystem::path(run_dir) / "checkpoints").string()));
  for (const Policy& p : policies_) {
    if (p.remote != nullptr) {
      RETURN_IF_ERROR(
          p.remote
              ->Checkpoint(CheckpointPolicyRequest::PRUNE, /*updates=*/0,
                           std::vector<int64_t>(kept.begin(), kept.end()))
              .status());
    } else {
      RETURN_IF_ERROR(Prefixed(
          PruneCheckpoints(PolicyCheckpointRoot(run_dir, p.name), kept),
          Named(p)));
    }
  }
  return absl::OkStatus();
}

absl::Status OtherPolicies::Read(const std::string& run_checkpoint) {
  for (Policy& p : policies_) {
    if (p.remote != nullptr) {
      const std::optional<int64_t> counter = CheckpointCounter(run_checkpoint);
      if (!counter.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            run_checkpoint, ": not a checkpoint's directory (ckpt-N)"));
      }
      ASSIGN_OR_RETURN(CheckpointPolicyResponse read,
                       p.remote->Checkpoint(CheckpointPolicyRequest::READ,
                                            *counter, {}, run_checkpoint));
      RETURN_IF_ERROR(Take(p, read.parameters()));
      continue;
    }
    RETURN_IF_ERROR(
        ReadPolicyCheckpoint(run_checkpoint, p.name, p.policy, *p.updater));
  }
  return absl::OkStatus();
}

absl::Status OtherPolicies::BroadcastRankZeroState(Collective& collective,
                                                   Policy& p,
                                                   TensorMap* extra) {
  if (collective.rank() == 0) {
    (*extra)[kGeneratorKey] =
        BytesTensor(GeneratorStateBytes(p.updater->generator()));
  }
  return Prefixed(rl::ShareRankZeroState(collective, p.policy,
                                         p.updater->optimizer(), extra),
                  Named(p));
}

absl::Status OtherPolicies::TakeRankZeroStream(Policy& p,
                                               const TensorMap& extra) {
  auto generator = extra.find(kGeneratorKey);
  if (generator == extra.end()) {
    return absl::InternalError(
        absl::StrCat(Named(p), ": rank 0's state has no ", kGeneratorKey));
  }
  return SetGeneratorState(TensorBytes(generator->second),
                           p.updater->generator(),
                           absl::StrCat(Named(p), ": rank 0's state"));
}

absl::Status OtherPolicies::ShareRankZeroState(Collective& collective) {
  // Every policy's broadcasts first, then what can fail on one rank alone.
  std::vector<TensorMap> extras(policies_.size());
  for (size_t i = 0; i < policies_.size(); ++i) {
    RETURN_IF_ERROR(
        BroadcastRankZeroState(collective, policies_[i], &extras[i]));
  }
  for (size_t i = 0; i < policies_.size(); ++i) {
    RETURN_IF_ERROR(TakeRankZeroStream(policies_[i], extras[i]));
  }
  return absl::OkStatus();
}

bool OtherPolicies::remote() const {
  for (const Policy& p : policies_) {
    if (p.remote == nullptr) return false;
  }
  return !policies_.empty();
}

absl::Status OtherPolicies::CheckInSync(Collective& collective,
                                        int64_t updates) {
  for (Policy& p : policies_) {
    RETURN_IF_ERROR(
        rl::CheckInSync(collective, WeightsAndStatistics(p.policy),
                        absl::StrCat("after update ", updates, ", policy ",
                                     p.name, "'s weights")));
  }
  return absl::OkStatus();
}

void OtherPolicies::EmitUpdates(Emitter* emitter, int64_t step, double seconds,
                                int64_t updates, int grad_norm_interval) const {
  if (emitter == nullptr) return;
  for (const Policy& p : policies_) {
    EmitUpdateMetrics(emitter, step, p.last_update, seconds, updates,
                      grad_norm_interval, {{"policy", p.name}});
  }
}

}  // namespace rl
