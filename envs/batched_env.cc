// The CPU backend of BatchedEnv: SoA arrays owned here, stepped by
// StepBatchCpu over shards of environments on a ShardPool.
#include "envs/batched_env.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "envs/env_batch.h"
#include "envs/env_registry.h"
#include "envs/shard_pool.h"

namespace rl {
namespace {

class CpuBatchedEnv final : public BatchedEnv {
 public:
  CpuBatchedEnv(EnvKind kind, EnvSpec spec, int num_envs, uint64_t seed,
                int num_threads)
      : kind_(kind),
        spec_(std::move(spec)),
        state_size_(EnvStateSize(kind)),
        num_envs_(num_envs),
        state_(static_cast<size_t>(state_size_) * num_envs),
        elapsed_(num_envs),
        episode_(num_envs),
        returns_(num_envs),
        pool_(num_threads < num_envs ? num_threads : num_envs) {
    batch_.state = state_.data();
    batch_.elapsed = elapsed_.data();
    batch_.episode = episode_.data();
    batch_.returns = returns_.data();
    batch_.num_envs = num_envs;
    batch_.max_episode_steps = spec_.max_episode_steps();
    batch_.seed = seed;
    // Every environment starts in a valid initial state (episode 1), so a
    // Step before the first Reset is well defined.
    ResetBatchCpu(kind_, batch_, nullptr, 0, num_envs_);
  }

  const EnvSpec& spec() const override { return spec_; }
  int num_envs() const override { return num_envs_; }
  int state_size() const override { return state_size_; }

  absl::Status Reset(void* observations,
                     uint8_t* /*action_masks: none*/ = nullptr) override {
    // Built-in environments observe float32.
    float* const obs = static_cast<float*>(observations);
    pool_.Run([&](int shard) {
      ResetBatchCpu(kind_, batch_, obs, ShardBegin(shard),
                    ShardBegin(shard + 1));
    });
    return absl::OkStatus();
  }

  absl::Status StepDiscrete(const int64_t* actions,
                            const StepOutputs& out) override {
    if (!IsDiscrete(spec_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_.id(), " takes continuous actions; call StepContinuous"));
    }
    RETURN_IF_ERROR(CheckOutputs(actions, out));
    // Rare path: find the first bad row only if the vectorisable scan
    // says there is one.
    bool any_bad = false;
    for (int i = 0; i < num_envs_; ++i) {
      any_bad |=
          (actions[i] < 0) | (actions[i] >= spec_.num_discrete_actions());
    }
    if (any_bad) {
      for (int i = 0; i < num_envs_; ++i) {
        if (actions[i] < 0 || actions[i] >= spec_.num_discrete_actions()) {
          return absl::InvalidArgumentError(absl::StrCat(
              spec_.id(), ": action ", actions[i], " of env row ", i,
              " is out of range [0, ", spec_.num_discrete_actions(),
              "); no environment was stepped"));
        }
      }
    }
    Step(actions, out);
    return absl::OkStatus();
  }

  absl::Status StepContinuous(const float* actions,
                              const StepOutputs& out) override {
    if (IsDiscrete(spec_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_.id(), " takes discrete actions; call StepDiscrete"));
    }
    RETURN_IF_ERROR(CheckOutputs(actions, out));
    const int64_t count =
        static_cast<int64_t>(num_envs_) * spec_.continuous_action_size();
    for (int64_t j = 0; j < count; ++j) {
      if (!std::isfinite(actions[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec_.id(), ": action ", actions[j], " of env row ",
                         j / spec_.continuous_action_size(), " (component ",
                         j % spec_.continuous_action_size(),
                         ") is not finite; no environment was stepped"));
      }
    }
    Step(actions, out);
    return absl::OkStatus();
  }

  std::string SaveState() const override {
    std::string bytes = Header();
    bytes.append(reinterpret_cast<const char*>(&batch_.seed),
                 sizeof(batch_.seed));
    Append(&bytes, state_);
    Append(&bytes, elapsed_);
    Append(&bytes, episode_);
    Append(&bytes, returns_);
    return bytes;
  }

  // Adopts the saved seed too: reset draws continue as in the saved run.
  absl::Status RestoreState(const std::string& bytes) override {
    const std::string header = Header();
    const size_t expected =
        header.size() + sizeof(uint64_t) + state_.size() * sizeof(double) +
        num_envs_ * (sizeof(int32_t) + sizeof(uint64_t) + sizeof(double));
    if (bytes.size() != expected ||
        bytes.compare(0, header.size(), header) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "saved environment state does not fit ", spec_.id(), " x ", num_envs_,
          ": ", bytes.size(), " bytes, expected ", expected,
          " starting with \"", header.substr(0, header.size() - 1), "\""));
    }
    const char* p = bytes.data() + header.size();
    memcpy(&batch_.seed, p, sizeof(batch_.seed));
    p += sizeof(batch_.seed);
    p = Extract(p, &state_);
    p = Extract(p, &elapsed_);
    p = Extract(p, &episode_);
    Extract(p, &returns_);
    return absl::OkStatus();
  }

  absl::Status SetElapsedSteps(int env, int elapsed_steps) override {
    if (env < 0 || env >= num_envs_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env index ", env, " is out of range [0, ", num_envs_, ")"));
    }
    if (elapsed_steps < 0 || elapsed_steps >= spec_.max_episode_steps()) {
      return absl::InvalidArgumentError(
          absl::StrCat("elapsed steps ", elapsed_steps, " is out of range [0, ",
                       spec_.max_episode_steps(), ")"));
    }
    elapsed_[env] = elapsed_steps;
    return absl::OkStatus();
  }

  absl::Status SetState(int env, const double* state, int state_size) override {
    if (env < 0 || env >= num_envs_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env index ", env, " is out of range [0, ", num_envs_, ")"));
    }
    if (state == nullptr || state_size != state_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec_.id(), " has a state of ", state_size_,
                       " values (got ", state_size, ")"));
    }
    for (int k = 0; k < state_size_; ++k) {
      if (!std::isfinite(state[k])) {
        return absl::InvalidArgumentError(
            absl::StrCat("state value ", k, " of env ", env, " is not finite"));
      }
    }
    for (int k = 0; k < state_size_; ++k) {
      state_[static_cast<size_t>(k) * num_envs_ + env] = state[k];
    }
    elapsed_[env] = 0;
    returns_[env] = 0;
    return absl::OkStatus();
  }

 private:
  int64_t ShardBegin(int shard) const {
    return static_cast<int64_t>(num_envs_) * shard / pool_.num_shards();
  }

  absl::Status CheckOutputs(const void* actions, const StepOutputs& out) {
    if (actions == nullptr || out.observations == nullptr ||
        out.rewards == nullptr || out.terminated == nullptr ||
        out.truncated == nullptr) {
      return absl::InvalidArgumentError(
          "actions, observations, rewards, terminated and truncated are "
          "required");
    }
    return absl::OkStatus();
  }

  // Identifies what the saved arrays belong to: the same task and size.
  std::string Header() const {
    return absl::StrCat("rl.BatchedEnv/1 ", spec_.id(), " ", num_envs_, "\n");
  }

  template <typename T>
  static void Append(std::string* bytes, const std::vector<T>& v) {
    bytes->append(reinterpret_cast<const char*>(v.data()),
                  v.size() * sizeof(T));
  }

  template <typename T>
  static const char* Extract(const char* p, std::vector<T>* v) {
    memcpy(v->data(), p, v->size() * sizeof(T));
    return p + v->size() * sizeof(T);
  }

  void Step(const void* actions, const StepOutputs& out) {
    StepBuffers buffers;
    buffers.observations = static_cast<float*>(out.observations);
    buffers.rewards = out.rewards;
    buffers.terminated = out.terminated;
    buffers.truncated = out.truncated;
    buffers.final_observations = static_cast<float*>(out.final_observations);
    buffers.episode_returns = out.episode_returns;
    buffers.episode_lengths = out.episode_lengths;
    pool_.Run([&](int shard) {
      StepBatchCpu(kind_, batch_, actions, buffers, ShardBegin(shard),
                   ShardBegin(shard + 1));
    });
  }

  const EnvKind kind_;
  const EnvSpec spec_;
  const int state_size_;
  const int num_envs_;
  std::vector<double> state_;  // [state_size][num_envs]
  std::vector<int32_t> elapsed_;
  std::vector<uint64_t> episode_;
  std::vector<double> returns_;
  EnvBatch batch_;
  ShardPool pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchedEnv>> BatchedEnv::Create(
    const std::string& id, int num_envs, uint64_t seed, int num_threads,
    int max_episode_steps) {
  ASSIGN_OR_RETURN(const EnvKind kind, FindEnvKind(id));
  if (num_envs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_envs must be >= 1 (got ", num_envs, ")"));
  }
  if (num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 1 (got ", num_threads, ")"));
  }
  if (max_episode_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_episode_steps must be >= 0 (got ", max_episode_steps, ")"));
  }
  EnvSpec spec = RegisteredEnv(kind);
  if (max_episode_steps > 0) spec.set_max_episode_steps(max_episode_steps);
  return std::unique_ptr<BatchedEnv>(
      new CpuBatchedEnv(kind, std::move(spec), num_envs, seed, num_threads));
}

}  // namespace rl
