// Device environments (envs/plugin_api/rl_device_env.h) as the service
// sees them. A device env library is named by `env.plugin` like any plugin;
// LoadEnvPlugin (env_plugin.h) finds its rl_device_env_v1 entry and hands
// back a host table of the native ABI built here, so that everything the
// host does with plugins (actors, rl_local, check-env, the checks of what a
// plugin writes, checkpoints) works for device envs unchanged: the service
// allocates the env's state fields in host memory, steps them with the
// library's host build, splits the rows across the batch's threads, and
// saves the fields as the batch's state. Where the envs step on a GPU
// (actor/device_envs.h), DeviceEnvTableOf gives the library's own table.
#ifndef RL_ENVS_DEVICE_ENV_PLUGIN_H_
#define RL_ENVS_DEVICE_ENV_PLUGIN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "envs/plugin_api/rl_device_env.h"
#include "envs/plugin_api/rl_env_plugin.h"

namespace rl {

// OK if `table` (from `origin`'s entry point) is one this service can use:
// FAILED_PRECONDITION naming the version, size or null function otherwise.
absl::Status CheckDeviceEnvTable(const rl_device_env_plugin* table,
                                 const std::string& origin);

// OK if a layout declared by create is well formed: 1..MAX fields, names
// of [A-Za-z0-9_] unique, known dtypes, counts >= 1. FAILED_PRECONDITION
// naming the field otherwise.
absl::Status CheckDeviceStateLayout(const rl_device_state_layout& layout,
                                    const std::string& origin);

// Bytes of one element of `dtype` (0 for an unknown one).
int64_t FieldElementBytes(rl_field_dtype dtype);

// The native-ABI table that steps `device`'s host build (one per device
// table, kept for the process). RESOURCE_EXHAUSTED past 16 device env
// libraries in one process.
absl::StatusOr<const rl_env_plugin*> DeviceEnvHostTable(
    const rl_device_env_plugin* device);

// The device table behind a table DeviceEnvHostTable made, else null (a
// plain plugin, the built-in table).
const rl_device_env_plugin* DeviceEnvTableOf(const rl_env_plugin* table);

}  // namespace rl

#endif  // RL_ENVS_DEVICE_ENV_PLUGIN_H_
