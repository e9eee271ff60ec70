// Environments behind the plugin ABI (envs/plugin_api/rl_env_plugin.h): the
// one way actors and the trainer make environments. A run's env.plugin
// names a shared library (loaded once per process, never unloaded); an
// empty one means the built-in table (builtin_env_plugin.h), which serves
// the five classic-control ids through the same ABI.
//
// Data flow: EnvSpec (resolved by runspec/) -> FindEnvPlugin -> the
// plugin's create(options, &info) -> info checked against the spec ->
// a BatchedEnv whose Reset/Step call the plugin into caller-owned buffers
// and check what it wrote (finite observations and rewards, flags 0/1).
#ifndef RL_ENVS_ENV_PLUGIN_H_
#define RL_ENVS_ENV_PLUGIN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "envs/batched_env.h"
#include "envs/plugin_api/rl_env_plugin.h"
#include "envs/space_parts.h"
#include "proto/common.pb.h"

namespace rl {

// env.plugin "gymnasium": the Gymnasium bridge (envs/gym_bridge), found in
// the search path as libgym_bridge.so or beside the binaries.
inline constexpr char kGymnasiumPlugin[] = "gymnasium";

// env.plugin "mujoco": Gymnasium's MuJoCo v5 environments in C++
// (envs/mujoco), found as libmujoco_envs.so the same way.
inline constexpr char kMujocoPlugin[] = "mujoco";
// env.plugin "atari": Atari games with CleanRL's preprocessing in C++
// (envs/atari/atari_plugin.cc), bundled as libatari_envs.so.
inline constexpr char kAtariPlugin[] = "atari";
// env.plugin "pixel_breakout": PixelBreakout-v0, a device env
// (plugin_api/rl_device_env.h; examples/device_env), bundled as
// libpixel_breakout.so: its host build here, its CUDA kernels on a GPU.
inline constexpr char kPixelBreakoutPlugin[] = "pixel_breakout";
// env.plugin "light_cycles": LightCycles-v0, a game of two players per
// environment (envs/games/light_cycles.cc), bundled as liblight_cycles.so.
inline constexpr char kLightCyclesPlugin[] = "light_cycles";
// env.plugin "mpe_spread": SimpleSpread-v3, MPE's Simple Spread (PettingZoo's
// simple_spread_v3) in C++, N agents per environment
// (envs/games/mpe_spread_plugin.cc), bundled as libmpe_spread.so.
inline constexpr char kMpeSpreadPlugin[] = "mpe_spread";

// Where a plugin named without a '/' is looked for: the directories of
// $RL_ENV_PLUGIN_PATH (':'-separated), in order.
std::vector<std::string> EnvPluginSearchPath();

// Where a worker loads plugins from unless its operator says otherwise
// (the actor's --env_plugin_dirs): beside the binaries (the bundled
// gymnasium and mujoco plugins, an install's plugins/), the directories of
// $RL_ENV_PLUGIN_PATH, and the working directory (the checkout the
// embedded system runs in; not when it is "/"). docs/security.md.
std::vector<std::string> DefaultEnvPluginDirs();

// The file `plugin` names: itself when it holds a '/', else the first
// directory of `search_path` that has it (for "gymnasium", also beside
// the binaries). NOT_FOUND naming what was tried.
absl::StatusOr<std::string> FindEnvPluginFile(
    const std::string& plugin, const std::vector<std::string>& search_path);

// Loads the shared library at `path` (once per process; later calls return
// the same table) and checks its entry point: FAILED_PRECONDITION for a
// library that cannot be loaded, lacks rl_env_plugin_v1, was built for
// another ABI version, or leaves a required function null.
absl::StatusOr<const rl_env_plugin*> LoadEnvPlugin(const std::string& path);

// A plugin table and where it came from (for messages).
struct EnvPluginRef {
  const rl_env_plugin* table = nullptr;
  std::string origin;  // the library's path, or "built-in <id>"
};

// The table `spec` (resolved) names: the built-in one for an empty
// env.plugin, else the library found and loaded as above.
// FAILED_PRECONDITION naming what went wrong.
absl::StatusOr<EnvPluginRef> FindEnvPlugin(
    const EnvSpec& spec,
    const std::optional<std::vector<std::string>>& search_path = std::nullopt,
    const std::vector<std::string>& allowed_dirs = {});

// OK if what a plugin declared at create fits the run's `spec`; else
// FAILED_PRECONDITION naming both sides.
absl::Status CheckPluginInfo(const rl_env_info& info, const EnvSpec& spec,
                             const std::string& origin);

// The deadline of one call into `spec`'s plugin: env.call_timeout_s, or
// kDefaultEnvCallTimeoutSeconds when 0 (envs/call_watch.h).
absl::Duration EnvCallTimeout(const EnvSpec& spec);

// How the call watch names a plugin's calls: "environment plugin <origin>
// (env <id>)".
std::string WatchedOrigin(const std::string& origin, const EnvSpec& spec);

// The run file's env.kwargs as the JSON object the plugin is given.
absl::StatusOr<std::string> KwargsJson(const EnvSpec& spec);

// A batch's state through its table's save_state (rl_env_plugin.h: asked
// again at the size it says it needs), or INTERNAL "save_state failed:
// <the plugin's message>". The table must have save_state.
absl::StatusOr<std::string> SavePluginState(const rl_env_plugin& table,
                                            rl_env* env);

// What OpenEnv needs besides the spec.
struct EnvOpenOptions {
  int num_envs = 1;
  uint64_t seed = 0;
  int num_threads = 1;
  // For env.plugin names without a '/'; default: EnvPluginSearchPath().
  std::optional<std::vector<std::string>> search_path;
  // When not empty, a plugin library must lie under one of these
  // directories, as named (without "..") or after resolving symbolic
  // links: a worker's limit on what run files may make it load (the
  // actor's --env_plugin_dirs, DefaultEnvPluginDirs() when it gives none;
  // "*" lifts the limit). Empty: any (rl_local, whose user names their own
  // run file). Built-in environments need none. PERMISSION_DENIED outside.
  std::vector<std::string> allowed_dirs;
};

// `options.num_envs` environments of `spec` (resolved: runspec/), created
// through the built-in table or the plugin `spec.plugin()` names. The
// plugin's declared spaces must match the spec: FAILED_PRECONDITION naming
// both otherwise, as for any failure of the plugin to load or create. Its
// errors, and those of the environment's Reset and Step, are marked
// IsRunFatal (common/status.h): they would recur on any actor.
absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenEnv(
    const EnvSpec& spec, const EnvOpenOptions& options);

// The same with an already loaded table (tests, benches).
absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenEnvWith(
    const rl_env_plugin* plugin, const std::string& origin, const EnvSpec& spec,
    const EnvOpenOptions& options);

}  // namespace rl

#endif  // RL_ENVS_ENV_PLUGIN_H_
