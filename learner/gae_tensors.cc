#include "learner/gae_tensors.h"

#include <torch/torch.h>

namespace rl {

std::pair<torch::Tensor, torch::Tensor> ComputeGaeTensors(
    const torch::Tensor& rewards, const torch::Tensor& values,
    const torch::Tensor& next_values, const torch::Tensor& terminated,
    const torch::Tensor& truncated, const torch::Tensor& truncated_values,
    float gamma, float lambda) {
  torch::NoGradGuard no_grad;
  const int64_t T = rewards.size(0);
  const torch::Tensor term = terminated.to(torch::kBool);
  const torch::Tensor trunc = truncated.to(torch::kBool) & ~term;
  const torch::Tensor next_v =
      torch::cat({values.narrow(0, 1, T - 1), next_values.unsqueeze(0)}, 0);
  const torch::Tensor bootstrap =
      torch::where(term, torch::zeros_like(values),
                   torch::where(trunc, truncated_values, next_v));
  // delta_t = r_t + gamma * bootstrap_t - V(s_t), as the host loop rounds it.
  const torch::Tensor delta = (rewards + bootstrap * gamma) - values;
  // A_t = delta_t + c_t * A_{t+1}, c_t = gamma * lambda inside an episode.
  const torch::Tensor coef =
      (~(term | trunc)).to(values.scalar_type()) * (gamma * lambda);
  torch::Tensor advantages = torch::empty_like(values);
  advantages[T - 1].copy_(delta[T - 1]);
  for (int64_t t = T - 2; t >= 0; --t) {
    torch::Tensor row = advantages[t];
    torch::addcmul_out(row, delta[t], coef[t], advantages[t + 1]);
  }
  torch::Tensor returns = advantages + values;
  return {advantages.reshape({-1}), returns.reshape({-1})};
}

}  // namespace rl
