#include "learner/ppo_updater.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "learner/gae.h"
#include "policy/torch_status.h"

namespace rl {

PpoUpdater::PpoUpdater(ActorCritic policy, const PPOConfig& config,
                       int64_t total_env_steps, uint64_t seed)
    : policy_(std::move(policy)),
      config_(config),
      total_env_steps_(std::max<int64_t>(1, total_env_steps)),
      optimizer_(std::make_unique<torch::optim::Adam>(
          policy_->parameters(),
          torch::optim::AdamOptions(config.learning_rate()).eps(1e-5))),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

absl::Status PpoUpdater::CheckRollout(const Rollout& r) const {
  if (config_.num_epochs() < 1 || config_.num_minibatches() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ppo.num_epochs (", config_.num_epochs(), ") and ppo.num_minibatches (",
        config_.num_minibatches(), ") must be >= 1"));
  }
  RETURN_IF_ERROR(
      CheckTensor(r.rewards, "rollout.rewards", torch::kFloat32, {-1, -1}));
  const int64_t T = r.num_steps(), E = r.num_envs();
  if (T * E < config_.num_minibatches()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rollout: ", T, " x ", E, " steps cannot make ppo.num_minibatches (",
        config_.num_minibatches(), ") minibatches"));
  }
  const ActorCriticConfig& c = policy_->config();
  RETURN_IF_ERROR(CheckTensor(r.observations, "rollout.observations",
                              torch::kFloat32, {T, E, c.observation_size}));
  if (policy_->discrete()) {
    RETURN_IF_ERROR(
        CheckTensor(r.actions, "rollout.actions", torch::kInt64, {T, E}));
  } else {
    RETURN_IF_ERROR(CheckTensor(r.actions, "rollout.actions", torch::kFloat32,
                                {T, E, c.action_size}));
  }
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"rollout.log_probs",
                                                     &r.log_probs},
        {"rollout.values", &r.values},
        {"rollout.truncated_values", &r.truncated_values}}) {
    RETURN_IF_ERROR(CheckTensor(*tensor, name, torch::kFloat32, {T, E}));
  }
  RETURN_IF_ERROR(
      CheckTensor(r.next_values, "rollout.next_values", torch::kFloat32, {E}));
  RETURN_IF_ERROR(
      CheckTensor(r.terminated, "rollout.terminated", torch::kUInt8, {T, E}));
  RETURN_IF_ERROR(
      CheckTensor(r.truncated, "rollout.truncated", torch::kUInt8, {T, E}));
  // GAE reads these through raw pointers.
  for (const auto& [name, tensor] :
       {std::pair<const char*, const torch::Tensor*>{"rollout.rewards",
                                                     &r.rewards},
        {"rollout.values", &r.values},
        {"rollout.next_values", &r.next_values},
        {"rollout.terminated", &r.terminated},
        {"rollout.truncated", &r.truncated},
        {"rollout.truncated_values", &r.truncated_values}}) {
    if (!tensor->is_cpu() || !tensor->is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be a contiguous CPU tensor"));
    }
  }
  const std::pair<const char*, const torch::Tensor*> floats[] = {
      {"rollout.observations", &r.observations},
      {"rollout.log_probs", &r.log_probs},
      {"rollout.values", &r.values},
      {"rollout.rewards", &r.rewards},
      {"rollout.truncated_values", &r.truncated_values},
      {"rollout.next_values", &r.next_values}};
  // One read-back for all the value checks; the tensor at fault is looked
  // for only when one failed.
  ASSIGN_OR_RETURN(
      const bool valid, CatchTorchErrors("checking the rollout", [&] {
        std::vector<torch::Tensor> checks;
        for (const auto& [name, tensor] : floats) {
          checks.push_back(torch::isfinite(*tensor).all());
        }
        if (policy_->discrete()) {
          checks.push_back(
              ((r.actions >= 0) & (r.actions < c.num_actions)).all());
        } else {
          checks.push_back(torch::isfinite(r.actions).all());
        }
        return torch::stack(checks).all().item<bool>();
      }));
  if (valid) return absl::OkStatus();
  for (const auto& [name, tensor] : floats) {
    RETURN_IF_ERROR(CheckFinite(*tensor, name));
  }
  if (!policy_->discrete()) return CheckFinite(r.actions, "rollout.actions");
  return absl::InvalidArgumentError(
      absl::StrCat("rollout.actions: must be in [0, ", c.num_actions, ")"));
}

absl::StatusOr<UpdateStats> PpoUpdater::Update(const Rollout& rollout,
                                               int64_t env_steps_done) {
  RETURN_IF_ERROR(CheckRollout(rollout));
  int64_t non_finite = 0;
  torch::Tensor observations;
  absl::Status collective_error;
  absl::StatusOr<UpdateStats> result = CatchTorchErrors("PPO update", [&] {
    return RunEpochs(rollout, env_steps_done, &non_finite, &observations,
                     &collective_error);
  });
  RETURN_IF_ERROR(collective_error);
  ASSIGN_OR_RETURN(UpdateStats stats, std::move(result));
  if (non_finite > 0) {
    // Every rank of a gang sees the same count (it rides in the gradient
    // bucket), so all skip or fail together.
    ++consecutive_nonfinite_updates_;
    if (consecutive_nonfinite_updates_ >= max_nonfinite_updates_) {
      const std::string in_a_row =
          max_nonfinite_updates_ > 1
              ? absl::StrFormat(
                    " %d updates in a row had non-finite minibatches (the "
                    "limit, max_nonfinite_updates, is %d).",
                    consecutive_nonfinite_updates_, max_nonfinite_updates_)
              : "";
      return absl::InternalError(absl::StrFormat(
          "PPO update: the loss or gradient was not finite (NaN or inf) in %d "
          "of the update's minibatches (mean policy loss %g, value loss %g, "
          "gradient norm %g); their gradients were not applied and the "
          "observation statistics were not updated.%s The optimisation "
          "diverged: lower ppo.learning_rate or the loss coefficients, or "
          "check the scale of the rewards",
          non_finite, stats.policy_loss, stats.value_loss, stats.grad_norm,
          in_a_row));
    }
    // Skipped: the bad minibatches' gradients were zeroed; the rollout
    // that overflowed is not folded into the normaliser either.
    stats.nonfinite_minibatches = non_finite;
    stats.consecutive_nonfinite_updates = consecutive_nonfinite_updates_;
    return stats;
  }
  consecutive_nonfinite_updates_ = 0;
  if (collective_ == nullptr) {
    RETURN_IF_ERROR(policy_->UpdateObservationStatistics(observations));
    return stats;
  }
  ASSIGN_OR_RETURN(torch::Tensor moments,
                   policy_->ObservationMoments(observations));
  RETURN_IF_ERROR(collective_->AllReduce(moments, ReduceOp::kSum));
  RETURN_IF_ERROR(policy_->MergeObservationMoments(moments));
  return stats;
}

UpdateStats PpoUpdater::RunEpochs(const Rollout& rollout,
                                  int64_t env_steps_done, int64_t* non_finite,
                                  torch::Tensor* flat_observations,
                                  absl::Status* collective_error) {
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const int64_t batch = T * E;
  // Collective calls: a failure is remembered and ends the update.
  auto sync = [&](absl::Status status) {
    if (status.ok()) return;
    *collective_error = std::move(status);
    throw std::runtime_error(std::string(collective_error->message()));
  };

  // GAE on the host buffers (the rollout is CPU-resident).
  const auto gae_start = std::chrono::steady_clock::now();
  torch::Tensor advantages = torch::empty({T, E});
  torch::Tensor returns = torch::empty({T, E});
  const Rollout& r = rollout;
  ComputeGae(
      {T, E, r.rewards.data_ptr<float>(), r.values.data_ptr<float>(),
       r.next_values.data_ptr<float>(), r.terminated.data_ptr<uint8_t>(),
       r.truncated.data_ptr<uint8_t>(), r.truncated_values.data_ptr<float>()},
      config_.gamma(), config_.gae_lambda(), advantages.data_ptr<float>(),
      returns.data_ptr<float>());
  const double gae_seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - gae_start)
                                 .count();

  const torch::Tensor obs = r.observations.reshape({batch, -1});
  const torch::Tensor actions = policy_->discrete()
                                    ? r.actions.reshape({batch})
                                    : r.actions.reshape({batch, -1});
  const torch::Tensor old_log_probs = r.log_probs.reshape({batch});
  const torch::Tensor old_values = r.values.reshape({batch});
  advantages = advantages.reshape({batch});
  returns = returns.reshape({batch});

  double lr = config_.learning_rate();
  if (config_.anneal_learning_rate()) {
    const double frac =
        1.0 - static_cast<double>(env_steps_done) / total_env_steps_;
    lr *= std::max(frac, 0.0);
  }
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
  }

  const int64_t num_minibatches = config_.num_minibatches();
  const int64_t minibatch = batch / num_minibatches;
  // This rank's share of every global minibatch (1 alone).
  int64_t global_minibatch = minibatch;
  double share = 1.0;
  if (collective_ != nullptr) {
    torch::Tensor sizes =
        torch::tensor({static_cast<double>(minibatch)}, torch::kFloat64);
    sync(collective_->AllReduce(sizes, ReduceOp::kSum));
    global_minibatch = static_cast<int64_t>(sizes.item<double>());
    share = static_cast<double>(minibatch) / global_minibatch;
  }
  const float clip = config_.clip_coef();
  torch::Tensor sum_policy_loss = torch::zeros({});
  torch::Tensor sum_value_loss = torch::zeros({});
  torch::Tensor sum_entropy = torch::zeros({});
  torch::Tensor sum_kl = torch::zeros({});
  torch::Tensor sum_clip = torch::zeros({});
  torch::Tensor sum_grad_norm = torch::zeros({});
  torch::Tensor sum_non_finite = torch::zeros({});
  int64_t minibatches_run = 0;
  int epochs = 0;
  std::vector<torch::Tensor> params = policy_->parameters();

  for (int epoch = 0; epoch < config_.num_epochs(); ++epoch) {
    const torch::Tensor order = torch::randperm(batch, generator_);
    torch::Tensor epoch_kl = torch::zeros({});
    // A gang normalises each minibatch's advantages by the global
    // minibatch's moments: one all-reduce for the epoch's minibatches.
    torch::Tensor adv_mean, adv_std;  // [num_minibatches]
    if (collective_ != nullptr && config_.normalize_advantages() &&
        global_minibatch > 1) {
      const torch::Tensor a =
          advantages
              .index_select(0, order.narrow(0, 0, num_minibatches * minibatch))
              .to(torch::kFloat64)
              .reshape({num_minibatches, minibatch});
      torch::Tensor moments =
          torch::stack({a.sum(1), a.pow(2).sum(1)}, 1).contiguous();
      sync(collective_->AllReduce(moments, ReduceOp::kSum));
      const double n = static_cast<double>(global_minibatch);
      adv_mean = moments.select(1, 0) / n;
      adv_std =
          torch::clamp_min(
              (moments.select(1, 1) - n * adv_mean * adv_mean) / (n - 1), 0.0)
              .sqrt();
      adv_mean = adv_mean.to(torch::kFloat32);
      adv_std = adv_std.to(torch::kFloat32);
    }
    for (int64_t m = 0; m < num_minibatches; ++m) {
      const torch::Tensor idx = order.narrow(0, m * minibatch, minibatch);
      const PolicyEvaluation eval = policy_->Evaluate(
          obs.index_select(0, idx), actions.index_select(0, idx));
      const torch::Tensor mb_old_log_probs = old_log_probs.index_select(0, idx);
      torch::Tensor mb_adv = advantages.index_select(0, idx);
      if (config_.normalize_advantages() && global_minibatch > 1) {
        if (collective_ == nullptr) {
          mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8);
        } else {
          mb_adv = (mb_adv - adv_mean[m]) / (adv_std[m] + 1e-8);
        }
      }
      const torch::Tensor log_ratio = eval.log_probs - mb_old_log_probs;
      const torch::Tensor ratio = log_ratio.exp();
      const torch::Tensor policy_loss =
          torch::max(-mb_adv * ratio,
                     -mb_adv * torch::clamp(ratio, 1 - clip, 1 + clip))
              .mean();
      const torch::Tensor mb_returns = returns.index_select(0, idx);
      torch::Tensor value_loss;
      if (config_.clip_value_loss()) {
        const torch::Tensor mb_old_values = old_values.index_select(0, idx);
        const torch::Tensor clipped =
            mb_old_values +
            torch::clamp(eval.values - mb_old_values, -clip, clip);
        value_loss = 0.5 * torch::max((eval.values - mb_returns).pow(2),
                                      (clipped - mb_returns).pow(2))
                               .mean();
      } else {
        value_loss = 0.5 * (eval.values - mb_returns).pow(2).mean();
      }
      const torch::Tensor entropy = eval.entropy.mean();
      const torch::Tensor loss = policy_loss -
                                 config_.entropy_coef() * entropy +
                                 config_.value_coef() * value_loss;
      optimizer_->zero_grad();
      loss.backward();
      torch::Tensor grad_norm;
      {
        torch::NoGradGuard no_grad;
        // Every rank's loss finite? Rides in the gradient bucket.
        torch::Tensor any_bad =
            torch::logical_not(torch::isfinite(loss.detach()))
                .to(torch::kFloat32)
                .reshape({1});
        if (collective_ != nullptr) {
          // The global minibatch's mean loss is the share-weighted sum of
          // the ranks' means: one all-reduce of one flat bucket.
          std::vector<torch::Tensor> bucket;
          bucket.reserve(params.size() + 1);
          for (auto& p : params) {
            if (p.grad().defined()) {
              p.grad().mul_(share);
              bucket.push_back(p.grad());
            }
          }
          bucket.push_back(any_bad);
          sync(AllReduceSumCoalesced(*collective_, bucket));
        }
        std::vector<torch::Tensor> norms;
        norms.reserve(params.size());
        for (const auto& p : params) {
          if (p.grad().defined()) norms.push_back(p.grad().norm());
        }
        grad_norm = torch::stack(norms).norm();
        if (config_.max_grad_norm() > 0) {
          // Scale without reading the norm back: clip_coef = min(1, max/norm).
          const torch::Tensor scale = torch::clamp_max(
              config_.max_grad_norm() / (grad_norm + 1e-6), 1.0);
          for (auto& p : params) {
            if (p.grad().defined()) p.grad().mul_(scale);
          }
        }
        // A NaN or inf would reach every weight through the optimizer; zero
        // such a minibatch's gradients on the device (no read-back here) and
        // report it with the statistics.
        const torch::Tensor bad =
            (any_bad.squeeze(0) > 0) |
            torch::logical_not(torch::isfinite(grad_norm));
        for (auto& p : params) {
          if (p.grad().defined()) p.grad().masked_fill_(bad, 0.0);
        }
        sum_non_finite += bad;
      }
      optimizer_->step();

      torch::NoGradGuard no_grad;
      const torch::Tensor kl = ((ratio - 1) - log_ratio).mean();
      epoch_kl += kl * share;
      sum_policy_loss += policy_loss.detach();
      sum_value_loss += value_loss.detach();
      sum_entropy += entropy.detach();
      sum_kl += kl;
      sum_clip += ((ratio - 1).abs() > clip).to(torch::kFloat32).mean();
      sum_grad_norm += grad_norm;
      ++minibatches_run;
    }
    ++epochs;
    if (config_.target_kl() > 0) {
      // The global mean KL, so that every rank stops at the same epoch.
      torch::Tensor kl = epoch_kl.to(torch::kFloat64).reshape({1});
      if (collective_ != nullptr) {
        sync(collective_->AllReduce(kl, ReduceOp::kSum));
      }
      if (kl.item<double>() / num_minibatches > config_.target_kl()) break;
    }
  }

  UpdateStats stats;
  // One read-back of everything reported.
  const torch::Tensor y_var = returns.var();
  const torch::Tensor explained = 1 - (returns - old_values).var() / y_var;
  const torch::Tensor packed = torch::cat(
      {torch::stack({sum_policy_loss, sum_value_loss, sum_entropy, sum_kl,
                     sum_clip, sum_grad_norm}) /
           static_cast<double>(std::max<int64_t>(minibatches_run, 1)),
       sum_non_finite.unsqueeze(0)});
  const auto values = packed.to(torch::kFloat64).contiguous();
  const double* v = values.data_ptr<double>();
  stats.policy_loss = v[0];
  stats.value_loss = v[1];
  stats.entropy = v[2];
  stats.approx_kl = v[3];
  stats.clip_fraction = v[4];
  stats.grad_norm = v[5];
  *non_finite = static_cast<int64_t>(v[6]);
  const double yv = y_var.item<double>();
  stats.explained_variance = yv == 0 ? 0.0 : explained.item<double>();
  stats.learning_rate = lr;
  stats.epochs = epochs;
  stats.gae_seconds = gae_seconds;
  *flat_observations = obs;
  return stats;
}

}  // namespace rl
