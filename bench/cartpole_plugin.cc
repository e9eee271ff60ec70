// CartPole-v1 as a native plugin (envs/plugin_api/rl_env_plugin.h): the
// built-in structure-of-arrays physics (envs/env_batch.h) in a shared
// library of its own, for plugin_env_bench to set against the built-in
// CartPole. Written against the C ABI directly (no Abseil, no protobuf: a
// plugin must not bring a second copy of the service's registered protos).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "envs/env_batch.h"
#include "rl_env_plugin.h"

namespace {

struct Batch {
  explicit Batch(const rl_env_options& o)
      : state(static_cast<size_t>(rl::EnvStateSize(rl::EnvKind::kCartPole)) *
              o.num_envs),
        elapsed(o.num_envs),
        episode(o.num_envs),
        returns(o.num_envs) {
    b.state = state.data();
    b.elapsed = elapsed.data();
    b.episode = episode.data();
    b.returns = returns.data();
    b.num_envs = o.num_envs;
    b.max_episode_steps = o.max_episode_steps > 0 ? o.max_episode_steps : 500;
    b.seed = o.seed;
    rl::ResetBatchCpu(rl::EnvKind::kCartPole, b, nullptr, 0, o.num_envs);
  }
  std::vector<double> state;
  std::vector<int32_t> elapsed;
  std::vector<uint64_t> episode;
  std::vector<double> returns;
  rl::EnvBatch b;
};

rl_env* Create(const rl_env_options* o, rl_env_info* info, char* error,
               size_t error_size) {
  if (std::strcmp(o->env_id, "CartPole-v1") != 0) {
    std::snprintf(error, error_size, "serves CartPole-v1 only");
    return nullptr;
  }
  *info = rl_env_info{};
  info->observation.kind = RL_SPACE_BOX;
  info->observation.dtype = RL_DTYPE_FLOAT32;
  info->observation.rank = 1;
  info->observation.shape[0] = 4;
  info->action.kind = RL_SPACE_DISCRETE;
  info->action.dtype = RL_DTYPE_INT64;
  info->action.rank = 1;
  info->action.shape[0] = 2;
  info->reward_low = 0;
  info->reward_high = 1;
  return reinterpret_cast<rl_env*>(new Batch(*o));
}

void Destroy(rl_env* env) { delete reinterpret_cast<Batch*>(env); }

int Reset(rl_env* env, const rl_env_buffers* out, char*, size_t) {
  Batch* batch = reinterpret_cast<Batch*>(env);
  rl::ResetBatchCpu(rl::EnvKind::kCartPole, batch->b,
                    static_cast<float*>(out->observations), 0,
                    batch->b.num_envs);
  return 0;
}

int Step(rl_env* env, const void* actions, const rl_env_buffers* out, char*,
         size_t) {
  Batch* batch = reinterpret_cast<Batch*>(env);
  rl::StepBuffers buffers;
  buffers.observations = static_cast<float*>(out->observations);
  buffers.rewards = out->rewards;
  buffers.terminated = out->terminated;
  buffers.truncated = out->truncated;
  buffers.final_observations = static_cast<float*>(out->final_observations);
  buffers.episode_returns = out->episode_returns;
  buffers.episode_lengths = out->episode_lengths;
  rl::StepBatchCpu(rl::EnvKind::kCartPole, batch->b, actions, buffers, 0,
                   batch->b.num_envs);
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const rl_env_plugin*
rl_env_plugin_v1(void) {
  static const rl_env_plugin table = [] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    t.name = "cartpole plugin (bench)";
    t.create = Create;
    t.destroy = Destroy;
    t.reset = Reset;
    t.step = Step;
    return t;
  }();
  return &table;
}
