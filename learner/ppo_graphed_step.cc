// The CUDA-graphed minibatch strategy (learner/ppo_graphed_step.h). Part of
// the ppo_updater library.
//
// The CUDA graph itself never ran on a GPU yet. Its CPU stand-in
// (DeferredStepGraph) runs this same code in the tests, and on a CUDA
// device the first-use self-check (learner/device_self_check.h) compares a
// graphed update with the CPU's eager one before a run trains with it.
#include "learner/ppo_graphed_step.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"

namespace rl {
namespace {

// Eager steps on the graph's stream before the capture (lazy
// initialisations happen outside it). They are real minibatch steps.
constexpr int kGraphWarmups = 2;

// Whether `a` and `b` are both undefined, or of one shape and dtype.
bool SameKind(const torch::Tensor& a, const torch::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepGraph>> NewStepGraphFor(
    const StepGraphRequest& request) {
  const std::string& mode = request.mode.empty() ? "auto" : request.mode;
  if (mode == "off") return nullptr;
  std::string why;
  if (!request.device.is_cuda() && !request.deferred_for_testing) {
    why = absl::StrCat("the update runs on ", request.device.str());
  } else if (request.gang) {
    why = "a gang's all-reduce runs inside each minibatch step";
  } else if (request.recurrent) {
    why = "a recurrent update runs its sequences step by step";
  } else if (request.bfloat16) {
    why = "bfloat16 autocast caches casts across steps";
  } else if (request.fused) {
    why = "the fused CPU path has no LibTorch step to capture";
  } else if (request.weighted) {
    why = "agents that leave early weigh each minibatch's rows apart";
  }
  if (!why.empty()) {
    if (mode == "on") {
      return absl::FailedPreconditionError(
          absl::StrCat("execution.cuda_graphs: on, but ", why,
                       " (auto captures where it can)"));
    }
    return nullptr;
  }
  if (request.deferred_for_testing) {
    return NewDeferredStepGraph(request.fail_capture_for_testing);
  }
  const int index = std::max<int>(0, request.device.index());
  absl::StatusOr<std::unique_ptr<StepGraph>> graph = NewCudaStepGraph(index);
  if (!graph.ok()) {
    if (mode == "on") {
      return absl::FailedPreconditionError(absl::StrCat(
          "execution.cuda_graphs: on: ", graph.status().message()));
    }
    RL_LOG_WARNING(
        "execution.cuda_graphs: auto: updates run without CUDA graphs: {}",
        std::string(graph.status().message()));
    return nullptr;
  }
  return std::move(*graph);
}

std::vector<const void*> GraphedMinibatches::GraphTensorAddresses() {
  TorchMinibatchStep& s = eager_.step();
  std::vector<const void*> addresses;
  for (const torch::Tensor& t : s.policy()->parameters()) {
    addresses.push_back(t.data_ptr());
    addresses.push_back(t.grad().defined() ? t.grad().data_ptr() : nullptr);
    torch::optim::AdamParamState& state = AdamStateFor(s.optimizer(), t);
    addresses.push_back(state.exp_avg().data_ptr());
    addresses.push_back(state.exp_avg_sq().data_ptr());
  }
  for (const torch::Tensor& t : s.policy()->buffers()) {
    addresses.push_back(t.data_ptr());
  }
  return addresses;
}

bool GraphedMinibatches::GraphTensorsMoved() {
  return GraphTensorAddresses() != graph_addresses_;
}

absl::Status GraphedMinibatches::BeginUpdate(const Rollout& rollout,
                                             const UpdatePlan& plan,
                                             Collective* collective) {
  delegating_ = eager_updates_;
  if (delegating_) return eager_.BeginUpdate(rollout, plan, collective);
  TorchMinibatchStep& s = eager_.step();
  orders_.clear();
  StepTensors fresh = s.DeviceRollout(rollout, plan, &orders_);
  const StepShape shape = s.ShapeOf(rollout, plan);
  StepTensors& g = graph_tensors_;
  const bool same = g.obs.defined() && SameKind(g.obs, fresh.obs) &&
                    SameKind(g.actions, fresh.actions) &&
                    SameKind(g.masks, fresh.masks) &&
                    shape.minibatch == graph_shape_.minibatch &&
                    shape.global_minibatch == graph_shape_.global_minibatch;
  if (!same) {
    // A rollout of another shape than the graph's (none so far in practice:
    // a run's are all alike) runs eagerly.
    if (graph_captured_) {
      delegating_ = true;
      return eager_.BeginUpdate(rollout, plan, collective);
    }
    graph_warmups_ = 0;  // new shapes: warm again before the capture
    g = StepTensors{};
    g.idx = torch::empty({shape.minibatch}, orders_[0].options());
    g.lr = torch::zeros({}, fresh.advantages.options());
    graph_shape_ = shape;
  }
  // The rollout's tensors, where the graph reads them: new ones for new
  // shapes, else this update's values copied in (an undefined one, masks
  // without an env that writes them, stays so on both sides).
  const auto inputs = [](StepTensors& t) {
    return std::array<torch::Tensor*, 7>{
        &t.obs,   &t.actions,    &t.old_log_probs, &t.old_values,
        &t.masks, &t.advantages, &t.returns};
  };
  const std::array<torch::Tensor*, 7> into = inputs(g);
  const std::array<torch::Tensor*, 7> from = inputs(fresh);
  for (size_t i = 0; i < into.size(); ++i) {
    if (!from[i]->defined()) continue;
    if (same) {
      into[i]->copy_(*from[i]);
    } else {
      *into[i] = from[i]->clone();
    }
  }
  s.ZeroSums(g);
  g.lr.fill_(plan.lr);
  collective_ = collective;
  return absl::OkStatus();
}

void GraphedMinibatches::BeginEpoch(int epoch) {
  if (delegating_) return eager_.BeginEpoch(epoch);
  graph_tensors_.epoch_kl.zero_();
}

absl::Status GraphedMinibatches::Step(int epoch, int64_t minibatch) {
  if (delegating_) return eager_.Step(epoch, minibatch);
  TorchMinibatchStep& s = eager_.step();
  StepTensors& g = graph_tensors_;
  g.idx.copy_(orders_[epoch].narrow(0, minibatch * graph_shape_.minibatch,
                                    graph_shape_.minibatch));
  if (!graphed_) {
    // A failed capture under auto: the rest eagerly, on the same tensors.
    return s.Run(g, graph_shape_, collective_, /*gang_plan=*/nullptr, 0,
                 /*graphed=*/false);
  }
  const auto step = [this, &s] {
    graph_step_status_ = s.Run(graph_tensors_, graph_shape_, collective_,
                               /*gang_plan=*/nullptr, 0, /*graphed=*/true);
  };
  MultiTensorAdam& adam = s.adam();
  RETURN_IF_ERROR(adam.Prepare());
  if (graph_captured_ &&
      (adam.generation() != graph_generation_ || GraphTensorsMoved())) {
    // Adam's step counts were rebuilt or a tensor the graph reads or
    // writes moved (a checkpoint): a new graph.
    request_.gang = collective_ != nullptr;
    ASSIGN_OR_RETURN(std::unique_ptr<StepGraph> graph,
                     NewStepGraphFor(request_));
    graphed_ = graph != nullptr;
    if (graphed_) graph_ = std::move(graph);
    graph_captured_ = false;
    graph_warmups_ = 0;
    if (!graphed_) return absl::InternalError("lost the CUDA graph");
  }
  if (!graph_captured_ && graph_warmups_ < kGraphWarmups) {
    RETURN_IF_ERROR(graph_->Warm(step));
    RETURN_IF_ERROR(graph_step_status_);
    ++graph_warmups_;
  } else {
    if (!graph_captured_) {
      absl::Status captured = graph_->Capture(step);
      if (captured.ok()) captured = graph_step_status_;
      if (!captured.ok()) {
        if (request_.mode == "on") return captured;
        // auto: a capture that failed ran nothing; this minibatch and the
        // rest run eagerly.
        RL_LOG_WARNING(
            "execution.cuda_graphs: auto: the capture failed ({}); updates "
            "run without CUDA graphs",
            std::string(captured.message()));
        graph_.reset();
        graphed_ = false;
        eager_updates_ = true;
        return s.Run(g, graph_shape_, collective_, nullptr, 0,
                     /*graphed=*/false);
      }
      graph_captured_ = true;
      RL_LOG_INFO(
          "execution.cuda_graphs: the minibatch step is captured in a CUDA "
          "graph on {}; later minibatches replay it",
          s.policy()->device().str());
      graph_generation_ = adam.generation();
      graph_addresses_ = GraphTensorAddresses();
    }
    RETURN_IF_ERROR(graph_->Replay());
  }
  adam.CountStep();
  return absl::OkStatus();
}

torch::Tensor GraphedMinibatches::EpochKl() {
  if (delegating_) return eager_.EpochKl();
  return graph_tensors_.epoch_kl.to(torch::kFloat64).reshape({1});
}

EpochResult GraphedMinibatches::Finish(const Rollout& rollout,
                                       const UpdatePlan& plan,
                                       int64_t minibatches_run, int epochs) {
  if (delegating_) {
    return eager_.Finish(rollout, plan, minibatches_run, epochs);
  }
  orders_.clear();
  return eager_.step().Result(graph_tensors_, plan, minibatches_run, epochs);
}

}  // namespace rl
