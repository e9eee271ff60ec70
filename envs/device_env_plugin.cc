#include "envs/device_env_plugin.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "envs/shard_pool.h"

namespace rl {

int64_t FieldElementBytes(rl_field_dtype dtype) {
  switch (dtype) {
    case RL_FIELD_FLOAT32:
    case RL_FIELD_INT32:
      return 4;
    case RL_FIELD_FLOAT64:
    case RL_FIELD_INT64:
      return 8;
    case RL_FIELD_UINT8:
      return 1;
  }
  return 0;
}

absl::Status CheckDeviceEnvTable(const rl_device_env_plugin* table,
                                 const std::string& origin) {
  const auto failed = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("device environment ", origin, ": ", why));
  };
  if (table == nullptr) {
    return failed(absl::StrCat(RL_DEVICE_ENV_ENTRY, "() returned null"));
  }
  if (table->abi_version != RL_DEVICE_ENV_ABI_VERSION) {
    return failed(absl::StrCat("built for device env ABI version ",
                               table->abi_version, "; this service loads ",
                               RL_DEVICE_ENV_ABI_VERSION));
  }
  if (table->struct_size < sizeof(rl_device_env_plugin)) {
    return failed(absl::StrCat("its function table is ", table->struct_size,
                               " bytes; version ", RL_DEVICE_ENV_ABI_VERSION,
                               "'s is ", sizeof(rl_device_env_plugin)));
  }
  std::vector<std::string> missing;
  if (table->create == nullptr) missing.push_back("create");
  if (table->destroy == nullptr) missing.push_back("destroy");
  if (table->reset == nullptr) missing.push_back("reset");
  if (table->step == nullptr) missing.push_back("step");
  if (!missing.empty()) {
    return failed(absl::StrCat("its table leaves required functions null: ",
                               absl::StrJoin(missing, ", ")));
  }
  if ((table->devices & RL_DEVICE_HOST) == 0) {
    return failed(
        "its devices lack RL_DEVICE_HOST: every build must step on the host");
  }
  return absl::OkStatus();
}

absl::Status CheckDeviceStateLayout(const rl_device_state_layout& layout,
                                    const std::string& origin) {
  const auto failed = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("device environment ", origin, ": state layout: ", why));
  };
  if (layout.num_fields < 1 || layout.num_fields > RL_DEVICE_ENV_MAX_FIELDS) {
    return failed(absl::StrCat("num_fields must be 1-",
                               RL_DEVICE_ENV_MAX_FIELDS, " (got ",
                               layout.num_fields, ")"));
  }
  std::set<std::string> names;
  for (int f = 0; f < layout.num_fields; ++f) {
    const rl_device_field& field = layout.fields[f];
    const std::string at = absl::StrCat("fields[", f, "]");
    const std::string name = field.name != nullptr ? field.name : "";
    const bool word =
        !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
    if (!word) {
      return failed(absl::StrCat(at, ".name: must be [A-Za-z0-9_]+ (got \"",
                                 name, "\")"));
    }
    if (!names.insert(name).second) {
      return failed(
          absl::StrCat(at, ".name: \"", name, "\" is declared twice"));
    }
    if (FieldElementBytes(field.dtype) == 0) {
      return failed(absl::StrCat(at, " (", name, ").dtype: unknown (",
                                 static_cast<int>(field.dtype), ")"));
    }
    if (field.count < 1) {
      return failed(absl::StrCat(at, " (", name, ").count: must be >= 1 (got ",
                                 field.count, ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

int64_t Elements(const rl_space& s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= s.shape[d];
  return n;
}

// Bytes of one env's row of a space's buffer.
int64_t RowBytes(const rl_space& s, bool action) {
  if (!action) {
    return Elements(s) * (s.dtype == RL_DTYPE_UINT8 ? 1 : 4);
  }
  switch (s.kind) {
    case RL_SPACE_DISCRETE:
      return 8;
    case RL_SPACE_MULTI_DISCRETE:
      return s.shape[0] * 8;
    case RL_SPACE_MULTI_BINARY:
      return Elements(s) * 8;
    case RL_SPACE_BOX:
      return Elements(s) * 4;
  }
  return 0;
}

void WriteError(char* error, size_t size, const std::string& what) {
  if (error != nullptr && size > 0)
    std::snprintf(error, size, "%s", what.c_str());
}

template <typename T>
T* Offset(T* p, int64_t bytes) {
  if (p == nullptr) return nullptr;
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes);
}

// A batch of a device env's host build: the state fields in host memory.
class HostBatch {
 public:
  HostBatch(const rl_device_env_plugin* device, rl_device_env* env,
            const rl_device_state_layout& layout, const rl_env_info& info,
            int64_t num_envs, int num_threads)
      : device_(device),
        env_(env),
        layout_(layout),
        num_envs_(num_envs),
        obs_bytes_(RowBytes(info.observation, false)),
        action_bytes_(RowBytes(info.action, true)),
        pool_(std::make_unique<ShardPool>(static_cast<int>(
            std::max<int64_t>(1, std::min<int64_t>(num_threads, num_envs))))) {
    for (int f = 0; f < layout_.num_fields; ++f) {
      const int64_t bytes = FieldBytes(f);
      // 8-byte words, so that every dtype is aligned.
      storage_.emplace_back((bytes + 7) / 8, 0);
    }
  }
  ~HostBatch() { device_->destroy(env_); }

  int Reset(const rl_env_buffers* out, char* error, size_t size) {
    return ForEachShard(out, error, size,
                        [&](const rl_device_rows& rows, const rl_env_buffers& o,
                            char* e, size_t n) {
                          return device_->reset(env_, RL_DEVICE_HOST, &rows, &o,
                                                e, n);
                        });
  }

  int Step(const void* actions, const rl_env_buffers* out, char* error,
           size_t size) {
    return ForEachShard(out, error, size,
                        [&](const rl_device_rows& rows, const rl_env_buffers& o,
                            char* e, size_t n) {
                          return device_->step(
                              env_, RL_DEVICE_HOST, &rows,
                              Offset(actions, rows.first_env * action_bytes_),
                              &o, e, n);
                        });
  }

  // Every field's bytes in turn.
  int64_t SaveState(void* bytes, int64_t capacity) const {
    int64_t total = 0;
    for (int f = 0; f < layout_.num_fields; ++f) total += FieldBytes(f);
    if (capacity < total) return total;
    char* p = static_cast<char*>(bytes);
    for (int f = 0; f < layout_.num_fields; ++f) {
      std::memcpy(p, storage_[f].data(), FieldBytes(f));
      p += FieldBytes(f);
    }
    return total;
  }

  int RestoreState(const void* bytes, int64_t size, char* error,
                   size_t error_size) {
    int64_t total = 0;
    for (int f = 0; f < layout_.num_fields; ++f) total += FieldBytes(f);
    if (size != total) {
      WriteError(error, error_size,
                 absl::StrCat("saved state is ", size, " bytes; this batch's ",
                              layout_.num_fields, " fields take ", total));
      return 1;
    }
    const char* p = static_cast<const char*>(bytes);
    for (int f = 0; f < layout_.num_fields; ++f) {
      std::memcpy(storage_[f].data(), p, FieldBytes(f));
      p += FieldBytes(f);
    }
    return 0;
  }

 private:
  int64_t FieldBytes(int f) const {
    return layout_.fields[f].count *
           FieldElementBytes(layout_.fields[f].dtype) * num_envs_;
  }

  // Calls `call` for each shard's contiguous rows, with the fields and the
  // output buffers offset to its first row; the first failure's message.
  template <typename Call>
  int ForEachShard(const rl_env_buffers* out, char* error, size_t size,
                   Call&& call) {
    const int shards = pool_->num_shards();
    std::mutex mu;
    std::string failure;
    pool_->Run([&](int s) {
      const int64_t begin = num_envs_ * s / shards;
      const int64_t end = num_envs_ * (s + 1) / shards;
      std::array<void*, RL_DEVICE_ENV_MAX_FIELDS> fields{};
      for (int f = 0; f < layout_.num_fields; ++f) {
        fields[f] = reinterpret_cast<char*>(storage_[f].data()) +
                    begin * layout_.fields[f].count *
                        FieldElementBytes(layout_.fields[f].dtype);
      }
      rl_device_rows rows{fields.data(), end - begin, begin, nullptr};
      rl_env_buffers o{};
      o.observations = Offset(out->observations, begin * obs_bytes_);
      o.rewards = Offset(out->rewards, begin * 4);
      o.terminated = Offset(out->terminated, begin);
      o.truncated = Offset(out->truncated, begin);
      o.final_observations =
          Offset(out->final_observations, begin * obs_bytes_);
      o.episode_returns = Offset(out->episode_returns, begin * 4);
      o.episode_lengths = Offset(out->episode_lengths, begin * 4);
      char e[1024] = "";
      if (call(rows, o, e, sizeof(e)) != 0) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = e[0] != '\0' ? e : "(no message)";
      }
    });
    if (failure.empty()) return 0;
    WriteError(error, size, failure);
    return 1;
  }

  const rl_device_env_plugin* const device_;
  rl_device_env* const env_;
  const rl_device_state_layout layout_;
  const int64_t num_envs_;
  const int64_t obs_bytes_, action_bytes_;
  std::unique_ptr<ShardPool> pool_;
  std::vector<std::vector<uint64_t>> storage_;
};

HostBatch* Batch(rl_env* env) { return reinterpret_cast<HostBatch*>(env); }

rl_env* CreateHost(const rl_device_env_plugin* device,
                   const rl_env_options* options, rl_env_info* info,
                   char* error, size_t size) {
  rl_device_state_layout layout{};
  rl_device_env* env = device->create(options, info, &layout, error, size);
  if (env == nullptr) return nullptr;
  const std::string origin = device->name != nullptr ? device->name : "";
  if (absl::Status ok = CheckDeviceStateLayout(layout, origin); !ok.ok()) {
    device->destroy(env);
    WriteError(error, size, std::string(ok.message()));
    return nullptr;
  }
  if (info->has_action_mask != 0) {
    device->destroy(env);
    WriteError(error, size,
               absl::StrCat("device environment ", origin,
                            ": action masks are not part of the device env "
                            "ABI (version ",
                            RL_DEVICE_ENV_ABI_VERSION, ")"));
    return nullptr;
  }
  try {
    return reinterpret_cast<rl_env*>(new HostBatch(
        device, env, layout, *info, options->num_envs, options->num_threads));
  } catch (const std::exception& e) {  // allocation, threads
    device->destroy(env);
    WriteError(error, size, absl::StrCat("allocating the state: ", e.what()));
    return nullptr;
  }
}

void DestroyHost(rl_env* env) { delete Batch(env); }

int ResetHost(rl_env* env, const rl_env_buffers* out, char* error,
              size_t size) {
  return Batch(env)->Reset(out, error, size);
}

int StepHost(rl_env* env, const void* actions, const rl_env_buffers* out,
             char* error, size_t size) {
  return Batch(env)->Step(actions, out, error, size);
}

int64_t SaveHost(rl_env* env, void* bytes, int64_t capacity, char*, size_t) {
  return Batch(env)->SaveState(bytes, capacity);
}

int RestoreHost(rl_env* env, const void* bytes, int64_t size, char* error,
                size_t error_size) {
  return Batch(env)->RestoreState(bytes, size, error, error_size);
}

// A C table's create cannot carry its device table: one slot per device
// library, each with a create of its own.
constexpr int kSlots = 16;
const rl_device_env_plugin* g_devices[kSlots] = {};

template <int K>
rl_env* CreateSlot(const rl_env_options* options, rl_env_info* info,
                   char* error, size_t size) {
  return CreateHost(g_devices[K], options, info, error, size);
}

template <int... K>
constexpr std::array<decltype(&CreateSlot<0>), kSlots> MakeCreates(
    std::integer_sequence<int, K...>) {
  return {&CreateSlot<K>...};
}

constexpr auto kCreates =
    MakeCreates(std::make_integer_sequence<int, kSlots>());

struct Slots {
  absl::Mutex mu;
  int used = 0;
  rl_env_plugin tables[kSlots] = {};
};

Slots& TheSlots() {
  static Slots* slots = new Slots;
  return *slots;
}

}  // namespace

absl::StatusOr<const rl_env_plugin*> DeviceEnvHostTable(
    const rl_device_env_plugin* device) {
  Slots& slots = TheSlots();
  absl::MutexLock lock(&slots.mu);
  for (int k = 0; k < slots.used; ++k) {
    if (g_devices[k] == device) return &slots.tables[k];
  }
  if (slots.used == kSlots) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "more than ", kSlots, " device environment libraries in one process"));
  }
  const int k = slots.used++;
  g_devices[k] = device;
  rl_env_plugin& t = slots.tables[k];
  t.abi_version = RL_ENV_ABI_VERSION;
  t.struct_size = sizeof(rl_env_plugin);
  t.name = device->name;
  t.create = kCreates[k];
  t.destroy = DestroyHost;
  t.reset = ResetHost;
  t.step = StepHost;
  t.save_state = SaveHost;
  t.restore_state = RestoreHost;
  t.space_parts = nullptr;
  return &t;
}

const rl_device_env_plugin* DeviceEnvTableOf(const rl_env_plugin* table) {
  Slots& slots = TheSlots();
  absl::MutexLock lock(&slots.mu);
  for (int k = 0; k < slots.used; ++k) {
    if (&slots.tables[k] == table) return g_devices[k];
  }
  return nullptr;
}

}  // namespace rl
