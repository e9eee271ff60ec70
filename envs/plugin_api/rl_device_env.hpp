// A header-only C++ helper over the device environment ABI (rl_device_env.h):
// write one environment as a struct of per-env functions, compile the same
// file with g++ (host only) or nvcc (host and CUDA kernels), get the table.
// C++17; copy rl_env_plugin.h, rl_env_plugin.hpp, rl_device_env.h and this
// file into your repository.
//
//   struct Walk {
//     static constexpr const char* kName = "walk 1.0";
//     enum Field { kPosition, kEpisode, kNumFields };
//     struct Params { float step; int max_steps; };  // copied to kernels
//     // Host only: kwargs -> params, spaces, state layout. Throw
//     // std::invalid_argument for a bad option.
//     static Params Configure(const rl_env_options& options,
//                             const rlenv::Kwargs& kwargs,
//                             rlenv::Spaces* spaces, rldev::Layout* layout);
//     // Per env, on the host and in kernels.
//     RLDEV_HD static void Reset(const Params& p, const rldev::Row& row,
//                                const rl_env_buffers& out);
//     RLDEV_HD static void Step(const Params& p, const rldev::Row& row,
//                               const void* actions, const rl_env_buffers&
//                               out);
//   };
//   RL_DEVICE_ENV_PLUGIN(Walk)
//
// Row r of a call is env row.env of the batch; row.Get<T>(f) is its
// elements of field f; outputs are indexed by row.r (observations at
// row.r * observation elements). rldev::Uniform gives counter-based random
// numbers that the host and the device compute alike.
#ifndef RL_DEVICE_ENV_HPP_
#define RL_DEVICE_ENV_HPP_

#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rl_device_env.h"
#include "rl_env_plugin.hpp"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define RLDEV_HD __host__ __device__
#else
#define RLDEV_HD
#endif

namespace rldev {

// The fields' row-0 pointers and per-env counts, passed to kernels by value.
struct Fields {
  void* data[RL_DEVICE_ENV_MAX_FIELDS];
  int64_t count[RL_DEVICE_ENV_MAX_FIELDS];
};

// One env of a call.
struct Row {
  const Fields* fields;
  int64_t r;      // the row in this call (index into the output buffers)
  int64_t env;    // the env's index in the batch (first_env + r)
  uint64_t seed;  // the batch's seed
  template <typename T>
  RLDEV_HD T* Get(int field) const {
    return static_cast<T*>(fields->data[field]) + r * fields->count[field];
  }
};

// A uniform double in [0, 1) from (seed, env, counter, k): splitmix64 of
// their mix, so host and device draw the same numbers.
RLDEV_HD inline double Uniform(uint64_t seed, uint64_t env, uint64_t counter,
                               uint64_t k) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (env + 1) +
               0xd1b54a32d192ed03ull * (counter + 1) +
               0x8cb92ba72f3d8dd7ull * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// The state layout an env declares in Configure; Add returns the field's
// index (declare them in the order of the env's Field enum).
class Layout {
 public:
  int Add(const std::string& name, rl_field_dtype dtype, int64_t count) {
    if (fields_.size() >= RL_DEVICE_ENV_MAX_FIELDS) {
      throw std::invalid_argument("more than RL_DEVICE_ENV_MAX_FIELDS fields");
    }
    if (count < 1) {
      throw std::invalid_argument("field " + name + ": count must be >= 1");
    }
    names_.push_back(name);  // a deque: earlier names stay where they are
    fields_.push_back(rl_device_field{names_.back().c_str(), dtype, count});
    return static_cast<int>(fields_.size()) - 1;
  }
  const std::vector<rl_device_field>& fields() const { return fields_; }

 private:
  std::deque<std::string> names_;
  std::vector<rl_device_field> fields_;
};

namespace internal {

template <typename Env>
struct Batch {
  typename Env::Params params;
  uint64_t seed = 0;
  rlenv::Spaces spaces;  // owns the bounds rl_env_info points at
  Layout layout;
};

template <typename Env>
Fields ToFields(const Batch<Env>& b, const rl_device_rows& rows) {
  Fields f{};
  for (size_t i = 0; i < b.layout.fields().size(); ++i) {
    f.data[i] = rows.fields[i];
    f.count[i] = b.layout.fields()[i].count;
  }
  return f;
}

// Env::Step on a row, or Env::Reset (kStep false; no actions).
template <typename Env, bool kStep>
RLDEV_HD inline void OnRow(const typename Env::Params& p, const Row& row,
                           const void* actions, const rl_env_buffers& out) {
  if constexpr (kStep) {
    Env::Step(p, row, actions, out);
  } else {
    Env::Reset(p, row, out);
  }
}

#if defined(__CUDACC__)
constexpr int kThreads = 256;

inline int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? b : 65535);
}

template <typename Env, bool kStep>
__global__ void RowsKernel(typename Env::Params p, Fields f, int64_t n,
                           int64_t first, uint64_t seed, const void* actions,
                           rl_env_buffers out) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       r < n; r += stride) {
    OnRow<Env, kStep>(p, Row{&f, r, first + r, seed}, actions, out);
  }
}
#endif

inline int NoCuda(char* error, size_t size) {
  rlenv::internal::WriteError(
      error, size,
      "this build of the env has no CUDA kernels (built without "
      "nvcc); it steps on the host only");
  return 1;
}

template <typename Env>
rl_device_env* Create(const rl_env_options* options, rl_env_info* info,
                      rl_device_state_layout* layout, char* error,
                      size_t error_size) {
  Batch<Env>* batch = nullptr;
  const int failed = rlenv::Guard(error, error_size, [&] {
    auto b = std::make_unique<Batch<Env>>();
    const rlenv::Kwargs kwargs(
        options->kwargs_json != nullptr ? options->kwargs_json : "{}");
    b->params = Env::Configure(*options, kwargs, &b->spaces, &b->layout);
    b->seed = options->seed;
    *info = rl_env_info{};
    rlenv::internal::ToC(b->spaces.observation, &info->observation);
    rlenv::internal::ToC(b->spaces.action, &info->action);
    info->reward_low = b->spaces.reward_low;
    info->reward_high = b->spaces.reward_high;
    *layout = rl_device_state_layout{};
    layout->num_fields = static_cast<int32_t>(b->layout.fields().size());
    for (int i = 0; i < layout->num_fields; ++i) {
      layout->fields[i] = b->layout.fields()[i];
    }
    batch = b.release();
  });
  return failed != 0 ? nullptr : reinterpret_cast<rl_device_env*>(batch);
}

template <typename Env>
void Destroy(rl_device_env* env) {
  delete reinterpret_cast<Batch<Env>*>(env);
}

// One call over `rows`: the kernel on a CUDA stream, else a host loop.
template <typename Env, bool kStep>
int RunRows(const rl_device_env* env, rl_device device,
            const rl_device_rows* rows, const void* actions,
            const rl_env_buffers* out, char* error, size_t error_size) {
  const auto& b = *reinterpret_cast<const Batch<Env>*>(env);
  if (device == RL_DEVICE_CUDA) {
#if defined(__CUDACC__)
    if (rows->num_rows == 0) return 0;
    RowsKernel<Env, kStep><<<Blocks(rows->num_rows), kThreads, 0,
                             static_cast<cudaStream_t>(rows->stream)>>>(
        b.params, ToFields(b, *rows), rows->num_rows, rows->first_env, b.seed,
        actions, *out);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      rlenv::internal::WriteError(error, error_size, cudaGetErrorString(e));
    }
    return static_cast<int>(e);
#else
    return NoCuda(error, error_size);
#endif
  }
  return rlenv::Guard(error, error_size, [&] {
    const Fields f = ToFields(b, *rows);
    for (int64_t r = 0; r < rows->num_rows; ++r) {
      OnRow<Env, kStep>(b.params, Row{&f, r, rows->first_env + r, b.seed},
                        actions, *out);
    }
  });
}

template <typename Env>
int Reset(const rl_device_env* env, rl_device device,
          const rl_device_rows* rows, const rl_env_buffers* out, char* error,
          size_t error_size) {
  return RunRows<Env, false>(env, device, rows, nullptr, out, error,
                             error_size);
}

template <typename Env>
int Step(const rl_device_env* env, rl_device device, const rl_device_rows* rows,
         const void* actions, const rl_env_buffers* out, char* error,
         size_t error_size) {
  return RunRows<Env, true>(env, device, rows, actions, out, error, error_size);
}

template <typename Env>
const rl_device_env_plugin* Table() {
  static const rl_device_env_plugin table = [] {
    rl_device_env_plugin t{};
    t.abi_version = RL_DEVICE_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_device_env_plugin);
    t.name = Env::kName;
#if defined(__CUDACC__)
    t.devices = RL_DEVICE_HOST | RL_DEVICE_CUDA;
#else
    t.devices = RL_DEVICE_HOST;
#endif
    t.create = Create<Env>;
    t.destroy = Destroy<Env>;
    t.reset = Reset<Env>;
    t.step = Step<Env>;
    return t;
  }();
  return &table;
}

}  // namespace internal
}  // namespace rldev

// Exports `Env`'s table as the library's entry point.
#define RL_DEVICE_ENV_PLUGIN(Env)                   \
  extern "C" __attribute__((visibility("default"))) \
  const rl_device_env_plugin*                       \
  rl_device_env_v1(void) {                          \
    return ::rldev::internal::Table<Env>();         \
  }

#endif  // RL_DEVICE_ENV_HPP_
