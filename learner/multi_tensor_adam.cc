#include "learner/multi_tensor_adam.h"

#include <memory>
#include <tuple>

#include "ATen/ops/_foreach_add.h"
#include "ATen/ops/_fused_adam.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace rl {

torch::optim::AdamParamState& AdamStateFor(torch::optim::Adam& optimizer,
                                           const torch::Tensor& p) {
  auto& states = optimizer.state();
  auto it = states.find(p.unsafeGetTensorImpl());
  if (it == states.end()) {
    auto state = std::make_unique<torch::optim::AdamParamState>();
    state->step(0);
    state->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    state->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    it = states.emplace(p.unsafeGetTensorImpl(), std::move(state)).first;
  }
  return static_cast<torch::optim::AdamParamState&>(*it->second);
}

absl::Status CheckPlainAdam(const torch::optim::Adam& optimizer) {
  if (optimizer.param_groups().size() != 1) {
    return absl::FailedPreconditionError(
        "the Adam step here needs one parameter group");
  }
  const auto& options = static_cast<const torch::optim::AdamOptions&>(
      optimizer.param_groups()[0].options());
  if (options.weight_decay() != 0 || options.amsgrad()) {
    return absl::FailedPreconditionError(
        "the Adam step here does no weight decay and no amsgrad");
  }
  return absl::OkStatus();
}

absl::Status MultiTensorAdam::Prepare() {
  RETURN_IF_ERROR(CheckPlainAdam(*optimizer_));
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor>& params =
      optimizer_->param_groups()[0].params();
  if (device_steps_.size() != params.size()) {
    device_steps_.assign(params.size(), torch::Tensor());
    host_steps_.assign(params.size(), -1);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& p = params[i];
    torch::optim::AdamParamState& state = AdamStateFor(*optimizer_, p);
    if (state.step() != host_steps_[i] || !device_steps_[i].defined() ||
        device_steps_[i].device() != p.device()) {
      device_steps_[i] = torch::full(
          {}, static_cast<double>(state.step()),
          torch::TensorOptions().dtype(torch::kFloat32).device(p.device()));
      host_steps_[i] = state.step();
      ++generation_;
    }
  }
  return absl::OkStatus();
}

void MultiTensorAdam::StepKernels(const torch::Tensor& lr) {
  torch::NoGradGuard no_grad;
  const auto& group = optimizer_->param_groups()[0];
  const auto& options =
      static_cast<const torch::optim::AdamOptions&>(group.options());
  const std::vector<torch::Tensor>& params = group.params();
  std::vector<torch::Tensor> grads, exp_avgs, exp_avg_sqs;
  grads.reserve(params.size());
  exp_avgs.reserve(params.size());
  exp_avg_sqs.reserve(params.size());
  for (const torch::Tensor& p : params) {
    torch::optim::AdamParamState& state = AdamStateFor(*optimizer_, p);
    grads.push_back(p.grad());
    exp_avgs.push_back(state.exp_avg());
    exp_avg_sqs.push_back(state.exp_avg_sq());
  }
  // at::_fused_adam_ reads the step counts; it does not count them (torch's
  // Python Adam adds the 1 first too).
  at::_foreach_add_(device_steps_, 1);
  if (lr.defined()) {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, {}, device_steps_,
                     lr, std::get<0>(options.betas()),
                     std::get<1>(options.betas()), options.weight_decay(),
                     options.eps(), /*amsgrad=*/false, /*maximize=*/false);
  } else {
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, {}, device_steps_,
                     options.lr(), std::get<0>(options.betas()),
                     std::get<1>(options.betas()), options.weight_decay(),
                     options.eps(), /*amsgrad=*/false, /*maximize=*/false);
  }
}

void MultiTensorAdam::CountStep() {
  const std::vector<torch::Tensor>& params =
      optimizer_->param_groups()[0].params();
  for (size_t i = 0; i < params.size(); ++i) {
    torch::optim::AdamParamState& state = AdamStateFor(*optimizer_, params[i]);
    state.step(state.step() + 1);
    host_steps_[i] = state.step();
  }
}

absl::Status MultiTensorAdam::Step() {
  RETURN_IF_ERROR(CheckPlainAdam(*optimizer_));
  // Every gradient first: a refused step changes no count.
  const std::vector<torch::Tensor>& params =
      optimizer_->param_groups()[0].params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined()) {
      return absl::FailedPreconditionError(
          absl::StrCat("parameter ", i, " of ", params.size(),
                       " has no gradient for the Adam step"));
    }
  }
  RETURN_IF_ERROR(Prepare());
  StepKernels(torch::Tensor());
  // The host's counts follow once the device's did.
  CountStep();
  return absl::OkStatus();
}

}  // namespace rl
