#include "policy/fused_rows.h"

#include <vector>

namespace rl {

void FusedRows::Act(const torch::Tensor& observations,
                    const torch::Tensor& rows, at::CPUGeneratorImpl* generator,
                    torch::Tensor actions, torch::Tensor log_probs,
                    torch::Tensor values) {
  const int64_t k = rows.numel();
  if (!values_.defined() || values_.numel() != k ||
      observations_.size(1) != observations.size(1) ||
      actions_.dtype() != actions.dtype() ||
      actions_.sizes().slice(1) != actions.sizes().slice(1)) {
    std::vector<int64_t> shape = actions.sizes().vec();
    shape[0] = k;
    observations_ = torch::empty({k, observations.size(1)}, torch::kFloat32);
    actions_ = torch::empty(shape, actions.dtype());
    log_probs_ = torch::empty({k}, torch::kFloat32);
    values_ = torch::empty({k}, torch::kFloat32);
  }
  torch::index_select_out(observations_, observations, 0, rows);
  kernels_.Act(observations_.data_ptr<float>(), k, generator,
               /*deterministic=*/false, actions_.data_ptr(),
               log_probs_.data_ptr<float>(), values_.data_ptr<float>());
  actions.index_copy_(0, rows, actions_);
  if (log_probs.defined()) log_probs.index_copy_(0, rows, log_probs_);
  if (values.defined()) values.index_copy_(0, rows, values_);
}

}  // namespace rl
