#include "policy/fused_policy.h"

#include <ATen/core/DistributionsHelper.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"

// The BLAS inside LibTorch's libtorch_cpu (MKL in the PyPI wheel). Weak: a
// LibTorch built without one still links, and the fused path then reports
// itself unsupported.
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
            const int* k, const float* alpha, const float* a, const int* lda,
            const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) __attribute__((weak));
int MKL_Set_Num_Threads_Local(int n) __attribute__((weak));
}

namespace rl {
namespace {

constexpr float kLogSqrt2Pi = 0.91893853320467274178f;

// MKL on one thread in this scope. The fused path's products are small
// (CleanRL's minibatches: 128 x 64 x 64), too small for MKL's OpenMP team,
// and on a machine where another process is busy that team's threads spin
// against each other: with 2 LibTorch threads on 2 busy cores the
// throughput configuration fell from 163k to 12k env steps/s (measured).
// One thread per process that computes keeps every run at its single-core
// speed however busy the machine is.
class SingleThreadedMkl {
 public:
  SingleThreadedMkl()
      : previous_(MKL_Set_Num_Threads_Local != nullptr
                      ? MKL_Set_Num_Threads_Local(1)
                      : 0) {}
  ~SingleThreadedMkl() {
    if (MKL_Set_Num_Threads_Local != nullptr) {
      MKL_Set_Num_Threads_Local(previous_);
    }
  }

 private:
  int previous_;
};

// Row-major products through the column-major BLAS: a row-major [r, c]
// matrix is the column-major [c, r] one, its transpose.
void Gemm(char transa, char transb, int m, int n, int k, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const float one = 1.0f;
  sgemm_(&transa, &transb, &m, &n, &k, &one, a, &lda, b, &ldb, &beta, c, &ldc);
}

// tanh as a rational function (Eigen's generic_fast_tanh_float: max
// absolute error 2.3e-7 over [-6, 6], measured), in a loop the compiler
// vectorises; cloned for AVX2 + FMA and picked at load time (ifunc), so
// builds stay portable. The layer's bias is added on the way. MKL's vsTanh took
// 29% of a CleanRL-sized run here (it picks a generic kernel on this AMD CPU);
// this is about 4x faster.
__attribute__((target_clones("default", "arch=x86-64-v3"))) void TanhWithBias(
    float* x, const float* bias, int64_t rows, int width) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * width;
    for (int i = 0; i < width; ++i) {
      const float c = 7.90531110763549805f;
      float v = row[i] + bias[i];
      v = v > c ? c : v;
      v = v < -c ? -c : v;
      const float v2 = v * v;
      float p = v2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
      p = v2 * p + -8.60467152213735e-11f;
      p = v2 * p + 5.12229709037114e-08f;
      p = v2 * p + 1.48572235717979e-05f;
      p = v2 * p + 6.37261928875436e-04f;
      p = v2 * p + 4.89352455891786e-03f;
      float q = v2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
      q = v2 * q + 2.26843463243900e-03f;
      q = v2 * q + 4.89352518554385e-03f;
      row[i] = v * p / q;
    }
  }
}

// dW[out, in] (+)= d[B, out]^T x[B, in] for a narrow input (in <= 16, a
// first layer on CartPole's 4 observations): MKL takes as long for that
// product as for a 64-wide one (42 us vs 5 us of arithmetic at 512 rows,
// measured), so it is a loop over rows here, accumulating [in, out] rows
// the compiler vectorises over `out`. `acc` is scratch of in * out floats.
constexpr int kNarrowInput = 16;
__attribute__((target_clones("default", "arch=x86-64-v3"))) void
NarrowWeightGradient(const float* x, const float* d, int64_t batch, int in,
                     int out, bool accumulate, float* acc, float* dW) {
  std::fill(acc, acc + in * out, 0.0f);
  for (int64_t r = 0; r < batch; ++r) {
    const float* dr = d + r * out;
    for (int k = 0; k < in; ++k) {
      const float xv = x[r * in + k];
      float* a = acc + k * out;
      for (int j = 0; j < out; ++j) a[j] += xv * dr[j];
    }
  }
  for (int j = 0; j < out; ++j) {
    for (int k = 0; k < in; ++k) {
      dW[j * in + k] = (accumulate ? dW[j * in + k] : 0.0f) + acc[k * out + j];
    }
  }
}

// Resizes without shrinking capacity: no allocation once warm.
void Fit(std::vector<float>* v, int64_t n) {
  if (static_cast<int64_t>(v->size()) != n) v->resize(n);
}

absl::Status CheckParameter(const torch::Tensor& t, const std::string& name) {
  if (!t.defined() || !t.device().is_cpu() ||
      t.scalar_type() != torch::kFloat32 || !t.is_contiguous()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the fused CPU path needs contiguous float32 CPU parameters; ", name,
        " is not one"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCpuKernels(const std::string& value) {
  if (value.empty() || value == "auto" || value == "fused" ||
      value == "libtorch") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "execution.cpu_kernels: must be auto, fused or libtorch (got \"", value,
      "\")"));
}

absl::StatusOr<bool> UseFusedPolicy(const std::string& value,
                                    ActorCritic& policy) {
  RETURN_IF_ERROR(CheckCpuKernels(value));
  if (value == "libtorch") return false;
  const absl::Status supported = FusedPolicy::Supported(policy);
  if (value == "fused" && !supported.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("execution.cpu_kernels: fused: ", supported.message()));
  }
  if (!supported.ok()) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      RL_LOG_INFO("execution.cpu_kernels auto: LibTorch kernels, because {}",
                  std::string(supported.message()));
    }
  }
  return supported.ok();
}

const std::vector<std::string>& FusedPolicy::Heads() {
  static const std::vector<std::string>* heads =
      new std::vector<std::string>{"categorical", "gaussian"};
  return *heads;
}

absl::Status FusedPolicy::Supported(ActorCritic& policy) {
  FusedPolicy probe;
  return probe.Bind(policy);
}

absl::Status FusedPolicy::Bind(ActorCritic& policy) {
  if (sgemm_ == nullptr) {
    return absl::FailedPreconditionError(
        "the fused CPU path needs a BLAS (sgemm_) in LibTorch, and this "
        "LibTorch has none");
  }
  if (!policy->device().is_cpu()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the fused CPU path computes on the CPU, and this policy is on ",
        policy->device().str()));
  }
  const ActorCriticConfig& c = policy->config();
  if (c.activation != ActorCriticConfig::Activation::kTanh) {
    return absl::FailedPreconditionError(
        "the fused CPU path runs tanh networks only (policy.activation)");
  }
  if (!c.action_nvec.empty()) {
    return absl::FailedPreconditionError(
        "the fused CPU path has no MultiDiscrete head (env.action_nvec)");
  }
  if (c.action_masks) {
    return absl::FailedPreconditionError(
        "the fused CPU path has no action masks (env.action_mask)");
  }
  if (c.encoder != ActorCriticConfig::Encoder::kMlp) {
    return absl::FailedPreconditionError(
        "the fused CPU path runs MLPs only (policy.encoder is a CNN)");
  }
  if (c.byte_observations) {
    return absl::FailedPreconditionError(
        "the fused CPU path reads float32 observations "
        "(env.observation_dtype is uint8)");
  }
  const std::vector<std::string>& heads = Heads();
  if (std::find(heads.begin(), heads.end(), policy->head().name()) ==
      heads.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the fused CPU path has the heads ", absl::StrJoin(heads, " and "),
        ", not this policy's ", policy->head().name(), " (policy.head)"));
  }
  if (c.core != ActorCriticConfig::Core::kNone) {
    return absl::FailedPreconditionError(
        "the fused CPU path has no recurrent core (policy.core)");
  }
  for (const auto& part : c.observation_parts) {
    if (part.bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the fused CPU path reads float32 observations (observation part ",
          part.name, " is uint8)"));
    }
  }
  if (c.central_value_agents > 1 && c.shared_trunk) {
    return absl::FailedPreconditionError(
        "a central critic (policy.central_value) has a value trunk of its "
        "own (policy.shared_trunk)");
  }
  observation_size_ = c.observation_size;
  central_agents_ = std::max(1, c.central_value_agents);
  num_actions_ = c.num_actions;
  action_size_ = c.action_size;
  head_size_ = c.num_actions > 0 ? c.num_actions : c.action_size;
  shared_trunk_ = c.shared_trunk;
  normalize_ = c.normalize_observations;
  observation_clip_ = c.observation_clip;

  // Flat layout: policy->parameters() order.
  parameters_.clear();
  num_parameters_ = 0;
  std::map<std::string, std::pair<const float*, int64_t>> by_name;
  for (const auto& item : policy->named_parameters()) {
    RETURN_IF_ERROR(CheckParameter(item.value(), item.key()));
    float* data = item.value().data_ptr<float>();
    parameters_.emplace_back(data, item.value().numel());
    by_name[item.key()] = {data, num_parameters_};
    num_parameters_ += item.value().numel();
  }
  auto linear = [&](const std::string& prefix, int in,
                    int out) -> absl::StatusOr<Linear> {
    const auto w = by_name.find(prefix + ".weight");
    const auto b = by_name.find(prefix + ".bias");
    if (w == by_name.end() || b == by_name.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the fused CPU path does not know this network: no ",
                       prefix, ".weight/.bias"));
    }
    Linear l;
    l.weight = w->second.first;
    l.bias = b->second.first;
    l.weight_offset = w->second.second;
    l.bias_offset = b->second.second;
    l.in = in;
    l.out = out;
    return l;
  };
  // A central critic's value trunk reads every agent's observation.
  const int value_in = observation_size_ * central_agents_;
  auto trunk = [&](const std::string& name, int in,
                   std::vector<Linear>* layers) -> absl::Status {
    layers->clear();
    for (size_t i = 0; i < c.hidden_sizes.size(); ++i) {
      // Linear, Tanh, Linear, Tanh, ...: the Linear layers are 0, 2, 4, ...
      ASSIGN_OR_RETURN(Linear l, linear(absl::StrCat(name, ".", 2 * i), in,
                                        c.hidden_sizes[i]));
      layers->push_back(l);
      in = c.hidden_sizes[i];
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(trunk("policy_trunk", observation_size_, &policy_trunk_));
  if (shared_trunk_) {
    value_trunk_.clear();
  } else {
    RETURN_IF_ERROR(trunk("value_trunk", value_in, &value_trunk_));
  }
  const bool hidden = !c.hidden_sizes.empty();
  ASSIGN_OR_RETURN(
      policy_head_,
      linear("policy_head", hidden ? c.hidden_sizes.back() : observation_size_,
             head_size_));
  ASSIGN_OR_RETURN(
      value_head_,
      linear("value_head", hidden ? c.hidden_sizes.back() : value_in, 1));
  log_std_ = nullptr;
  log_std_offset_ = -1;
  if (!discrete()) {
    const auto it = by_name.find("log_std");
    if (it == by_name.end()) {
      return absl::FailedPreconditionError(
          "the fused CPU path does not know this network: no log_std");
    }
    log_std_ = it->second.first;
    log_std_offset_ = it->second.second;
  }
  obs_mean_ = obs_var_ = nullptr;
  if (normalize_) {
    for (const auto& item : policy->named_buffers()) {
      if (item.key() == "obs_mean" || item.key() == "obs_var") {
        RETURN_IF_ERROR(CheckParameter(item.value(), item.key()));
        (item.key() == "obs_mean" ? obs_mean_ : obs_var_) =
            item.value().data_ptr<float>();
      }
    }
    if (obs_mean_ == nullptr || obs_var_ == nullptr) {
      return absl::FailedPreconditionError(
          "the fused CPU path does not know this network: no obs_mean/obs_var");
    }
  }
  return absl::OkStatus();
}

void FusedPolicy::Trunk(const std::vector<Linear>& layers, const float* input,
                        int64_t batch,
                        std::vector<std::vector<float>>* hidden) const {
  hidden->resize(layers.size());
  const float* x = input;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Linear& l = layers[i];
    std::vector<float>& h = (*hidden)[i];
    Fit(&h, batch * l.out);
    // h[B, out] = tanh(x[B, in] W[out, in]^T + b)
    Gemm('T', 'N', l.out, static_cast<int>(batch), l.in, l.weight, l.in, x,
         l.in, 0.0f, h.data(), l.out);
    TanhWithBias(h.data(), l.bias, batch, l.out);
    x = h.data();
  }
}

void FusedPolicy::GatherCentral(Activations* acts) const {
  const int64_t a = central_agents_, batch = acts->batch;
  TORCH_CHECK(batch % a == 0,
              "a central critic (policy.central_value) values whole copies "
              "of ",
              a, " agents: a batch of ", batch, " rows is not");
  const int64_t d = observation_size_;
  Fit(&acts->central, batch * a * d);
  const float* in = acts->input.data();
  float* out = acts->central.data();
  // Row c x a + k reads the copy's rows k, k + 1, ..., k - 1 (mod a).
  for (int64_t copy = 0; copy < batch / a; ++copy) {
    const float* rows = in + copy * a * d;
    for (int64_t k = 0; k < a; ++k) {
      for (int64_t j = 0; j < a; ++j) {
        std::memcpy(out, rows + ((k + j) % a) * d, d * sizeof(float));
        out += d;
      }
    }
  }
}

void FusedPolicy::Forward(const float* observations, int64_t batch, bool policy,
                          bool value, Activations* acts) const {
  SingleThreadedMkl one_thread;
  acts->batch = batch;
  const int64_t d = observation_size_;
  Fit(&acts->input, batch * d);
  float* in = acts->input.data();
  if (normalize_) {
    // As ActorCriticImpl::NormalizeObservations, in float.
    float scale[64];
    std::vector<float> wide;
    float* s = scale;
    if (d > 64) {
      wide.resize(d);
      s = wide.data();
    }
    for (int64_t j = 0; j < d; ++j)
      s[j] = 1.0f / std::sqrt(obs_var_[j] + 1e-8f);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t j = 0; j < d; ++j) {
        const float v = (observations[r * d + j] - obs_mean_[j]) * s[j];
        in[r * d + j] =
            std::min(std::max(v, -observation_clip_), observation_clip_);
      }
    }
  } else {
    std::memcpy(in, observations, batch * d * sizeof(float));
  }
  // A trunk's output, or its input where it has no layers.
  auto features = [](const std::vector<std::vector<float>>& hidden,
                     const float* input) {
    return hidden.empty() ? input : hidden.back().data();
  };
  const bool central = central_agents_ > 1;
  if (central && value) GatherCentral(acts);
  const float* value_in = central ? acts->central.data() : in;
  const bool run_policy_trunk = policy || shared_trunk_;
  if (run_policy_trunk) Trunk(policy_trunk_, in, batch, &acts->policy_hidden);
  if (!shared_trunk_ && value) {
    Trunk(value_trunk_, value_in, batch, &acts->value_hidden);
  }
  if (policy) {
    Fit(&acts->head, batch * head_size_);
    for (int64_t r = 0; r < batch; ++r) {
      std::memcpy(acts->head.data() + r * head_size_, policy_head_.bias,
                  head_size_ * sizeof(float));
    }
    Gemm('T', 'N', head_size_, static_cast<int>(batch), policy_head_.in,
         policy_head_.weight, policy_head_.in,
         features(acts->policy_hidden, in), policy_head_.in, 1.0f,
         acts->head.data(), head_size_);
  }
  if (value) {
    Fit(&acts->values, batch);
    const float* f = shared_trunk_ ? features(acts->policy_hidden, in)
                                   : features(acts->value_hidden, value_in);
    const int n = value_head_.in;
    for (int64_t r = 0; r < batch; ++r) {
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += f[r * n + j] * value_head_.weight[j];
      acts->values[r] = sum + value_head_.bias[0];
    }
  }
}

void FusedPolicy::Act(const float* observations, int64_t batch,
                      at::CPUGeneratorImpl* generator, bool deterministic,
                      void* actions, float* log_probs, float* values) {
  Activations& a = act_scratch_;
  Forward(observations, batch, /*policy=*/true, /*value=*/true, &a);
  std::memcpy(values, a.values.data(), batch * sizeof(float));
  std::unique_lock<std::mutex> lock(generator->mutex_, std::defer_lock);
  if (!deterministic) lock.lock();
  const int n = head_size_;
  if (discrete()) {
    int64_t* out = static_cast<int64_t*>(actions);
    at::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int64_t r = 0; r < batch; ++r) {
      const float* z = a.head.data() + r * n;
      float max = z[0];
      int64_t best = 0;
      for (int j = 1; j < n; ++j) {
        if (z[j] > max) {
          max = z[j];
          best = j;
        }
      }
      double sum = 0;
      for (int j = 0; j < n; ++j)
        sum += std::exp(static_cast<double>(z[j] - max));
      const double log_sum = std::log(sum);
      int64_t choice = best;
      if (!deterministic) {
        // Inverse CDF of the softmax: one uniform per row.
        const double u = uniform(generator) * sum;
        double cumulative = 0;
        choice = n - 1;
        for (int j = 0; j < n; ++j) {
          cumulative += std::exp(static_cast<double>(z[j] - max));
          if (u < cumulative) {
            choice = j;
            break;
          }
        }
      }
      out[r] = choice;
      log_probs[r] = static_cast<float>(z[choice] - max - log_sum);
    }
  } else {
    float* out = static_cast<float*>(actions);
    at::normal_distribution<double> normal(0.0, 1.0);
    for (int64_t r = 0; r < batch; ++r) {
      const float* mean = a.head.data() + r * n;
      float lp = 0;
      for (int j = 0; j < n; ++j) {
        const float std = std::exp(log_std_[j]);
        const float noise =
            deterministic ? 0.0f : static_cast<float>(normal(generator));
        const float action = mean[j] + std * noise;
        out[r * n + j] = action;
        const float z = (action - mean[j]) / std;
        lp += -0.5f * z * z - log_std_[j] - kLogSqrt2Pi;
      }
      log_probs[r] = lp;
    }
  }
}

void FusedPolicy::Values(const float* observations, int64_t batch,
                         float* values) {
  Forward(observations, batch, /*policy=*/false, /*value=*/true, &act_scratch_);
  std::memcpy(values, act_scratch_.values.data(), batch * sizeof(float));
}

void FusedPolicy::TrunkBackward(const std::vector<Linear>& layers,
                                const float* input,
                                const std::vector<std::vector<float>>& hidden,
                                int64_t batch, std::vector<float>* d_features,
                                float* grads, bool accumulate) {
  // d_features: d loss / d (last hidden output) [B, out]; used as scratch.
  std::vector<float>* d = d_features;
  for (size_t i = layers.size(); i-- > 0;) {
    const Linear& l = layers[i];
    const float* h = hidden[i].data();
    float* dd = d->data();
    const int64_t n = batch * l.out;
    for (int64_t j = 0; j < n; ++j) dd[j] *= 1.0f - h[j] * h[j];  // tanh'
    const float* x = i == 0 ? input : hidden[i - 1].data();
    // dW[out, in] = d[B, out]^T x[B, in]
    if (l.in <= kNarrowInput) {
      Fit(&narrow_scratch_, l.in * l.out);
      NarrowWeightGradient(x, dd, batch, l.in, l.out, accumulate,
                           narrow_scratch_.data(), grads + l.weight_offset);
    } else {
      Gemm('N', 'T', l.in, l.out, static_cast<int>(batch), x, l.in, dd, l.out,
           accumulate ? 1.0f : 0.0f, grads + l.weight_offset, l.in);
    }
    float* db = grads + l.bias_offset;
    if (!accumulate) std::fill(db, db + l.out, 0.0f);
    for (int64_t r = 0; r < batch; ++r) {
      for (int j = 0; j < l.out; ++j) db[j] += dd[r * l.out + j];
    }
    if (i == 0) break;
    // d_in[B, in] = d[B, out] W[out, in]
    Fit(&d_tmp_, batch * l.in);
    Gemm('N', 'N', l.in, static_cast<int>(batch), l.out, l.weight, l.in, dd,
         l.out, 0.0f, d_tmp_.data(), l.in);
    d->swap(d_tmp_);
  }
}

void FusedPolicy::Backward(const Activations& acts, const float* d_head,
                           const float* d_values, float* grads,
                           bool accumulate) {
  const float beta = accumulate ? 1.0f : 0.0f;
  const int64_t batch = acts.batch;
  SingleThreadedMkl one_thread;
  // A trunk's output, or its input where it has no layers.
  auto features = [](const std::vector<std::vector<float>>& hidden,
                     const float* input) {
    return hidden.empty() ? input : hidden.back().data();
  };
  const int f = policy_head_.in;
  // The value head's width: f, but a central critic without hidden layers
  // reads its central input.
  const int vw = value_head_.in;
  const float* value_input =
      central_agents_ > 1 ? acts.central.data() : acts.input.data();
  // Heads.
  const float* pf = features(acts.policy_hidden, acts.input.data());
  const float* vf =
      shared_trunk_ ? pf : features(acts.value_hidden, value_input);
  Gemm('N', 'T', f, head_size_, static_cast<int>(batch), pf, f, d_head,
       head_size_, beta, grads + policy_head_.weight_offset, f);
  float* db = grads + policy_head_.bias_offset;
  if (!accumulate) std::fill(db, db + head_size_, 0.0f);
  float* dvw = grads + value_head_.weight_offset;
  if (!accumulate) std::fill(dvw, dvw + vw, 0.0f);
  float dvb = 0;
  for (int64_t r = 0; r < batch; ++r) {
    for (int j = 0; j < head_size_; ++j) db[j] += d_head[r * head_size_ + j];
    const float dv = d_values[r];
    dvb += dv;
    for (int j = 0; j < vw; ++j) dvw[j] += dv * vf[r * vw + j];
  }
  grads[value_head_.bias_offset] =
      (accumulate ? grads[value_head_.bias_offset] : 0.0f) + dvb;
  if (policy_trunk_.empty()) return;  // No hidden layers: heads only.

  // d policy features [B, f] = d_head [B, head] W_head [head, f]
  Fit(&d_policy_, batch * f);
  Gemm('N', 'N', f, static_cast<int>(batch), head_size_, policy_head_.weight, f,
       d_head, head_size_, 0.0f, d_policy_.data(), f);
  Fit(&d_value_, batch * f);
  for (int64_t r = 0; r < batch; ++r) {
    for (int j = 0; j < f; ++j) {
      d_value_[r * f + j] = d_values[r] * value_head_.weight[j];
    }
  }
  if (shared_trunk_) {
    for (int64_t j = 0; j < batch * f; ++j) d_policy_[j] += d_value_[j];
    TrunkBackward(policy_trunk_, acts.input.data(), acts.policy_hidden, batch,
                  &d_policy_, grads, accumulate);
    return;
  }
  TrunkBackward(policy_trunk_, acts.input.data(), acts.policy_hidden, batch,
                &d_policy_, grads, accumulate);
  TrunkBackward(value_trunk_, value_input, acts.value_hidden, batch, &d_value_,
                grads, accumulate);
}

}  // namespace rl
