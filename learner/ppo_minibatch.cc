// The LibTorch minibatch step and what feeds it: the rollout on the device,
// the sums and the read-back of the statistics (learner/ppo_minibatch.h).
// Part of the ppo_updater library.
#include "learner/ppo_minibatch.h"

#include <ATen/autocast_mode.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"
#include "policy/device_transfer.h"

namespace rl {
namespace {

// Autocast to bfloat16 on one device type for the guard's life (LibTorch's
// autocast is per thread), then as it was, its cast cache cleared.
class Bfloat16Autocast {
 public:
  explicit Bfloat16Autocast(c10::DeviceType type)
      : type_(type),
        was_enabled_(at::autocast::is_autocast_enabled(type)),
        was_dtype_(at::autocast::get_autocast_dtype(type)) {
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
  }
  ~Bfloat16Autocast() {
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
    at::autocast::clear_cache();
  }
  Bfloat16Autocast(const Bfloat16Autocast&) = delete;
  Bfloat16Autocast& operator=(const Bfloat16Autocast&) = delete;

 private:
  const c10::DeviceType type_;
  const bool was_enabled_;
  const at::ScalarType was_dtype_;
};

}  // namespace

StepTensors TorchMinibatchStep::DeviceRollout(
    const Rollout& rollout, const UpdatePlan& plan,
    std::vector<torch::Tensor>* orders) const {
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const int64_t batch = T * E;
  const Rollout& r = rollout;
  const bool recurrent = policy_->recurrent();
  // Where a recurrent state restarts after a step: an episode's end, and
  // with agents that leave early every padding step (as the collector).
  torch::Tensor episode_ends;
  if (recurrent) {
    episode_ends = r.terminated | r.truncated;
    if (r.alive.defined()) episode_ends = episode_ends | r.alive.eq(0);
    episode_ends = episode_ends.to(torch::kUInt8).reshape({batch});
  }
  // The rollout and the plan (host tensors) on the policy's device, in one
  // packed copy: on the CPU, the tensors themselves.
  std::vector<torch::Tensor> host = {
      r.observations.reshape({batch, -1}),
      policy_->discrete() ? r.actions.reshape({batch})
                          : r.actions.reshape({batch, -1}),
      r.log_probs.reshape({batch}),
      r.values.reshape({batch}),
      r.action_masks.defined() ? r.action_masks.reshape({batch, -1})
                               : torch::Tensor(),
      episode_ends,
      recurrent ? r.initial_state : torch::Tensor(),
      plan.advantages,
      plan.returns,
      r.alive.defined() ? r.alive.reshape({batch}).to(torch::kFloat32)
                        : torch::Tensor()};
  const size_t num_rollout_tensors = host.size();
  host.insert(host.end(), plan.orders.begin(), plan.orders.end());
  const std::vector<torch::Tensor> on_device =
      ToDevice(host, policy_->device());
  StepTensors t;
  t.obs = on_device[0];
  t.actions = on_device[1];
  t.old_log_probs = on_device[2];
  t.old_values = on_device[3];
  t.masks = on_device[4];
  t.episode_ends = on_device[5];
  t.initial_state = on_device[6];
  t.advantages = on_device[7];
  t.returns = on_device[8];
  t.weights = on_device[9];
  orders->assign(on_device.begin() + num_rollout_tensors, on_device.end());
  return t;
}

void TorchMinibatchStep::ZeroSums(StepTensors& t) const {
  const auto on = torch::TensorOptions().device(policy_->device());
  for (torch::Tensor* sum :
       {&t.sum_policy_loss, &t.sum_value_loss, &t.sum_entropy, &t.sum_kl,
        &t.sum_clip, &t.sum_grad_norm, &t.sum_non_finite, &t.epoch_kl}) {
    if (sum->defined()) {
      sum->zero_();
    } else {
      *sum = torch::zeros({}, on);
    }
  }
}

StepShape TorchMinibatchStep::ShapeOf(const Rollout& rollout,
                                      const UpdatePlan& plan) const {
  StepShape shape;
  shape.steps = rollout.num_steps();
  shape.minibatch = plan.minibatch;
  shape.global_minibatch = plan.global_minibatch;
  shape.envs_per_minibatch = rollout.num_envs() / config_.num_minibatches();
  shape.share = plan.share;
  return shape;
}

absl::Status TorchMinibatchStep::Run(StepTensors& t, const StepShape& shape,
                                     Collective* collective,
                                     const UpdatePlan* gang_plan, int64_t index,
                                     bool graphed) {
  const torch::Device device = policy_->device();
  const bool recurrent = policy_->recurrent();
  const torch::Tensor& idx = t.idx;
  const int64_t T = shape.steps;
  // A recurrent policy's minibatch: k whole env sequences of T steps.
  const auto sequences = [&](const torch::Tensor& rows) {
    if (!rows.defined()) return rows;
    std::vector<int64_t> dims = {T, shape.envs_per_minibatch};
    for (int64_t d = 1; d < rows.dim(); ++d) dims.push_back(rows.size(d));
    return rows.view(dims);
  };
  const float clip = config_.clip_coef();
  std::vector<torch::Tensor> params = policy_->parameters();
  // The forward passes and the loss in bfloat16 autocast where asked;
  // the backward pass after it (weights and gradients stay float32).
  std::optional<Bfloat16Autocast> autocast;
  if (bfloat16_) autocast.emplace(device.type());
  // Agents that leave early: the means over the minibatch's alive rows
  // (padding weighs 0); else plain means, as always.
  const torch::Tensor w =
      t.weights.defined() ? t.weights.index_select(0, idx) : torch::Tensor();
  const torch::Tensor alive_rows =
      w.defined() ? w.sum().clamp_min(1) : torch::Tensor();
  // torch::where, not x * w: a non-finite number on a padding row stays
  // out of the sum.
  const auto mean = [&](const torch::Tensor& x) {
    return w.defined()
               ? torch::where(w > 0, x, torch::zeros_like(x)).sum() / alive_rows
               : x.mean();
  };
  // A minibatch of padding only teaches nothing, and Adam's momentum would
  // still move the weights: it is skipped (a read-back, paid only by runs
  // whose agents leave early), before the forward pass. In a gang, where
  // none is alive on any rank (the plan's counts): every rank skips it
  // together, and a rank with none of the alive rows weighs 0.
  double share = shape.share;
  if (gang_plan != nullptr && !gang_plan->alive_counts.empty()) {
    if (gang_plan->alive_counts[index] <= 0) return absl::OkStatus();
    share = gang_plan->alive_shares[index];
  } else if (w.defined() && !(w > 0).any().item<bool>()) {
    return absl::OkStatus();
  }
  const torch::Tensor mb_masks =
      t.masks.defined() ? t.masks.index_select(0, idx) : torch::Tensor();
  const PolicyEvaluation eval =
      recurrent
          ? policy_->EvaluateSequence(
                sequences(t.obs.index_select(0, idx)),
                sequences(t.actions.index_select(0, idx)), sequences(mb_masks),
                t.initial_state.index_select(
                    0, idx.narrow(0, 0, shape.envs_per_minibatch)),
                sequences(t.episode_ends.index_select(0, idx)))
          : policy_->Evaluate(t.obs.index_select(0, idx),
                              t.actions.index_select(0, idx), mb_masks);
  const torch::Tensor mb_old_log_probs = t.old_log_probs.index_select(0, idx);
  torch::Tensor mb_adv = t.advantages.index_select(0, idx);
  if (config_.normalize_advantages() && shape.global_minibatch > 1) {
    if (gang_plan != nullptr) {
      // The global minibatch's moments, from the planning all-reduce.
      const auto [mean, std] = GangAdvantageMoments(*gang_plan, index);
      mb_adv = (mb_adv - static_cast<float>(mean)) /
               (static_cast<float>(std) + 1e-8f);
    } else if (w.defined()) {
      // Unbiased, as LibTorch's std, over the alive rows.
      const torch::Tensor m = mean(mb_adv);
      const torch::Tensor var = mean((mb_adv - m).pow(2)) * alive_rows /
                                (alive_rows - 1).clamp_min(1);
      mb_adv = (mb_adv - m) / (var.sqrt() + 1e-8);
    } else {
      mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8);
    }
  }
  const torch::Tensor log_ratio = eval.log_probs - mb_old_log_probs;
  const torch::Tensor ratio = log_ratio.exp();
  const torch::Tensor policy_loss = mean(torch::max(
      -mb_adv * ratio, -mb_adv * torch::clamp(ratio, 1 - clip, 1 + clip)));
  const torch::Tensor mb_returns = t.returns.index_select(0, idx);
  const torch::Tensor entropy = mean(eval.entropy);
  // The loss: its terms (learner/ppo_loss_terms.h), each written once.
  torch::Tensor value_loss, loss;
  for (const LossTerm& term : loss_terms_) {
    torch::Tensor value;
    switch (term.kind) {
      case LossTermKind::kClippedSurrogate:
        value = policy_loss;
        break;
      case LossTermKind::kEntropyBonus:
        value = entropy;
        break;
      case LossTermKind::kValue:
        value_loss = 0.5 * mean((eval.values - mb_returns).pow(2));
        value = value_loss;
        break;
      case LossTermKind::kClippedValue: {
        const torch::Tensor mb_old_values = t.old_values.index_select(0, idx);
        const torch::Tensor clipped =
            mb_old_values +
            torch::clamp(eval.values - mb_old_values, -clip, clip);
        value_loss = 0.5 * mean(torch::max((eval.values - mb_returns).pow(2),
                                           (clipped - mb_returns).pow(2)));
        value = value_loss;
        break;
      }
      case LossTermKind::kCount:
        return absl::InternalError("PPO loss: not a loss term");
    }
    // The sum as it was always written (policy_loss - entropy_coef *
    // entropy + value_coef * value_loss), so results stay bit-identical.
    const float magnitude = std::abs(term.coefficient);
    const torch::Tensor weighted =
        magnitude == 1.0f ? value : magnitude * value;
    const bool minus = term.coefficient < 0;
    loss = !loss.defined() ? (minus ? -weighted : weighted)
           : minus         ? loss - weighted
                           : loss + weighted;
  }
  if (!value_loss.defined()) value_loss = torch::zeros({}, loss.options());
  autocast.reset();
  optimizer_->zero_grad();
  loss.backward();
  torch::Tensor grad_norm;
  {
    torch::NoGradGuard no_grad;
    // Every rank's loss finite? Rides in the gradient bucket.
    torch::Tensor any_bad = torch::logical_not(torch::isfinite(loss.detach()))
                                .to(torch::kFloat32)
                                .reshape({1});
    if (collective != nullptr) {
      // The global minibatch's mean loss is the share-weighted sum of the
      // ranks' means: one all-reduce of one flat bucket.
      std::vector<torch::Tensor> bucket;
      bucket.reserve(params.size() + 1);
      for (auto& p : params) {
        if (p.grad().defined()) {
          p.grad().mul_(share);
          bucket.push_back(p.grad());
        }
      }
      bucket.push_back(any_bad);
      RETURN_IF_ERROR(AllReduceSumCoalesced(*collective, bucket));
    }
    // Multi-tensor kernels: a launch for all gradients, not one each.
    std::vector<torch::Tensor> grads;
    grads.reserve(params.size());
    for (const auto& p : params) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    grad_norm = torch::stack(at::_foreach_norm(grads)).norm();
    if (config_.max_grad_norm() > 0) {
      // Scale without reading the norm back: clip_coef = min(1, max/norm).
      const torch::Tensor scale =
          torch::clamp_max(config_.max_grad_norm() / (grad_norm + 1e-6), 1.0);
      at::_foreach_mul_(grads, scale);
    }
    // A NaN or inf would reach every weight through the optimizer; zero
    // such a minibatch's gradients on the device (no read-back here) and
    // report it with the statistics.
    const torch::Tensor bad = (any_bad.squeeze(0) > 0) |
                              torch::logical_not(torch::isfinite(grad_norm));
    for (auto& p : params) {
      if (p.grad().defined()) p.grad().masked_fill_(bad, 0.0);
    }
    t.sum_non_finite += bad;
  }
  if (graphed) {
    adam_.StepKernels(t.lr);  // the host's counts follow each run
  } else {
    RETURN_IF_ERROR(adam_.Step());
  }

  torch::NoGradGuard no_grad;
  const torch::Tensor kl = mean((ratio - 1) - log_ratio);
  t.epoch_kl += kl * share;
  t.sum_policy_loss += policy_loss.detach();
  t.sum_value_loss += value_loss.detach();
  t.sum_entropy += entropy.detach();
  t.sum_kl += kl;
  t.sum_clip += mean(((ratio - 1).abs() > clip).to(torch::kFloat32));
  t.sum_grad_norm += grad_norm;
  return absl::OkStatus();
}

EpochResult TorchMinibatchStep::Result(const StepTensors& t,
                                       const UpdatePlan& plan,
                                       int64_t minibatches_run,
                                       int epochs) const {
  EpochResult result;
  UpdateStats& stats = result.stats;
  // One read-back of everything reported. Agents that leave early: over
  // the alive rows (padding is no sample of the value's fit).
  const torch::Tensor alive =
      t.weights.defined() ? t.weights.nonzero().squeeze(1) : torch::Tensor();
  const auto rows = [&](const torch::Tensor& x) {
    return alive.defined() ? x.index_select(0, alive) : x;
  };
  const torch::Tensor returns = rows(t.returns);
  // Fewer than 2 alive rows (an update of padding only) have no variance.
  const torch::Tensor y_var =
      returns.size(0) < 2 ? torch::zeros({}, returns.options()) : returns.var();
  const torch::Tensor explained =
      returns.size(0) < 2 ? y_var
                          : 1 - (returns - rows(t.old_values)).var() / y_var;
  const torch::Tensor packed = torch::cat(
      {torch::stack({t.sum_policy_loss, t.sum_value_loss, t.sum_entropy,
                     t.sum_kl, t.sum_clip, t.sum_grad_norm}) /
           static_cast<double>(std::max<int64_t>(minibatches_run, 1)),
       torch::stack({t.sum_non_finite.to(torch::kFloat32), y_var, explained})});
  const auto values = packed.to(torch::kCPU, torch::kFloat64).contiguous();
  const double* v = values.data_ptr<double>();
  stats.policy_loss = v[0];
  stats.value_loss = v[1];
  stats.entropy = v[2];
  stats.approx_kl = v[3];
  stats.clip_fraction = v[4];
  stats.grad_norm = v[5];
  result.non_finite = static_cast<int64_t>(v[6]);
  stats.explained_variance = v[7] == 0 ? 0.0 : v[8];
  stats.learning_rate = plan.lr;
  stats.epochs = epochs;
  stats.gae_seconds = plan.gae_seconds;
  result.flat_observations = rows(t.obs);
  return result;
}

}  // namespace rl
