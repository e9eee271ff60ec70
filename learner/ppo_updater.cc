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
#include "learner/ppo_eager_step.h"
#include "learner/ppo_fused_step.h"
#include "learner/ppo_graphed_step.h"
#include "learner/ppo_minibatch.h"
#include "learner/rollout_check.h"
#include "policy/compute_device.h"
#include "policy/torch_status.h"

namespace rl {

torch::Tensor WholeCopies(const torch::Tensor& copies, int64_t agents) {
  if (agents <= 1) return copies;
  return (copies.unsqueeze(1) * agents +
          torch::arange(agents, copies.options()).unsqueeze(0))
      .reshape({-1});
}

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
  if (strategy_ == nullptr) {
    RETURN_IF_ERROR(ChooseStrategy(rollout.alive.defined()));
  }
  ASSIGN_OR_RETURN(
      EpochResult epochs,
      CatchTorchErrors("PPO update", [&]() -> absl::StatusOr<EpochResult> {
        ASSIGN_OR_RETURN(const UpdatePlan plan,
                         MakePlan(rollout, env_steps_done, gang_sums));
        return RunEpochs(rollout, plan);
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
    // An update of padding only (agents that left early) saw no observation.
    if (observations.size(0) > 0) {
      RETURN_IF_ERROR(policy_->UpdateObservationStatistics(observations));
    }
    return stats;
  }
  // Summed in the planning all-reduce.
  if (gang_observation_moments_.defined()) {
    RETURN_IF_ERROR(
        policy_->MergeObservationMoments(gang_observation_moments_));
  }
  return stats;
}

absl::StatusOr<UpdatePlan> PpoUpdater::MakePlan(
    const Rollout& rollout, int64_t env_steps_done,
    std::vector<double>* gang_sums) {
  const int64_t T = rollout.num_steps(), E = rollout.num_envs();
  const int64_t batch = T * E;
  UpdatePlan plan;
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
  // A central critic values whole environment copies: the rows shuffle
  // copy by copy (a copy's `agents` rows stay together, in agent order),
  // and a minibatch holds whole copies (the run spec's rule).
  const int64_t agents = std::max(1, policy_->config().central_value_agents);
  for (int e = 0; e < num_epochs; ++e) {
    if (shuffle_on_device) {
      plan.orders.push_back(WholeCopies(
          torch::randperm(
              batch / agents, device_generator_,
              torch::TensorOptions().dtype(torch::kInt64).device(where)),
          agents));
      continue;
    }
    if (!policy_->recurrent()) {
      plan.orders.push_back(
          WholeCopies(torch::randperm(batch / agents, generator_), agents));
      continue;
    }
    // Whole env sequences: minibatch m holds the rows of envs
    // perm[m * k, (m + 1) * k), time-major (t * E + env), so that its
    // first k entries name its envs; with a central critic, of whole
    // copies in agent order.
    const int64_t k = E / num_minibatches;
    const torch::Tensor envs =
        WholeCopies(torch::randperm(E / agents, generator_), agents)
            .view({num_minibatches, 1, k});
    const torch::Tensor steps = (torch::arange(T) * E).view({1, T, 1});
    plan.orders.push_back((steps + envs).reshape({batch}));
  }
  // This rank's share of every global minibatch (1 alone).
  plan.global_minibatch = plan.minibatch;
  plan.share = 1.0;
  gang_observation_moments_ = torch::Tensor();
  if (collective_ == nullptr) return plan;

  // The planning all-reduce, float64 sums: [this rank's minibatch size,
  // advantage moments (2 per minibatch of every epoch), with agents that
  // leave early the alive rows (1 per minibatch of every epoch),
  // observation moments (1 + 2 * obs), the caller's gang_sums]. Padding
  // rows count in no moment.
  const bool normalize = config_.normalize_advantages();
  const bool weighted = rollout.alive.defined();
  const int64_t num_moments = normalize ? 2 * num_epochs * num_minibatches : 0;
  const int64_t num_counts = weighted ? num_epochs * num_minibatches : 0;
  const torch::Tensor host_alive =
      weighted ? rollout.alive.reshape({batch}).cpu().contiguous()
               : torch::Tensor();
  const uint8_t* alive = weighted ? host_alive.data_ptr<uint8_t>() : nullptr;
  torch::Tensor observation_moments;
  if (policy_->config().normalize_observations) {
    torch::Tensor observations = rollout.observations.reshape({batch, -1});
    if (weighted) {
      observations = observations.index_select(
          0, rollout.alive.reshape({batch}).nonzero().squeeze(1));
    }
    auto moments = policy_->ObservationMoments(observations);
    RETURN_IF_ERROR(moments.status());
    observation_moments = *std::move(moments);
  }
  const int64_t num_observation =
      observation_moments.defined() ? observation_moments.numel() : 0;
  const int64_t num_extra =
      gang_sums != nullptr ? static_cast<int64_t>(gang_sums->size()) : 0;
  // Where each part of the layout above begins.
  const int64_t counts_at = 1 + num_moments;
  const int64_t observation_at = counts_at + num_counts;
  const int64_t extra_at = observation_at + num_observation;
  torch::Tensor sums = torch::zeros({extra_at + num_extra}, torch::kFloat64);
  double* v = sums.data_ptr<double>();
  v[0] = static_cast<double>(plan.minibatch);
  double* const counts = v + counts_at;
  std::vector<double> own_counts(num_counts);
  if (normalize || weighted) {
    torch::Tensor host_advantages;
    const float* adv = nullptr;
    if (normalize) {
      host_advantages = plan.advantages.cpu().contiguous();
      adv = host_advantages.data_ptr<float>();
    }
    for (int e = 0; e < num_epochs; ++e) {
      const torch::Tensor host_order = plan.orders[e].cpu().contiguous();
      const int64_t* order = host_order.data_ptr<int64_t>();
      for (int64_t m = 0; m < num_minibatches; ++m) {
        double sum = 0, sum_sq = 0, count = 0;
        for (int64_t i = 0; i < plan.minibatch; ++i) {
          const int64_t row = order[m * plan.minibatch + i];
          if (alive != nullptr && alive[row] == 0) continue;
          count += 1;
          if (adv == nullptr) continue;
          const double a = adv[row];
          sum += a;
          sum_sq += a * a;
        }
        const int64_t index = e * num_minibatches + m;
        if (normalize) {
          v[1 + 2 * index] = sum;
          v[2 + 2 * index] = sum_sq;
        }
        if (weighted) counts[index] = own_counts[index] = count;
      }
    }
  }
  if (num_observation > 0) {
    std::memcpy(v + observation_at,
                observation_moments.contiguous().data_ptr<double>(),
                num_observation * sizeof(double));
  }
  if (num_extra > 0) {
    std::memcpy(v + extra_at, gang_sums->data(), num_extra * sizeof(double));
  }
  RETURN_IF_ERROR(collective_->AllReduce(sums, ReduceOp::kSum));

  plan.global_minibatch = static_cast<int64_t>(v[0]);
  plan.share = static_cast<double>(plan.minibatch) / plan.global_minibatch;
  plan.advantage_moments.assign(v + 1, v + 1 + num_moments);
  if (weighted) {
    plan.alive_counts.assign(counts, counts + num_counts);
    plan.alive_shares.resize(num_counts);
    for (int64_t i = 0; i < num_counts; ++i) {
      plan.alive_shares[i] = counts[i] > 0 ? own_counts[i] / counts[i] : 0.0;
    }
  }
  if (num_observation > 0) {
    gang_observation_moments_ =
        sums.narrow(0, observation_at, num_observation).clone();
  }
  if (num_extra > 0) {
    std::memcpy(gang_sums->data(), v + extra_at, num_extra * sizeof(double));
  }
  return plan;
}

std::pair<double, double> GangAdvantageMoments(const UpdatePlan& plan,
                                               int64_t index) {
  // As LibTorch's (a - a.mean()) / (a.std() + 1e-8), std unbiased; with
  // agents that leave early, over the alive rows.
  const double n = plan.alive_counts.empty()
                       ? static_cast<double>(plan.global_minibatch)
                       : plan.alive_counts[index];
  if (n <= 0) return {0.0, 0.0};
  const double mean = plan.advantage_moments[2 * index] / n;
  const double var =
      n > 1
          ? (plan.advantage_moments[2 * index + 1] - n * mean * mean) / (n - 1)
          : 0.0;
  return {mean, std::sqrt(std::max(var, 0.0))};
}

absl::Status PpoUpdater::ChooseStrategy(bool weighted) {
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
  // The fused minibatches leave the rows of agents that left out, and a
  // central critic values whole copies.
  if (fusable && weighted && policy_->config().central_value_agents > 1) {
    constexpr char kWhy[] =
        "a central critic (policy.central_value) values whole copies, and "
        "the fused minibatches leave out the rows of agents that left "
        "(env.agents_leave)";
    if (execution_.cpu_kernels() == "fused") {
      return absl::FailedPreconditionError(
          absl::StrCat("execution.cpu_kernels: fused: ", kWhy));
    }
    RL_LOG_INFO("updates run on LibTorch: {}", kWhy);
    fusable = false;
  }
  const bool fused = fusable && !bfloat16_;
  StepGraphRequest request;
  request.mode = execution_.cuda_graphs();
  request.device = policy_->device();
  request.gang = collective_ != nullptr;
  request.recurrent = policy_->recurrent();
  request.bfloat16 = bfloat16_;
  request.fused = fused;
  request.weighted = weighted;
  request.deferred_for_testing = deferred_graphs_for_testing_;
  request.fail_capture_for_testing = fail_capture_for_testing_;
  ASSIGN_OR_RETURN(std::unique_ptr<StepGraph> graph, NewStepGraphFor(request));
  if (fused) {
    strategy_ =
        std::make_unique<FusedMinibatches>(policy_, config_, optimizer_.get());
    return absl::OkStatus();
  }
  TorchMinibatchStep step(policy_, config_, loss_terms_, optimizer_.get(),
                          bfloat16_);
  if (graph != nullptr) {
    strategy_ = std::make_unique<GraphedMinibatches>(
        std::move(step), std::move(request), std::move(graph));
  } else {
    strategy_ = std::make_unique<EagerMinibatches>(std::move(step));
  }
  return absl::OkStatus();
}

absl::StatusOr<EpochResult> PpoUpdater::RunEpochs(const Rollout& rollout,
                                                  const UpdatePlan& plan) {
  MinibatchStrategy& strategy = *strategy_;
  RETURN_IF_ERROR(strategy.BeginUpdate(rollout, plan, collective_));
  const int64_t num_minibatches = config_.num_minibatches();
  int64_t minibatches_run = 0;
  int epochs = 0;
  for (int epoch = 0; epoch < config_.num_epochs(); ++epoch) {
    strategy.BeginEpoch(epoch);
    for (int64_t m = 0; m < num_minibatches; ++m) {
      RETURN_IF_ERROR(strategy.Step(epoch, m));
      ++minibatches_run;
    }
    ++epochs;
    ASSIGN_OR_RETURN(const bool stop, StopForKl());
    if (stop) break;
  }
  return strategy.Finish(rollout, plan, minibatches_run, epochs);
}

absl::StatusOr<bool> PpoUpdater::StopForKl() {
  if (config_.target_kl() <= 0) return false;
  // The global mean KL, so that every rank stops at the same epoch.
  torch::Tensor kl = strategy_->EpochKl();
  if (collective_ != nullptr) {
    RETURN_IF_ERROR(collective_->AllReduce(kl, ReduceOp::kSum));
  }
  return kl.item<double>() / config_.num_minibatches() > config_.target_kl();
}

}  // namespace rl
