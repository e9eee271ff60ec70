// The fused CPU minibatch strategy (learner/ppo_fused_step.h). Part of the
// ppo_updater library.
#include "learner/ppo_fused_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace rl {

absl::Status FusedMinibatches::BeginUpdate(const Rollout& rollout,
                                           const UpdatePlan& plan,
                                           Collective* collective) {
  // The parameters' storage may have been replaced (a checkpoint loaded).
  RETURN_IF_ERROR(fused_.Bind(policy_));
  plan_ = &plan;
  collective_ = collective;
  const int64_t mb = plan.minibatch;
  const int d = fused_.observation_size();
  const int a = fused_.discrete() ? 1 : fused_.head_size();
  rows_.obs = rollout.observations.data_ptr<float>();
  rows_.discrete_actions =
      fused_.discrete() ? rollout.actions.data_ptr<int64_t>() : nullptr;
  rows_.continuous_actions =
      fused_.discrete() ? nullptr : rollout.actions.data_ptr<float>();
  rows_.old_log_probs = rollout.log_probs.data_ptr<float>();
  rows_.old_values = rollout.values.data_ptr<float>();
  rows_.advantages = plan.advantages.data_ptr<float>();
  rows_.returns = plan.returns.data_ptr<float>();
  rows_.alive =
      rollout.alive.defined() ? rollout.alive.data_ptr<uint8_t>() : nullptr;

  Buffers& b = buffers_;
  b.observations.resize(mb * d);
  b.actions.resize(mb * a);
  b.discrete_actions.resize(mb);
  b.old_log_probs.resize(mb);
  b.old_values.resize(mb);
  b.advantages.resize(mb);
  b.returns.resize(mb);
  b.grads.assign(fused_.num_parameters() + 1, 0.0f);
  params_ = policy_->parameters();
  sum_policy_loss_ = sum_value_loss_ = sum_entropy_ = sum_kl_ = sum_clip_ =
      sum_grad_norm_ = 0;
  bad_minibatches_ = 0;
  return absl::OkStatus();
}

void FusedMinibatches::BeginEpoch(int epoch) {
  epoch_order_ = plan_->orders[epoch].data_ptr<int64_t>();
  epoch_kl_ = 0;
}

absl::Status FusedMinibatches::Step(int epoch, int64_t m) {
  const UpdatePlan& plan = *plan_;
  const int64_t mb = plan.minibatch;
  const int d = fused_.observation_size();
  const int a = fused_.discrete() ? 1 : fused_.head_size();
  const Rows& r = rows_;
  Buffers& b = buffers_;
  const int64_t index = epoch * config_.num_minibatches() + m;
  // Agents that leave early: a gang skips a minibatch with none alive on
  // any rank, every rank together (as the LibTorch step).
  const bool gang_weighted =
      collective_ != nullptr && !plan.alive_counts.empty();
  if (gang_weighted && plan.alive_counts[index] <= 0) return absl::OkStatus();
  // This minibatch's rows, gathered on the host; padding rows (agents that
  // left early) are left out, so every mean below is over the alive rows.
  const int64_t* idx = epoch_order_ + m * mb;
  double adv_sum = 0;
  int64_t n = 0;
  for (int64_t k = 0; k < mb; ++k) {
    const int64_t row = idx[k];
    if (r.alive != nullptr && r.alive[row] == 0) continue;
    const int64_t i = n++;
    std::memcpy(b.observations.data() + i * d, r.obs + row * d,
                d * sizeof(float));
    if (r.discrete_actions != nullptr) {
      b.discrete_actions[i] = r.discrete_actions[row];
    } else {
      std::memcpy(b.actions.data() + i * a, r.continuous_actions + row * a,
                  a * sizeof(float));
    }
    b.old_log_probs[i] = r.old_log_probs[row];
    b.old_values[i] = r.old_values[row];
    b.advantages[i] = r.advantages[row];
    b.returns[i] = r.returns[row];
    adv_sum += r.advantages[row];
  }
  // Alone, a minibatch of padding only teaches nothing (and Adam's
  // momentum would still move the weights): skipped.
  if (n == 0 && collective_ == nullptr) return absl::OkStatus();
  if (config_.normalize_advantages() && plan.global_minibatch > 1) {
    // As LibTorch: (a - mean) / (std + 1e-8), std unbiased.
    double mean, std;
    if (collective_ == nullptr) {
      mean = adv_sum / n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) {
        ss += (b.advantages[i] - mean) * (b.advantages[i] - mean);
      }
      std = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    } else {
      std::tie(mean, std) = GangAdvantageMoments(plan, index);
    }
    const float fmean = static_cast<float>(mean);
    const float fstd = static_cast<float>(std);
    for (int64_t i = 0; i < n; ++i) {
      b.advantages[i] = (b.advantages[i] - fmean) / (fstd + 1e-8f);
    }
  }
  PpoMinibatch minibatch;
  minibatch.size = n;
  minibatch.observations = b.observations.data();
  minibatch.discrete_actions = b.discrete_actions.data();
  minibatch.continuous_actions = b.actions.data();
  minibatch.old_log_probs = b.old_log_probs.data();
  minibatch.old_values = b.old_values.data();
  minibatch.advantages = b.advantages.data();
  minibatch.returns = b.returns.data();
  const int64_t num_params = fused_.num_parameters();
  float* grads = b.grads.data();
  PpoLossValues terms;
  if (n > 0) {
    terms = loss_.Compute(fused_, config_, minibatch, grads);
  } else {
    // A gang's rank with none of the minibatch's alive rows: it adds
    // nothing to the all-reduce (weighs 0) and takes the gang's step.
    terms.finite = true;
    std::fill(grads, grads + num_params, 0.0f);
  }
  grads[num_params] = terms.finite ? 0.0f : 1.0f;
  const double share = gang_weighted ? plan.alive_shares[index] : plan.share;
  if (collective_ != nullptr) {
    const float share_f = static_cast<float>(share);
    for (int64_t i = 0; i < num_params; ++i) grads[i] *= share_f;
    torch::Tensor bucket =
        torch::from_blob(grads, {num_params + 1}, torch::kFloat32);
    RETURN_IF_ERROR(collective_->AllReduce(bucket, ReduceOp::kSum));
  }
  double sq = 0;
  for (int64_t i = 0; i < num_params; ++i) sq += double(grads[i]) * grads[i];
  const float grad_norm = static_cast<float>(std::sqrt(sq));
  const float clip_norm = config_.max_grad_norm();
  if (clip_norm > 0) {
    const float scale = std::min(clip_norm / (grad_norm + 1e-6f), 1.0f);
    for (int64_t i = 0; i < num_params; ++i) grads[i] *= scale;
  }
  const bool bad = grads[num_params] > 0 || !std::isfinite(grad_norm);
  if (bad) {
    // Zeroed, not skipped: Adam's moments still decay, as on the
    // LibTorch path.
    std::fill(grads, grads + num_params, 0.0f);
    ++bad_minibatches_;
  }
  RETURN_IF_ERROR(FusedAdamStep(*optimizer_, params_, grads));
  epoch_kl_ += terms.approx_kl * share;
  sum_policy_loss_ += terms.policy_loss;
  sum_value_loss_ += terms.value_loss;
  sum_entropy_ += terms.entropy;
  sum_kl_ += terms.approx_kl;
  sum_clip_ += terms.clip_fraction;
  sum_grad_norm_ += grad_norm;
  return absl::OkStatus();
}

torch::Tensor FusedMinibatches::EpochKl() {
  return torch::full({1}, epoch_kl_, torch::kFloat64);
}

EpochResult FusedMinibatches::Finish(const Rollout& rollout,
                                     const UpdatePlan& plan,
                                     int64_t minibatches_run, int epochs) {
  const int64_t batch = rollout.num_steps() * rollout.num_envs();
  const float* returns = rows_.returns;
  const float* old_values = rows_.old_values;
  EpochResult result;
  UpdateStats& stats = result.stats;
  const double n = static_cast<double>(std::max<int64_t>(minibatches_run, 1));
  stats.policy_loss = sum_policy_loss_ / n;
  stats.value_loss = sum_value_loss_ / n;
  stats.entropy = sum_entropy_ / n;
  stats.approx_kl = sum_kl_ / n;
  stats.clip_fraction = sum_clip_ / n;
  stats.grad_norm = sum_grad_norm_ / n;
  result.non_finite = bad_minibatches_;
  // Explained variance: 1 - Var(returns - values) / Var(returns), over the
  // alive rows (padding is no sample of the value's fit).
  const uint8_t* alive = rows_.alive;
  const auto counts = [&](int64_t i) { return alive == nullptr || alive[i]; };
  double ret_mean = 0, res_mean = 0, count = 0;
  for (int64_t i = 0; i < batch; ++i) {
    if (!counts(i)) continue;
    ret_mean += returns[i];
    res_mean += returns[i] - old_values[i];
    count += 1;
  }
  double ret_var = 0, res_var = 0;
  if (count >= 2) {
    ret_mean /= count;
    res_mean /= count;
    for (int64_t i = 0; i < batch; ++i) {
      if (!counts(i)) continue;
      ret_var += (returns[i] - ret_mean) * (returns[i] - ret_mean);
      const double res = returns[i] - old_values[i] - res_mean;
      res_var += res * res;
    }
  }
  stats.explained_variance = ret_var == 0 ? 0.0 : 1 - res_var / ret_var;
  stats.learning_rate = plan.lr;
  stats.epochs = epochs;
  stats.gae_seconds = plan.gae_seconds;
  result.flat_observations = rollout.observations.reshape({batch, -1});
  if (alive != nullptr) {
    result.flat_observations = result.flat_observations.index_select(
        0, rollout.alive.reshape({batch}).nonzero().squeeze(1));
  }
  plan_ = nullptr;
  rows_ = Rows{};
  params_.clear();
  return result;
}

}  // namespace rl
