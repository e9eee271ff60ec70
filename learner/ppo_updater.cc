#include "learner/ppo_updater.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/fused_ppo.h"
#include "learner/gae.h"
#include "learner/gae_tensors.h"
#include "learner/rollout_check.h"
#include "policy/compute_device.h"
#include "policy/torch_status.h"

namespace rl {

PpoUpdater::PpoUpdater(ActorCritic policy, const PPOConfig& config,
                       int64_t total_env_steps, uint64_t seed,
                       const ExecutionConfig& execution)
    : policy_(std::move(policy)),
      config_(config),
      execution_(execution),
      loss_terms_(PpoLossTerms(config)),
      total_env_steps_(std::max<int64_t>(1, total_env_steps)),
      optimizer_(std::make_unique<torch::optim::Adam>(
          policy_->parameters(),
          torch::optim::AdamOptions(config.learning_rate()).eps(1e-5))),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

absl::StatusOr<UpdateStats> PpoUpdater::Update(const Rollout& rollout,
                                               int64_t env_steps_done,
                                               std::vector<double>* gang_sums) {
  RETURN_IF_ERROR(CheckRolloutForUpdate(rollout, *policy_, config_));
  if (epochs_ == nullptr) {
    ASSIGN_OR_RETURN(bfloat16_,
                     UseBfloat16(execution_.precision(), policy_->device(),
                                 policy_->config().encoder !=
                                     ActorCriticConfig::Encoder::kMlp));
    if (bfloat16_ && execution_.cpu_kernels() == "fused") {
      return absl::FailedPreconditionError(
          "execution.cpu_kernels: fused computes in float32, and "
          "execution.precision asks for bfloat16");
    }
    ASSIGN_OR_RETURN(bool fusable,
                     UseFusedPolicy(execution_.cpu_kernels(), policy_));
    // The fused path computes only the loss terms it implements.
    if (const absl::Status terms = FusedImplementsAll(loss_terms_);
        fusable && !terms.ok()) {
      if (execution_.cpu_kernels() == "fused") {
        return absl::FailedPreconditionError(
            absl::StrCat("execution.cpu_kernels: fused: ", terms.message()));
      }
      RL_LOG_INFO("updates run on LibTorch: {}", std::string(terms.message()));
      fusable = false;
    }
    const bool fused = fusable && !bfloat16_;
    if (fused) {
      fused_ = std::make_unique<FusedPolicy>();
      fused_loss_ = std::make_unique<FusedPpoLoss>();
      fused_buffers_ = std::make_unique<FusedBuffers>();
    }
    ASSIGN_OR_RETURN(graphed_, UseCudaGraphs());
    epochs_ = fused      ? &PpoUpdater::RunEpochsFused
              : graphed_ ? &PpoUpdater::RunEpochsGraphed
                         : &PpoUpdater::RunEpochs;
  }
  ASSIGN_OR_RETURN(
      EpochResult epochs,
      CatchTorchErrors("PPO update", [&]() -> absl::StatusOr<EpochResult> {
        ASSIGN_OR_RETURN(const Plan plan,
                         MakePlan(rollout, env_steps_done, gang_sums));
        return (this->*epochs_)(rollout, plan);
      }));
  UpdateStats stats = epochs.stats;
  const int64_t non_finite = epochs.non_finite;
  const torch::Tensor observations = std::move(epochs.flat_observations);
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
  // Summed in the planning all-reduce.
  if (gang_observation_moments_.defined()) {
    RETURN_IF_ERROR(
        policy_->MergeObservationMoments(gang_observation_moments_));
  }
  return stats;
}

absl::StatusOr<PpoUpdater::Plan> PpoUpdater::MakePlan(
    const Rollout& rollout, int64_t env_steps_done,
    std::vector<double>* gang_sums) {
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const int64_t batch = T * E;
  Plan plan;
  // GAE where the rollout is: the host loop over a CPU-resident one, tensor
  // kernels on the device over one collected there (actor/device_collector).
  const auto gae_start = std::chrono::steady_clock::now();
  const Rollout& r = rollout;
  if (r.rewards.is_cpu()) {
    plan.advantages = torch::empty({batch});
    plan.returns = torch::empty({batch});
    ComputeGae(
        {T, E, r.rewards.data_ptr<float>(), r.values.data_ptr<float>(),
         r.next_values.data_ptr<float>(), r.terminated.data_ptr<uint8_t>(),
         r.truncated.data_ptr<uint8_t>(), r.truncated_values.data_ptr<float>()},
        config_.gamma(), config_.gae_lambda(),
        plan.advantages.data_ptr<float>(), plan.returns.data_ptr<float>());
  } else {
    std::tie(plan.advantages, plan.returns) = ComputeGaeTensors(
        r.rewards, r.values, r.next_values, r.terminated, r.truncated,
        r.truncated_values, config_.gamma(), config_.gae_lambda());
  }
  plan.gae_seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - gae_start)
                         .count();

  plan.lr = config_.learning_rate();
  if (config_.anneal_learning_rate()) {
    const double frac =
        1.0 - static_cast<double>(env_steps_done) / total_env_steps_;
    plan.lr *= std::max(frac, 0.0);
  }
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(plan.lr);
  }

  const int64_t num_minibatches = config_.num_minibatches();
  const int num_epochs = config_.num_epochs();
  plan.minibatch = batch / num_minibatches;
  plan.orders.reserve(num_epochs);
  // A rollout collected on a GPU is shuffled there: a permutation of its
  // 10^5-10^6 rows on the host costs more than its update. One draw of the
  // host's stream seeds the device's, so a checkpoint's stream stays the
  // host generator's alone.
  const torch::Device where = rollout.rewards.device();
  const bool shuffle_on_device = where.is_cuda() && !policy_->recurrent();
  if (shuffle_on_device) {
    uint64_t seed = 0;
    {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      seed = at::check_generator<at::CPUGeneratorImpl>(generator_)->random64();
    }
    if (!device_generator_.defined()) {
      device_generator_ =
          at::detail::getCUDAHooks().getNewGenerator(where.index());
    }
    device_generator_.set_current_seed(seed);
  }
  for (int e = 0; e < num_epochs; ++e) {
    if (shuffle_on_device) {
      plan.orders.push_back(torch::randperm(
          batch, device_generator_,
          torch::TensorOptions().dtype(torch::kInt64).device(where)));
      continue;
    }
    if (!policy_->recurrent()) {
      plan.orders.push_back(torch::randperm(batch, generator_));
      continue;
    }
    // Whole env sequences: minibatch m holds the rows of envs
    // perm[m * k, (m + 1) * k), time-major (t * E + env), so that its
    // first k entries name its envs.
    const int64_t k = E / num_minibatches;
    const torch::Tensor envs =
        torch::randperm(E, generator_).view({num_minibatches, 1, k});
    const torch::Tensor steps = (torch::arange(T) * E).view({1, T, 1});
    plan.orders.push_back((steps + envs).reshape({batch}));
  }
  // This rank's share of every global minibatch (1 alone).
  plan.global_minibatch = plan.minibatch;
  plan.share = 1.0;
  gang_observation_moments_ = torch::Tensor();
  if (collective_ == nullptr) return plan;

  // The planning all-reduce, float64 sums: [this rank's minibatch size,
  // advantage moments (2 per minibatch of every epoch), observation
  // moments (1 + 2 * obs), the caller's gang_sums].
  const bool normalize = config_.normalize_advantages();
  const int64_t num_moments = normalize ? 2 * num_epochs * num_minibatches : 0;
  torch::Tensor observation_moments;
  if (policy_->config().normalize_observations) {
    auto moments =
        policy_->ObservationMoments(rollout.observations.reshape({batch, -1}));
    RETURN_IF_ERROR(moments.status());
    observation_moments = *std::move(moments);
  }
  const int64_t num_observation =
      observation_moments.defined() ? observation_moments.numel() : 0;
  const int64_t num_extra =
      gang_sums != nullptr ? static_cast<int64_t>(gang_sums->size()) : 0;
  torch::Tensor sums = torch::zeros(
      {1 + num_moments + num_observation + num_extra}, torch::kFloat64);
  double* v = sums.data_ptr<double>();
  v[0] = static_cast<double>(plan.minibatch);
  if (normalize) {
    const torch::Tensor host_advantages = plan.advantages.cpu();
    const float* adv = host_advantages.data_ptr<float>();
    for (int e = 0; e < num_epochs; ++e) {
      const torch::Tensor host_order = plan.orders[e].cpu();
      const int64_t* order = host_order.data_ptr<int64_t>();
      for (int64_t m = 0; m < num_minibatches; ++m) {
        double sum = 0, sum_sq = 0;
        for (int64_t i = 0; i < plan.minibatch; ++i) {
          const double a = adv[order[m * plan.minibatch + i]];
          sum += a;
          sum_sq += a * a;
        }
        double* slot = v + 1 + 2 * (e * num_minibatches + m);
        slot[0] = sum;
        slot[1] = sum_sq;
      }
    }
  }
  if (num_observation > 0) {
    std::memcpy(v + 1 + num_moments,
                observation_moments.contiguous().data_ptr<double>(),
                num_observation * sizeof(double));
  }
  if (num_extra > 0) {
    std::memcpy(v + 1 + num_moments + num_observation, gang_sums->data(),
                num_extra * sizeof(double));
  }
  RETURN_IF_ERROR(collective_->AllReduce(sums, ReduceOp::kSum));

  plan.global_minibatch = static_cast<int64_t>(v[0]);
  plan.share = static_cast<double>(plan.minibatch) / plan.global_minibatch;
  plan.advantage_moments.assign(v + 1, v + 1 + num_moments);
  if (num_observation > 0) {
    gang_observation_moments_ =
        sums.narrow(0, 1 + num_moments, num_observation).clone();
  }
  if (num_extra > 0) {
    std::memcpy(gang_sums->data(), v + 1 + num_moments + num_observation,
                num_extra * sizeof(double));
  }
  return plan;
}

std::pair<double, double> PpoUpdater::GangAdvantageMoments(const Plan& plan,
                                                           int64_t index) {
  // As LibTorch's (a - a.mean()) / (a.std() + 1e-8), std unbiased.
  const double n = static_cast<double>(plan.global_minibatch);
  const double mean = plan.advantage_moments[2 * index] / n;
  const double var =
      (plan.advantage_moments[2 * index + 1] - n * mean * mean) / (n - 1);
  return {mean, std::sqrt(std::max(var, 0.0))};
}

absl::StatusOr<PpoUpdater::EpochResult> PpoUpdater::RunEpochs(
    const Rollout& rollout, const Plan& plan) {
  std::vector<torch::Tensor> orders;
  StepTensors t = DeviceRollout(rollout, plan, &orders);
  ZeroSums(t);
  const StepShape shape = ShapeOf(rollout, plan);
  const int64_t num_minibatches = config_.num_minibatches();
  int64_t minibatches_run = 0;
  int epochs = 0;
  for (int epoch = 0; epoch < config_.num_epochs(); ++epoch) {
    t.epoch_kl.zero_();
    for (int64_t m = 0; m < num_minibatches; ++m) {
      t.idx = orders[epoch].narrow(0, m * shape.minibatch, shape.minibatch);
      RETURN_IF_ERROR(MinibatchStep(t, shape,
                                    collective_ != nullptr ? &plan : nullptr,
                                    epoch * num_minibatches + m,
                                    /*graphed=*/false));
      ++minibatches_run;
    }
    ++epochs;
    ASSIGN_OR_RETURN(const bool stop, StopForKl(t.epoch_kl));
    if (stop) break;
  }
  return Result(t, plan, minibatches_run, epochs);
}

absl::StatusOr<PpoUpdater::EpochResult> PpoUpdater::RunEpochsFused(
    const Rollout& rollout, const Plan& plan) {
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const int64_t batch = T * E;
  // The parameters' storage may have been replaced (a checkpoint loaded).
  RETURN_IF_ERROR(fused_->Bind(policy_));
  const int64_t num_minibatches = config_.num_minibatches();
  const int64_t mb = plan.minibatch;
  const int d = fused_->observation_size();
  const int a = fused_->discrete() ? 1 : fused_->head_size();
  const float* obs = rollout.observations.data_ptr<float>();
  const int64_t* discrete_actions =
      fused_->discrete() ? rollout.actions.data_ptr<int64_t>() : nullptr;
  const float* continuous_actions =
      fused_->discrete() ? nullptr : rollout.actions.data_ptr<float>();
  const float* old_log_probs = rollout.log_probs.data_ptr<float>();
  const float* old_values = rollout.values.data_ptr<float>();
  const float* advantages = plan.advantages.data_ptr<float>();
  const float* returns = plan.returns.data_ptr<float>();

  // Gathered minibatch rows, and the flat gradient with one more slot for
  // the not-finite flag that rides in a gang's bucket.
  FusedBuffers& b = *fused_buffers_;
  b.observations.resize(mb * d);
  b.actions.resize(mb * a);
  b.discrete_actions.resize(mb);
  b.old_log_probs.resize(mb);
  b.old_values.resize(mb);
  b.advantages.resize(mb);
  b.returns.resize(mb);
  const int64_t num_params = fused_->num_parameters();
  b.grads.assign(num_params + 1, 0.0f);
  const std::vector<torch::Tensor> params = policy_->parameters();
  const bool normalize =
      config_.normalize_advantages() && plan.global_minibatch > 1;
  const float clip_norm = config_.max_grad_norm();

  double sum_policy_loss = 0, sum_value_loss = 0, sum_entropy = 0, sum_kl = 0,
         sum_clip = 0, sum_grad_norm = 0;
  int64_t bad_minibatches = 0, minibatches_run = 0;
  int epochs = 0;
  for (int epoch = 0; epoch < config_.num_epochs(); ++epoch) {
    const int64_t* idx_all = plan.orders[epoch].data_ptr<int64_t>();
    double epoch_kl = 0;
    for (int64_t m = 0; m < num_minibatches; ++m) {
      const int64_t* idx = idx_all + m * mb;
      double adv_sum = 0;
      for (int64_t i = 0; i < mb; ++i) {
        const int64_t row = idx[i];
        std::memcpy(b.observations.data() + i * d, obs + row * d,
                    d * sizeof(float));
        if (discrete_actions != nullptr) {
          b.discrete_actions[i] = discrete_actions[row];
        } else {
          std::memcpy(b.actions.data() + i * a, continuous_actions + row * a,
                      a * sizeof(float));
        }
        b.old_log_probs[i] = old_log_probs[row];
        b.old_values[i] = old_values[row];
        b.advantages[i] = advantages[row];
        b.returns[i] = returns[row];
        adv_sum += advantages[row];
      }
      if (normalize) {
        // As LibTorch: (a - mean) / (std + 1e-8), std unbiased.
        double mean, std;
        if (collective_ == nullptr) {
          mean = adv_sum / mb;
          double ss = 0;
          for (int64_t i = 0; i < mb; ++i) {
            ss += (b.advantages[i] - mean) * (b.advantages[i] - mean);
          }
          std = std::sqrt(ss / (mb - 1));
        } else {
          std::tie(mean, std) =
              GangAdvantageMoments(plan, epoch * num_minibatches + m);
        }
        const float fmean = static_cast<float>(mean);
        const float fstd = static_cast<float>(std);
        for (int64_t i = 0; i < mb; ++i) {
          b.advantages[i] = (b.advantages[i] - fmean) / (fstd + 1e-8f);
        }
      }
      PpoMinibatch minibatch;
      minibatch.size = mb;
      minibatch.observations = b.observations.data();
      minibatch.discrete_actions = b.discrete_actions.data();
      minibatch.continuous_actions = b.actions.data();
      minibatch.old_log_probs = b.old_log_probs.data();
      minibatch.old_values = b.old_values.data();
      minibatch.advantages = b.advantages.data();
      minibatch.returns = b.returns.data();
      const PpoLossValues terms =
          fused_loss_->Compute(*fused_, config_, minibatch, b.grads.data());
      float* grads = b.grads.data();
      grads[num_params] = terms.finite ? 0.0f : 1.0f;
      if (collective_ != nullptr) {
        const float share = static_cast<float>(plan.share);
        for (int64_t i = 0; i < num_params; ++i) grads[i] *= share;
        torch::Tensor bucket =
            torch::from_blob(grads, {num_params + 1}, torch::kFloat32);
        RETURN_IF_ERROR(collective_->AllReduce(bucket, ReduceOp::kSum));
      }
      double sq = 0;
      for (int64_t i = 0; i < num_params; ++i)
        sq += double(grads[i]) * grads[i];
      const float grad_norm = static_cast<float>(std::sqrt(sq));
      if (clip_norm > 0) {
        const float scale = std::min(clip_norm / (grad_norm + 1e-6f), 1.0f);
        for (int64_t i = 0; i < num_params; ++i) grads[i] *= scale;
      }
      const bool bad = grads[num_params] > 0 || !std::isfinite(grad_norm);
      if (bad) {
        // Zeroed, not skipped: Adam's moments still decay, as on the
        // LibTorch path.
        std::fill(grads, grads + num_params, 0.0f);
        ++bad_minibatches;
      }
      RETURN_IF_ERROR(FusedAdamStep(*optimizer_, params, grads));
      epoch_kl += terms.approx_kl * plan.share;
      sum_policy_loss += terms.policy_loss;
      sum_value_loss += terms.value_loss;
      sum_entropy += terms.entropy;
      sum_kl += terms.approx_kl;
      sum_clip += terms.clip_fraction;
      sum_grad_norm += grad_norm;
      ++minibatches_run;
    }
    ++epochs;
    if (config_.target_kl() > 0) {
      double kl = epoch_kl;
      if (collective_ != nullptr) {
        torch::Tensor t = torch::from_blob(&kl, {1}, torch::kFloat64);
        RETURN_IF_ERROR(collective_->AllReduce(t, ReduceOp::kSum));
      }
      if (kl / num_minibatches > config_.target_kl()) break;
    }
  }

  EpochResult result;
  UpdateStats& stats = result.stats;
  const double n = static_cast<double>(std::max<int64_t>(minibatches_run, 1));
  stats.policy_loss = sum_policy_loss / n;
  stats.value_loss = sum_value_loss / n;
  stats.entropy = sum_entropy / n;
  stats.approx_kl = sum_kl / n;
  stats.clip_fraction = sum_clip / n;
  stats.grad_norm = sum_grad_norm / n;
  result.non_finite = bad_minibatches;
  // Explained variance: 1 - Var(returns - values) / Var(returns).
  double ret_mean = 0, res_mean = 0;
  for (int64_t i = 0; i < batch; ++i) {
    ret_mean += returns[i];
    res_mean += returns[i] - old_values[i];
  }
  ret_mean /= batch;
  res_mean /= batch;
  double ret_var = 0, res_var = 0;
  for (int64_t i = 0; i < batch; ++i) {
    ret_var += (returns[i] - ret_mean) * (returns[i] - ret_mean);
    const double res = returns[i] - old_values[i] - res_mean;
    res_var += res * res;
  }
  stats.explained_variance = ret_var == 0 ? 0.0 : 1 - res_var / ret_var;
  stats.learning_rate = plan.lr;
  stats.epochs = epochs;
  stats.gae_seconds = plan.gae_seconds;
  result.flat_observations = rollout.observations.reshape({batch, -1});
  return result;
}

}  // namespace rl
