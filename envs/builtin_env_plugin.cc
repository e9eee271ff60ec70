#include "envs/builtin_env_plugin.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "envs/batched_env.h"
#include "envs/env_registry.h"

namespace rl {
namespace {

void WriteError(char* error, size_t size, const std::string& what) {
  if (error != nullptr && size > 0)
    std::snprintf(error, size, "%s", what.c_str());
}

// One batch: the classic-control BatchedEnv and the bounds its info points
// to.
struct Builtin {
  std::unique_ptr<BatchedEnv> env;
  std::vector<double> action_low, action_high;
};

rl_env* Create(const rl_env_options* o, rl_env_info* info, char* error,
               size_t error_size) {
  if (o->kwargs_json != nullptr && std::strcmp(o->kwargs_json, "{}") != 0) {
    WriteError(error, error_size, "built-in environments take no kwargs");
    return nullptr;
  }
  auto env = BatchedEnv::Create(o->env_id, o->num_envs, o->seed, o->num_threads,
                                o->max_episode_steps);
  if (!env.ok()) {
    WriteError(error, error_size, std::string(env.status().message()));
    return nullptr;
  }
  auto b = std::make_unique<Builtin>();
  b->env = *std::move(env);
  const EnvSpec& spec = b->env->spec();
  *info = rl_env_info{};
  info->observation.kind = RL_SPACE_BOX;
  info->observation.dtype = RL_DTYPE_FLOAT32;
  info->observation.rank = 1;
  info->observation.shape[0] = spec.observation_size();
  if (IsDiscrete(spec)) {
    info->action.kind = RL_SPACE_DISCRETE;
    info->action.dtype = RL_DTYPE_INT64;
    info->action.rank = 1;
    info->action.shape[0] = spec.num_discrete_actions();
  } else {
    info->action.kind = RL_SPACE_BOX;
    info->action.dtype = RL_DTYPE_FLOAT32;
    info->action.rank = 1;
    info->action.shape[0] = spec.continuous_action_size();
    b->action_low.assign(spec.continuous_action_size(), spec.action_low());
    b->action_high.assign(spec.continuous_action_size(), spec.action_high());
    info->action.low = b->action_low.data();
    info->action.high = b->action_high.data();
  }
  info->reward_low = spec.reward_low();
  info->reward_high = spec.reward_high();
  return reinterpret_cast<rl_env*>(b.release());
}

Builtin* Of(rl_env* env) { return reinterpret_cast<Builtin*>(env); }

void Destroy(rl_env* env) { delete Of(env); }

int Reset(rl_env* env, const rl_env_buffers* out, char* error,
          size_t error_size) {
  const absl::Status s = Of(env)->env->Reset(out->observations);
  if (s.ok()) return 0;
  WriteError(error, error_size, std::string(s.message()));
  return 1;
}

int Step(rl_env* env, const void* actions, const rl_env_buffers* out,
         char* error, size_t error_size) {
  BatchedEnv& e = *Of(env)->env;
  StepOutputs o;
  o.observations = out->observations;
  o.rewards = out->rewards;
  o.terminated = out->terminated;
  o.truncated = out->truncated;
  o.final_observations = out->final_observations;
  o.episode_returns = out->episode_returns;
  o.episode_lengths = out->episode_lengths;
  const absl::Status s =
      IsDiscrete(e.spec())
          ? e.StepDiscrete(static_cast<const int64_t*>(actions), o)
          : e.StepContinuous(static_cast<const float*>(actions), o);
  if (s.ok()) return 0;
  WriteError(error, error_size, std::string(s.message()));
  return 1;
}

int64_t SaveState(rl_env* env, void* bytes, int64_t capacity, char*, size_t) {
  const std::string state = Of(env)->env->SaveState();
  const int64_t size = static_cast<int64_t>(state.size());
  if (size <= capacity) std::memcpy(bytes, state.data(), state.size());
  return size;
}

int RestoreState(rl_env* env, const void* bytes, int64_t size, char* error,
                 size_t error_size) {
  const absl::Status s = Of(env)->env->RestoreState(
      std::string(static_cast<const char*>(bytes), size));
  if (s.ok()) return 0;
  WriteError(error, error_size, std::string(s.message()));
  return 1;
}

}  // namespace

const rl_env_plugin* BuiltinEnvPlugin() {
  static const rl_env_plugin table = [] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    t.name = "built-in classic control";
    t.create = Create;
    t.destroy = Destroy;
    t.reset = Reset;
    t.step = Step;
    t.save_state = SaveState;
    t.restore_state = RestoreState;
    return t;
  }();
  return &table;
}

}  // namespace rl
