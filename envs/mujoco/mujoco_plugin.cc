// The MuJoCo v5 environments as a plugin (envs/plugin_api/rl_env_plugin.h):
// run files name it `plugin: mujoco` (found beside the binaries, as the
// Gymnasium bridge is) with a task id, e.g. `id: HalfCheetah-v5`, and
// Gymnasium's kwargs. One mjModel per batch, one mjData per environment, no
// allocation per step; the batch is split over `num_threads` shards
// (envs/shard_pool.h), each stepping its own environments.
#include <mujoco/mjxmacro.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "envs/mujoco/mujoco_task.h"
#include "envs/shard_pool.h"
#include "rl_env_plugin.hpp"

namespace rl::mujoco_envs {
namespace {

class MujocoBatch {
 public:
  MujocoBatch(const rl_env_options& o, rl_env_info* info)
      : task_(MakeMujocoTask(
            o.env_id != nullptr ? o.env_id : "",
            rlenv::Kwargs(o.kwargs_json != nullptr ? o.kwargs_json : "{}"))),
        max_steps_(o.max_episode_steps > 0
                       ? o.max_episode_steps
                       : task_->default_max_episode_steps()) {
    const mjModel* m = task_->model();
    const int n = std::max(o.num_envs, 0);
    for (int i = 0; i < n; ++i) {
      mjData* d = mj_makeData(m);
      if (d == nullptr) throw std::runtime_error("mj_makeData failed");
      data_.push_back(d);
      // Seeded as the C++ helper seeds its envs.
      rngs_.emplace_back(rlenv::EnvSeed(o.seed, static_cast<uint64_t>(i)));
    }
    elapsed_.assign(n, 0);
    returns_.assign(n, 0.0);
    pool_ = std::make_unique<ShardPool>(
        std::max(1, std::min(std::max(o.num_threads, 1), n)));
    for (int k = 0; k < m->nu; ++k) {
      // Gymnasium's action space: the actuators' ctrlrange.
      action_low_.push_back(m->actuator_ctrlrange[2 * k]);
      action_high_.push_back(m->actuator_ctrlrange[2 * k + 1]);
    }
    *info = rl_env_info{};
    info->observation.kind = RL_SPACE_BOX;
    info->observation.dtype = RL_DTYPE_FLOAT32;
    info->observation.rank = 1;
    info->observation.shape[0] = task_->observation_size();
    info->action.kind = RL_SPACE_BOX;
    info->action.dtype = RL_DTYPE_FLOAT32;
    info->action.rank = 1;
    info->action.shape[0] = m->nu;
    info->action.low = action_low_.data();
    info->action.high = action_high_.data();
    info->reward_low = task_->reward_low();
    info->reward_high = task_->reward_high();
  }

  ~MujocoBatch() {
    for (mjData* d : data_) mj_deleteData(d);
  }

  void Reset(const rl_env_buffers& out) {
    float* obs = static_cast<float*>(out.observations);
    const int size = task_->observation_size();
    ForEachShard([&](int i) {
      task_->Reset(data_[i], rngs_[i]);
      task_->Observe(data_[i], obs + static_cast<int64_t>(i) * size);
      elapsed_[i] = 0;
      returns_[i] = 0;
    });
  }

  void Step(const float* actions, const rl_env_buffers& out) {
    float* obs = static_cast<float*>(out.observations);
    float* final_obs = static_cast<float*>(out.final_observations);
    const int size = task_->observation_size();
    const int nu = task_->model()->nu;
    ForEachShard([&](int i) {
      float* row = obs + static_cast<int64_t>(i) * size;
      const StepOutcome r =
          task_->Step(data_[i], actions + static_cast<int64_t>(i) * nu);
      task_->Observe(data_[i], row);
      const int32_t length = ++elapsed_[i];
      returns_[i] += r.reward;
      const bool truncated = !r.terminated && length >= max_steps_;
      out.rewards[i] = static_cast<float>(r.reward);
      out.terminated[i] = r.terminated ? 1 : 0;
      out.truncated[i] = truncated ? 1 : 0;
      const bool ended = r.terminated || truncated;
      if (out.episode_returns != nullptr) {
        out.episode_returns[i] = ended ? static_cast<float>(returns_[i]) : 0.f;
      }
      if (out.episode_lengths != nullptr) {
        out.episode_lengths[i] = ended ? length : 0;
      }
      if (ended) {
        if (final_obs != nullptr) {
          std::copy(row, row + size,
                    final_obs + static_cast<int64_t>(i) * size);
        }
        task_->Reset(data_[i], rngs_[i]);
        task_->Observe(data_[i], row);
        elapsed_[i] = 0;
        returns_[i] = 0;
      }
    });
  }

  // The batch's whole state, so that a resumed run continues exactly: per
  // environment every array of its mjData (MuJoCo's MJDATA_POINTERS: the
  // integration state, and the derived quantities a task reads before it
  // steps, such as the body positions of the last step's kinematics) and
  // its time, then its step count, return and random generator. Layout:
  // "MJB2", n, bytes per env, each env's data, then per env elapsed
  // (int32), return (double), the generator's text length (int32) and
  // text.
  std::string SaveState() const {
    const int n = static_cast<int>(data_.size());
    std::string out = "MJB2";
    Append(&out, n);
    Append(&out, DataBytes());
    for (int i = 0; i < n; ++i) {
      Append(&out, data_[i]->time);
      ForEachArray(data_[i],
                   [&](char* p, size_t bytes) { out.append(p, bytes); });
    }
    for (int i = 0; i < n; ++i) {
      Append(&out, elapsed_[i]);
      Append(&out, returns_[i]);
      std::ostringstream rng;
      rng << rngs_[i];
      const std::string text = rng.str();
      Append(&out, static_cast<int32_t>(text.size()));
      out += text;
    }
    return out;
  }

  void RestoreState(const char* bytes, int64_t size) {
    std::string_view in(bytes, static_cast<size_t>(std::max<int64_t>(size, 0)));
    if (in.substr(0, 4) != "MJB2") {
      throw std::runtime_error("not a MuJoCo batch state (no MJB2 header)");
    }
    in.remove_prefix(4);
    const int n = static_cast<int>(data_.size());
    const int32_t saved_n = Take<int32_t>(&in);
    const int64_t saved_bytes = Take<int64_t>(&in);
    if (saved_n != n || saved_bytes != DataBytes()) {
      throw std::runtime_error("the saved MuJoCo state is of " +
                               std::to_string(saved_n) + " envs of " +
                               std::to_string(saved_bytes) +
                               " bytes; this batch has " + std::to_string(n) +
                               " of " + std::to_string(DataBytes()));
    }
    for (int i = 0; i < n; ++i) {
      if (in.size() < static_cast<size_t>(saved_bytes) + sizeof(double)) {
        throw std::runtime_error("truncated state");
      }
      data_[i]->time = Take<double>(&in);
      ForEachArray(data_[i], [&](char* p, size_t bytes) {
        std::memcpy(p, in.data(), bytes);
        in.remove_prefix(bytes);
      });
    }
    for (int i = 0; i < n; ++i) {
      elapsed_[i] = Take<int32_t>(&in);
      returns_[i] = Take<double>(&in);
      const int32_t length = Take<int32_t>(&in);
      if (length < 0 || in.size() < static_cast<size_t>(length)) {
        throw std::runtime_error("truncated state");
      }
      std::istringstream rng{std::string(in.substr(0, length))};
      rng >> rngs_[i];
      if (!rng) throw std::runtime_error("bad random generator state");
      in.remove_prefix(length);
    }
    if (!in.empty()) throw std::runtime_error("trailing bytes after the state");
  }

 private:
  // fn(pointer, bytes) for every array of `d` (mjxmacro.h's
  // MJDATA_POINTERS, sized by the model).
  template <typename F>
  void ForEachArray(mjData* d, F&& fn) const {
    const mjModel* m = task_->model();
    MJDATA_POINTERS_PREAMBLE(m);  // int nv, for the sizes that use it
    (void)nv;
#define X(type, name, nr, nc) \
  fn(reinterpret_cast<char*>(d->name), sizeof(type) * (m->nr) * (nc));
#define XMJV X
    MJDATA_POINTERS;
#undef XMJV
#undef X
  }

  // Bytes of one env's arrays.
  int64_t DataBytes() const {
    int64_t bytes = 0;
    if (data_.empty()) return 0;
    ForEachArray(data_[0], [&](char*, size_t n) { bytes += n; });
    return bytes;
  }

  template <typename T>
  static void Append(std::string* out, T value) {
    out->append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  template <typename T>
  static T Take(std::string_view* in) {
    if (in->size() < sizeof(T)) throw std::runtime_error("truncated state");
    T value;
    std::memcpy(&value, in->data(), sizeof(T));
    in->remove_prefix(sizeof(T));
    return value;
  }

  // fn(i) for every environment, each shard over its own contiguous range.
  template <typename F>
  void ForEachShard(F&& fn) {
    const int n = static_cast<int>(data_.size());
    const int shards = pool_->num_shards();
    pool_->Run([&](int s) {
      const int begin = static_cast<int>(int64_t{n} * s / shards);
      const int end = static_cast<int>(int64_t{n} * (s + 1) / shards);
      for (int i = begin; i < end; ++i) fn(i);
    });
  }

  std::unique_ptr<MujocoTask> task_;
  const int32_t max_steps_;
  std::vector<mjData*> data_;
  std::vector<Rng> rngs_;
  std::vector<int32_t> elapsed_;
  std::vector<double> returns_;
  std::unique_ptr<ShardPool> pool_;
  std::vector<double> action_low_, action_high_;
};

MujocoBatch* Of(rl_env* env) { return reinterpret_cast<MujocoBatch*>(env); }

using rlenv::Guard;

const rl_env_plugin* Table() {
  static const rl_env_plugin table = [] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    static const std::string name =
        std::string("MuJoCo v5 environments (libmujoco ") + mj_versionString() +
        ")";
    t.name = name.c_str();
    t.create = [](const rl_env_options* o, rl_env_info* info, char* error,
                  size_t error_size) -> rl_env* {
      MujocoBatch* batch = nullptr;
      Guard(error, error_size, [&] { batch = new MujocoBatch(*o, info); });
      return reinterpret_cast<rl_env*>(batch);
    };
    t.destroy = [](rl_env* env) { delete Of(env); };
    t.reset = [](rl_env* env, const rl_env_buffers* out, char* error,
                 size_t error_size) {
      return Guard(error, error_size, [&] { Of(env)->Reset(*out); });
    };
    t.step = [](rl_env* env, const void* actions, const rl_env_buffers* out,
                char* error, size_t error_size) {
      return Guard(error, error_size, [&] {
        Of(env)->Step(static_cast<const float*>(actions), *out);
      });
    };
    t.save_state = [](rl_env* env, void* bytes, int64_t capacity, char* error,
                      size_t error_size) -> int64_t {
      std::string state;
      if (Guard(error, error_size, [&] { state = Of(env)->SaveState(); }) !=
          0) {
        return -1;
      }
      const int64_t size = static_cast<int64_t>(state.size());
      if (size <= capacity && bytes != nullptr) {
        std::memcpy(bytes, state.data(), state.size());
      }
      return size;
    };
    t.restore_state = [](rl_env* env, const void* bytes, int64_t size,
                         char* error, size_t error_size) {
      return Guard(error, error_size, [&] {
        Of(env)->RestoreState(static_cast<const char*>(bytes), size);
      });
    };
    return t;
  }();
  return &table;
}

}  // namespace
}  // namespace rl::mujoco_envs

extern "C" __attribute__((visibility("default"))) const rl_env_plugin*
rl_env_plugin_v1(void) {
  return rl::mujoco_envs::Table();
}
