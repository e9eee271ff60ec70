#include "learner/fused_ppo.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "learner/multi_tensor_adam.h"

namespace rl {
namespace {

constexpr float kLogSqrt2Pi = 0.91893853320467274178f;  // log(sqrt(2 pi))

// LibTorch's maximum(a, b) backward: all of the gradient to the larger, half
// to each on a tie.
struct MaxWeights {
  float a;
  float b;
};
MaxWeights MaxBackward(float a, float b) {
  if (a > b) return {1.0f, 0.0f};
  if (a < b) return {0.0f, 1.0f};
  return {0.5f, 0.5f};
}

// clamp(x, lo, hi) backward: passes inside the closed range.
float ClampPasses(float x, float lo, float hi) {
  return x >= lo && x <= hi ? 1.0f : 0.0f;
}

struct AdamCoefficients {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, sqrt_bias_correction2,
      eps, step_size;
};

// Vectorised (AVX2 clone picked at load time, as in fused_policy.cc).
__attribute__((target_clones("default", "arch=x86-64-v3"))) void AdamUpdate(
    const AdamCoefficients& c, int64_t n, const float* grad, float* w, float* m,
    float* v) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = grad[i];
    m[i] = m[i] * c.beta1 + c.one_minus_beta1 * gi;
    v[i] = v[i] * c.beta2 + c.one_minus_beta2 * gi * gi;
    const float denom = std::sqrt(v[i]) / c.sqrt_bias_correction2 + c.eps;
    w[i] -= c.step_size * (m[i] / denom);
  }
}

}  // namespace

PpoLossValues FusedPpoLoss::Compute(FusedPolicy& policy,
                                    const PPOConfig& config,
                                    const PpoMinibatch& batch, float* grads) {
  // In chunks of rows, so that a large minibatch's activations stay in
  // cache: every term is a mean over rows, so each chunk adds its rows'
  // share (1/B each) to the gradient. A central critic's chunks are whole
  // environment copies.
  const int64_t agents = policy.central_agents();
  const int64_t kChunk = std::max<int64_t>(agents, 512 / agents * agents);
  const float inv_b = 1.0f / static_cast<float>(batch.size);
  const int head = policy.head_size();
  const int obs = policy.observation_size();
  LossSums sums;
  for (int64_t start = 0; start < batch.size; start += kChunk) {
    PpoMinibatch chunk = batch;
    chunk.size = std::min(kChunk, batch.size - start);
    chunk.observations += start * obs;
    if (chunk.discrete_actions != nullptr) chunk.discrete_actions += start;
    if (chunk.continuous_actions != nullptr) {
      chunk.continuous_actions += start * head;
    }
    chunk.old_log_probs += start;
    chunk.old_values += start;
    chunk.advantages += start;
    chunk.returns += start;
    ComputeChunk(policy, config, chunk, inv_b, /*accumulate=*/start > 0, grads,
                 &sums);
  }
  const double B = static_cast<double>(batch.size);
  PpoLossValues terms;
  terms.policy_loss = static_cast<float>(sums.policy_loss / B);
  terms.value_loss = static_cast<float>(sums.value_loss / B);
  terms.entropy = static_cast<float>(sums.entropy / B);
  terms.approx_kl = static_cast<float>(sums.kl / B);
  terms.clip_fraction = static_cast<float>(sums.clipped / B);
  const float loss = terms.policy_loss - config.entropy_coef() * terms.entropy +
                     config.value_coef() * terms.value_loss;
  terms.finite = std::isfinite(loss);
  return terms;
}

void FusedPpoLoss::ComputeChunk(FusedPolicy& policy, const PPOConfig& config,
                                const PpoMinibatch& batch, float inv_b,
                                bool accumulate, float* grads, LossSums* sums) {
  const int64_t B = batch.size;
  const int n = policy.head_size();
  policy.Forward(batch.observations, B, /*policy=*/true, /*value=*/true,
                 &acts_);
  d_head_.resize(B * n);
  d_values_.resize(B);
  log_probs_.resize(B);
  const float entropy_coef = config.entropy_coef();
  const float value_coef = config.value_coef();
  const float clip = config.clip_coef();
  const float lo = 1 - clip, hi = 1 + clip;

  // Log-probabilities of the taken actions and the entropy; d_head holds
  // d(log_prob)/d(head) for now (scaled below), plus the entropy term.
  double entropy_sum = 0;
  if (policy.discrete()) {
    for (int64_t r = 0; r < B; ++r) {
      const float* z = acts_.head.data() + r * n;
      float* d = d_head_.data() + r * n;
      float max = z[0];
      for (int j = 1; j < n; ++j) max = std::max(max, z[j]);
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += std::exp(z[j] - max);
      const float log_sum = std::log(sum) + max;
      float h = 0;
      for (int j = 0; j < n; ++j) {
        const float l = z[j] - log_sum;
        const float p = std::exp(l);
        d[j] = p;  // softmax, for now
        h -= p * l;
      }
      const int64_t a = batch.discrete_actions[r];
      log_probs_[r] = z[a] - log_sum;
      entropy_sum += h;
      // Entropy term of the loss: -entropy_coef * mean(H);
      // dH/dz_j = -p_j (log p_j + H). Stored as d_head += ...; the
      // log-prob term is added once its weight is known.
      for (int j = 0; j < n; ++j) {
        const float p = d[j];
        d[j] = entropy_coef * inv_b * p * ((z[j] - log_sum) + h);
      }
    }
  } else {
    const float* log_std = policy.log_std();
    float entropy = 0;
    for (int j = 0; j < n; ++j) entropy += log_std[j] + 0.5f + kLogSqrt2Pi;
    entropy_sum = static_cast<double>(entropy) * B;
    for (int64_t r = 0; r < B; ++r) {
      const float* mean = acts_.head.data() + r * n;
      const float* action = batch.continuous_actions + r * n;
      float lp = 0;
      for (int j = 0; j < n; ++j) {
        const float z = (action[j] - mean[j]) * std::exp(-log_std[j]);
        lp += -0.5f * z * z - log_std[j] - kLogSqrt2Pi;
      }
      log_probs_[r] = lp;
    }
  }

  // Per-row weights of the log-probabilities and values in the loss.
  double policy_loss = 0, value_loss = 0, kl = 0, clipped = 0;
  std::vector<float>& g = ratios_;  // d loss / d log_prob, per row
  g.resize(B);
  for (int64_t r = 0; r < B; ++r) {
    const float adv = batch.advantages[r];
    const float log_ratio = log_probs_[r] - batch.old_log_probs[r];
    const float ratio = std::exp(log_ratio);
    const float a = -adv * ratio;
    const float b = -adv * std::min(std::max(ratio, lo), hi);
    policy_loss += std::max(a, b);
    const MaxWeights w = MaxBackward(a, b);
    const float d_ratio =
        inv_b * (w.a * -adv + w.b * -adv * ClampPasses(ratio, lo, hi));
    g[r] = d_ratio * ratio;
    kl += (ratio - 1) - log_ratio;
    clipped += std::abs(ratio - 1) > clip ? 1.0 : 0.0;

    const float v = acts_.values[r];
    const float ret = batch.returns[r];
    float d_v;
    if (config.clip_value_loss()) {
      const float old = batch.old_values[r];
      const float delta = v - old;
      const float vc = old + std::min(std::max(delta, -clip), clip);
      const float u = (v - ret) * (v - ret);
      const float c = (vc - ret) * (vc - ret);
      value_loss += 0.5 * std::max(u, c);
      const MaxWeights vw = MaxBackward(u, c);
      d_v = inv_b * (vw.a * (v - ret) +
                     vw.b * (vc - ret) * ClampPasses(delta, -clip, clip));
    } else {
      value_loss += 0.5 * (v - ret) * (v - ret);
      d_v = inv_b * (v - ret);
    }
    d_values_[r] = value_coef * d_v;
  }
  sums->policy_loss += policy_loss;
  sums->value_loss += value_loss;
  sums->entropy += entropy_sum;
  sums->kl += kl;
  sums->clipped += clipped;

  // d loss / d head.
  if (policy.discrete()) {
    for (int64_t r = 0; r < B; ++r) {
      const float* z = acts_.head.data() + r * n;
      float* d = d_head_.data() + r * n;
      const int64_t a = batch.discrete_actions[r];
      // d log p_a / d z_j = [j == a] - p_j, p_j = exp(z_j - lse).
      const float lse = log_probs_[r] - z[a];  // = -logsumexp
      for (int j = 0; j < n; ++j) {
        const float p = std::exp(z[j] + lse);
        d[j] += g[r] * ((j == a ? 1.0f : 0.0f) - p);
      }
    }
  } else {
    const float* log_std = policy.log_std();
    float* d_log_std = grads + policy.log_std_offset();
    if (!accumulate) {
      for (int j = 0; j < n; ++j) d_log_std[j] = -entropy_coef;
    }
    for (int64_t r = 0; r < B; ++r) {
      const float* mean = acts_.head.data() + r * n;
      const float* action = batch.continuous_actions + r * n;
      float* d = d_head_.data() + r * n;
      for (int j = 0; j < n; ++j) {
        const float inv_std = std::exp(-log_std[j]);
        const float z = (action[j] - mean[j]) * inv_std;
        d[j] = g[r] * z * inv_std;
        d_log_std[j] += g[r] * (z * z - 1);
      }
    }
  }
  policy.Backward(acts_, d_head_.data(), d_values_.data(), grads, accumulate);
}

absl::Status FusedAdamStep(torch::optim::Adam& optimizer,
                           const std::vector<torch::Tensor>& parameters,
                           const float* grads) {
  RETURN_IF_ERROR(CheckPlainAdam(optimizer));
  const auto& options = static_cast<const torch::optim::AdamOptions&>(
      optimizer.param_groups()[0].options());
  const double lr = options.lr();
  const double beta1 = std::get<0>(options.betas());
  const double beta2 = std::get<1>(options.betas());
  const float eps = static_cast<float>(options.eps());
  const float* grad = grads;
  for (const torch::Tensor& p : parameters) {
    torch::optim::AdamParamState& state = AdamStateFor(optimizer, p);
    if (!state.exp_avg().is_contiguous() ||
        !state.exp_avg_sq().is_contiguous() ||
        state.exp_avg().scalar_type() != torch::kFloat32 ||
        state.exp_avg_sq().scalar_type() != torch::kFloat32) {
      return absl::FailedPreconditionError(
          "the fused Adam step needs contiguous float32 optimizer state");
    }
    state.step(state.step() + 1);
    const double bias_correction1 = 1 - std::pow(beta1, state.step());
    const double bias_correction2 = 1 - std::pow(beta2, state.step());
    const float step_size = static_cast<float>(lr / bias_correction1);
    const float sqrt_bc2 = static_cast<float>(std::sqrt(bias_correction2));
    const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
    const float one_minus_b1 = static_cast<float>(1 - beta1);
    const float one_minus_b2 = static_cast<float>(1 - beta2);
    float* w = p.data_ptr<float>();
    float* m = state.exp_avg().data_ptr<float>();
    float* v = state.exp_avg_sq().data_ptr<float>();
    const int64_t n = p.numel();
    AdamUpdate({b1, b2, one_minus_b1, one_minus_b2, sqrt_bc2, eps, step_size},
               n, grad, w, m, v);
    grad += n;
  }
  return absl::OkStatus();
}

}  // namespace rl
