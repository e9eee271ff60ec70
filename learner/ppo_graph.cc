// PpoUpdater's minibatch steps replayed from a CUDA graph
// (execution.cuda_graphs): a small network's update is bound by the host
// launching its kernels (learner/multi_tensor_adam.h), and a replay launches
// the whole step at once. The step is the eager path's own (MinibatchStep);
// what changes is where it reads and writes: tensors that stay put from update
// to update (graph_tensors_), into which each update copies its rollout and
// each minibatch its rows, and Adam's rate as a device scalar. Part of the
// ppo_updater library.
//
// The CUDA graph itself never ran on a GPU yet. Its CPU stand-in
// (DeferredStepGraph) runs this same code in the tests, and on a CUDA
// device the first-use self-check (learner/device_self_check.h) compares a
// graphed update with the CPU's eager one before a run trains with it.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "learner/ppo_updater.h"

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

absl::StatusOr<bool> PpoUpdater::UseCudaGraphs() {
  const std::string& mode =
      execution_.cuda_graphs().empty() ? "auto" : execution_.cuda_graphs();
  if (mode == "off") return false;
  std::string why;
  if (!policy_->device().is_cuda() && !deferred_graphs_for_testing_) {
    why = absl::StrCat("the update runs on ", policy_->device().str());
  } else if (collective_ != nullptr) {
    why = "a gang's all-reduce runs inside each minibatch step";
  } else if (policy_->recurrent()) {
    why = "a recurrent update runs its sequences step by step";
  } else if (bfloat16_) {
    why = "bfloat16 autocast caches casts across steps";
  } else if (fused_ != nullptr) {
    why = "the fused CPU path has no LibTorch step to capture";
  }
  if (!why.empty()) {
    if (mode == "on") {
      return absl::FailedPreconditionError(
          absl::StrCat("execution.cuda_graphs: on, but ", why,
                       " (auto captures where it can)"));
    }
    return false;
  }
  if (deferred_graphs_for_testing_) {
    graph_ = NewDeferredStepGraph(fail_capture_for_testing_);
    return true;
  }
  const int index = std::max<int>(0, policy_->device().index());
  absl::StatusOr<std::unique_ptr<StepGraph>> graph = NewCudaStepGraph(index);
  if (!graph.ok()) {
    if (mode == "on") {
      return absl::FailedPreconditionError(absl::StrCat(
          "execution.cuda_graphs: on: ", graph.status().message()));
    }
    RL_LOG_WARNING(
        "execution.cuda_graphs: auto: updates run without CUDA graphs: {}",
        std::string(graph.status().message()));
    return false;
  }
  graph_ = std::move(*graph);
  return true;
}

std::vector<const void*> PpoUpdater::GraphTensorAddresses() {
  std::vector<const void*> addresses;
  for (const torch::Tensor& t : policy_->parameters()) {
    addresses.push_back(t.data_ptr());
    addresses.push_back(t.grad().defined() ? t.grad().data_ptr() : nullptr);
    torch::optim::AdamParamState& state = AdamStateFor(*optimizer_, t);
    addresses.push_back(state.exp_avg().data_ptr());
    addresses.push_back(state.exp_avg_sq().data_ptr());
  }
  for (const torch::Tensor& t : policy_->buffers()) {
    addresses.push_back(t.data_ptr());
  }
  return addresses;
}

bool PpoUpdater::GraphTensorsMoved() {
  return GraphTensorAddresses() != graph_addresses_;
}

absl::StatusOr<PpoUpdater::EpochResult> PpoUpdater::RunEpochsGraphed(
    const Rollout& rollout, const Plan& plan) {
  std::vector<torch::Tensor> orders;
  StepTensors fresh = DeviceRollout(rollout, plan, &orders);
  const StepShape shape = ShapeOf(rollout, plan);
  StepTensors& g = graph_tensors_;
  const bool same = g.obs.defined() && SameKind(g.obs, fresh.obs) &&
                    SameKind(g.actions, fresh.actions) &&
                    SameKind(g.masks, fresh.masks) &&
                    shape.minibatch == graph_shape_.minibatch &&
                    shape.global_minibatch == graph_shape_.global_minibatch;
  if (!same) {
    // A rollout of another shape than the graph's (none so far in practice:
    // a run's are all alike) runs eagerly.
    if (graph_captured_) return RunEpochs(rollout, plan);
    graph_warmups_ = 0;  // new shapes: warm again before the capture
    g = StepTensors{};
    g.idx = torch::empty({shape.minibatch}, orders[0].options());
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
  ZeroSums(g);
  g.lr.fill_(plan.lr);
  const auto step = [this] {
    graph_step_status_ = MinibatchStep(graph_tensors_, graph_shape_,
                                       /*gang_plan=*/nullptr, 0,
                                       /*graphed=*/true);
  };
  const int64_t num_minibatches = config_.num_minibatches();
  int64_t minibatches_run = 0;
  int epochs = 0;
  const bool on = execution_.cuda_graphs() == "on";
  for (int epoch = 0; epoch < config_.num_epochs(); ++epoch) {
    g.epoch_kl.zero_();
    for (int64_t m = 0; m < num_minibatches; ++m) {
      g.idx.copy_(
          orders[epoch].narrow(0, m * shape.minibatch, shape.minibatch));
      if (!graphed_) {
        // A failed capture under auto: the rest eagerly, on the same
        // tensors.
        RETURN_IF_ERROR(MinibatchStep(g, graph_shape_, /*gang_plan=*/nullptr, 0,
                                      /*graphed=*/false));
        ++minibatches_run;
        continue;
      }
      RETURN_IF_ERROR(adam_.Prepare());
      if (graph_captured_ &&
          (adam_.generation() != graph_generation_ || GraphTensorsMoved())) {
        // Adam's step counts were rebuilt or a tensor the graph reads or
        // writes moved (a checkpoint): a new graph.
        ASSIGN_OR_RETURN(graphed_, UseCudaGraphs());
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
            if (on) return captured;
            // auto: a capture that failed ran nothing; this minibatch and
            // the rest run eagerly.
            RL_LOG_WARNING(
                "execution.cuda_graphs: auto: the capture failed ({}); updates "
                "run without CUDA graphs",
                std::string(captured.message()));
            graph_.reset();
            graphed_ = false;
            epochs_ = &PpoUpdater::RunEpochs;
            RETURN_IF_ERROR(MinibatchStep(g, graph_shape_, nullptr, 0,
                                          /*graphed=*/false));
            ++minibatches_run;
            continue;
          }
          graph_captured_ = true;
          RL_LOG_INFO(
              "execution.cuda_graphs: the minibatch step is captured in a CUDA "
              "graph on {}; later minibatches replay it",
              policy_->device().str());
          graph_generation_ = adam_.generation();
          graph_addresses_ = GraphTensorAddresses();
        }
        RETURN_IF_ERROR(graph_->Replay());
      }
      adam_.CountStep();
      ++minibatches_run;
    }
    ++epochs;
    ASSIGN_OR_RETURN(const bool stop, StopForKl(g.epoch_kl));
    if (stop) break;
  }
  return Result(g, plan, minibatches_run, epochs);
}

}  // namespace rl
