// ActorCriticImpl's running observation statistics (policy.normalize_
// observations, ppo.normalize_observations): a batch's moments folded in
// (Chan et al.'s parallel variance), alone or summed over a gang.
// Part of the actor_critic library.
#include "common/status.h"
#include "policy/actor_critic.h"
#include "policy/torch_status.h"

namespace rl {

absl::Status ActorCriticImpl::UpdateObservationStatistics(
    const torch::Tensor& observations) {
  if (!config_.normalize_observations) return absl::OkStatus();
  RETURN_IF_ERROR(
      CheckObservations(observations, "observation statistics batch"));
  if (observations.size(0) == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CheckFinite(observations, "observation statistics batch"));
  return CatchTorchErrors("updating the observation statistics", [&] {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = FloatObservations(observations).to(torch::kFloat64);
    const torch::Tensor batch_mean = x.mean(0);
    const torch::Tensor batch_var = x.var(0, /*unbiased=*/false);
    FoldBatchStatistics(static_cast<double>(x.size(0)), batch_mean, batch_var);
  });
}

void ActorCriticImpl::FoldBatchStatistics(double batch_count,
                                          const torch::Tensor& batch_mean,
                                          const torch::Tensor& batch_var) {
  // The batch's moments may come from another device (a gang's, summed on
  // the host).
  const torch::Tensor mean = batch_mean.to(obs_mean_.device());
  const torch::Tensor var = batch_var.to(obs_mean_.device());
  const torch::Tensor count = obs_count_;
  const torch::Tensor total = count + batch_count;
  const torch::Tensor delta = mean - obs_mean_.to(torch::kFloat64);
  const torch::Tensor new_mean =
      obs_mean_.to(torch::kFloat64) + delta * batch_count / total;
  const torch::Tensor m2 = obs_var_.to(torch::kFloat64) * count +
                           var * batch_count +
                           delta * delta * count * batch_count / total;
  obs_mean_.copy_(new_mean);
  obs_var_.copy_(m2 / total);
  obs_count_.copy_(total);
}

absl::StatusOr<torch::Tensor> ActorCriticImpl::ObservationMoments(
    const torch::Tensor& observations) {
  RETURN_IF_ERROR(CheckObservations(observations, "observation moments batch"));
  RETURN_IF_ERROR(CheckFinite(observations, "observation moments batch"));
  return CatchTorchErrors("observation moments", [&] {
    torch::NoGradGuard no_grad;
    const torch::Tensor x = FloatObservations(observations).to(torch::kFloat64);
    return torch::cat(
        {torch::full({1}, static_cast<double>(x.size(0)), torch::kFloat64),
         x.sum(0), x.pow(2).sum(0)});
  });
}

absl::Status ActorCriticImpl::MergeObservationMoments(
    const torch::Tensor& moments) {
  if (!config_.normalize_observations) return absl::OkStatus();
  const int64_t d = config_.observation_size;
  RETURN_IF_ERROR(CheckTensor(moments, "observation moments", torch::kFloat64,
                              {1 + 2 * d}));
  RETURN_IF_ERROR(CheckFinite(moments, "observation moments"));
  return CatchTorchErrors("merging the observation moments", [&] {
    torch::NoGradGuard no_grad;
    const double batch_count = moments[0].item<double>();
    if (batch_count <= 0) return;
    const torch::Tensor batch_mean = moments.narrow(0, 1, d) / batch_count;
    const torch::Tensor batch_var = torch::clamp_min(
        moments.narrow(0, 1 + d, d) / batch_count - batch_mean * batch_mean,
        0.0);
    FoldBatchStatistics(batch_count, batch_mean, batch_var);
  });
}

}  // namespace rl
