// Where plugin libraries come from and whether a worker may load them:
// the search path, the bundled plugins beside the binaries, the default
// allow-list (docs/security.md), and the one dlopen per library.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/builtin_env_plugin.h"
#include "envs/device_env_plugin.h"
#include "envs/env_plugin.h"

namespace rl {
std::vector<std::string> EnvPluginSearchPath() {
  const char* env = std::getenv("RL_ENV_PLUGIN_PATH");
  if (env == nullptr) return {};
  std::vector<std::string> dirs;
  for (absl::string_view d : absl::StrSplit(env, ':', absl::SkipEmpty())) {
    dirs.emplace_back(d);
  }
  return dirs;
}

namespace {

// The plugins built with the service, by name: their library and their
// package under bazel-bin.
struct Bundled {
  const char* name;
  const char* file;
  const char* package;
};
constexpr Bundled kBundled[] = {
    {kGymnasiumPlugin, "libgym_bridge.so", "envs/gym_bridge"},
    {kMujocoPlugin, "libmujoco_envs.so", "envs/mujoco"},
    {kAtariPlugin, "libatari_envs.so", "envs/atari"},
    {kPixelBreakoutPlugin, "libpixel_breakout.so", "examples/device_env"},
    {kLightCyclesPlugin, "liblight_cycles.so", "envs/games"},
    {kMpeSpreadPlugin, "libmpe_spread.so", "envs/games"},
};

// Beside the binaries, where bundled plugins are: bazel-bin/<package>/ of
// `packages` (from bazel-bin/{actor,trainer,...}/X), an install's plugins/
// (the image's /opt/rl), and the binaries' own directory.
std::vector<std::string> BesideTheBinaries(
    const std::vector<const char*>& packages) {
  std::vector<std::string> dirs;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return dirs;
  exe[n] = '\0';
  std::string dir(exe);
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* package : packages) {
    dirs.push_back(absl::StrCat(dir, "/../", package));
  }
  dirs.push_back(dir + "/../plugins");
  dirs.push_back(dir);
  return dirs;
}

}  // namespace

std::vector<std::string> DefaultEnvPluginDirs() {
  std::vector<const char*> packages;
  for (const Bundled& b : kBundled) {
    // Several bundled plugins may share a package: list it once.
    if (std::none_of(packages.begin(), packages.end(), [&](const char* p) {
          return std::strcmp(p, b.package) == 0;
        })) {
      packages.push_back(b.package);
    }
  }
  std::vector<std::string> dirs = BesideTheBinaries(packages);
  for (const std::string& dir : EnvPluginSearchPath()) dirs.push_back(dir);
  std::error_code error;
  const std::filesystem::path cwd = std::filesystem::current_path(error);
  // A working directory of "/" (a service manager's default) would allow
  // every path: it is left out then.
  if (!cwd.empty() && cwd != cwd.root_path()) dirs.push_back(cwd.string());
  return dirs;
}

absl::StatusOr<std::string> FindEnvPluginFile(
    const std::string& plugin, const std::vector<std::string>& search_path) {
  if (plugin.find('/') != std::string::npos) return plugin;
  const Bundled* bundled = nullptr;
  for (const Bundled& b : kBundled) {
    if (plugin == b.name) bundled = &b;
  }
  const std::string file = bundled != nullptr ? bundled->file : plugin;
  std::vector<std::string> dirs = search_path;
  if (bundled != nullptr) {
    for (std::string& dir : BesideTheBinaries({bundled->package})) {
      dirs.push_back(std::move(dir));
    }
  }
  for (const std::string& dir : dirs) {
    const std::string path = absl::StrCat(dir, "/", file);
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return absl::NotFoundError(absl::StrCat(
      "environment plugin \"", plugin, "\": not found in ",
      search_path.empty()
          ? std::string("$RL_ENV_PLUGIN_PATH (unset; name a path with a '/' "
                        "or set it)")
          : absl::StrCat("$RL_ENV_PLUGIN_PATH (",
                         absl::StrJoin(search_path, ":"), ")")));
}

absl::StatusOr<const rl_env_plugin*> LoadEnvPlugin(const std::string& path) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::map<std::string, const rl_env_plugin*>;
  absl::MutexLock lock(&mu);
  if (auto it = loaded->find(path); it != loaded->end()) return it->second;
  auto failed = [&](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("environment plugin ", path, ": ", why));
  };
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return failed(absl::StrCat("cannot load it: ", e ? e : "dlopen failed"));
  }
  void* symbol = dlsym(handle, RL_ENV_PLUGIN_ENTRY);
  if (symbol == nullptr) {
    // A device environment (rl_device_env.h): its host build behind a
    // table of the native ABI.
    if (void* device = dlsym(handle, RL_DEVICE_ENV_ENTRY); device != nullptr) {
      const rl_device_env_plugin* table =
          reinterpret_cast<rl_device_env_entry_fn>(device)();
      if (absl::Status ok = CheckDeviceEnvTable(table, path); !ok.ok()) {
        dlclose(handle);
        return ok;
      }
      absl::StatusOr<const rl_env_plugin*> host = DeviceEnvHostTable(table);
      if (!host.ok()) {
        dlclose(handle);
        return failed(std::string(host.status().message()));
      }
      RL_LOG_INFO("loaded device environment {} ({}; {})", path,
                  table->name != nullptr ? table->name : "unnamed",
                  (table->devices & RL_DEVICE_CUDA) != 0
                      ? "host and CUDA builds"
                      : "host build only");
      (*loaded)[path] = *host;  // never unloaded
      return *host;
    }
    dlclose(handle);
    return failed(absl::StrCat("it does not export ", RL_ENV_PLUGIN_ENTRY,
                               " or ", RL_DEVICE_ENV_ENTRY,
                               " (see envs/plugin_api/rl_env_plugin.h)"));
  }
  const rl_env_plugin* table =
      reinterpret_cast<rl_env_plugin_entry_fn>(symbol)();
  if (table == nullptr) {
    dlclose(handle);
    return failed(absl::StrCat(RL_ENV_PLUGIN_ENTRY, "() returned null"));
  }
  if (table->abi_version != RL_ENV_ABI_VERSION) {
    const uint32_t version = table->abi_version;
    dlclose(handle);
    return failed(absl::StrCat("built for plugin ABI version ", version,
                               "; this service loads version ",
                               RL_ENV_ABI_VERSION));
  }
  // The table as this service knows it: a plugin built before the later
  // optional functions (space_parts) has a shorter one, read up to its
  // struct_size; the rest stays null.
  constexpr size_t kFirstRelease = offsetof(rl_env_plugin, space_parts);
  if (table->struct_size < kFirstRelease) {
    const uint32_t size = table->struct_size;
    dlclose(handle);
    return failed(absl::StrCat("its function table is ", size,
                               " bytes; version ", RL_ENV_ABI_VERSION,
                               "'s is at least ", kFirstRelease));
  }
  auto* full = new rl_env_plugin{};  // never freed, as the library
  std::memcpy(static_cast<void*>(full), table,
              std::min<size_t>(table->struct_size, sizeof(rl_env_plugin)));
  table = full;
  std::vector<std::string> missing;
  if (table->create == nullptr) missing.push_back("create");
  if (table->destroy == nullptr) missing.push_back("destroy");
  if (table->reset == nullptr) missing.push_back("reset");
  if (table->step == nullptr) missing.push_back("step");
  if (!missing.empty()) {
    delete table;  // the copy
    dlclose(handle);
    return failed(absl::StrCat("its table leaves required functions null: ",
                               absl::StrJoin(missing, ", ")));
  }
  RL_LOG_INFO("loaded environment plugin {} ({})", path,
              table->name != nullptr ? table->name : "unnamed");
  (*loaded)[path] = table;  // never unloaded
  return table;
}

absl::StatusOr<EnvPluginRef> FindEnvPlugin(
    const EnvSpec& spec,
    const std::optional<std::vector<std::string>>& search_path,
    const std::vector<std::string>& allowed_dirs) {
  if (spec.plugin().empty()) {
    return EnvPluginRef{BuiltinEnvPlugin(),
                        absl::StrCat("built-in ", spec.id())};
  }
  absl::StatusOr<std::string> path = FindEnvPluginFile(
      spec.plugin(),
      search_path.has_value() ? *search_path : EnvPluginSearchPath());
  if (!path.ok()) {
    return absl::FailedPreconditionError(path.status().message());
  }
  // The library loaded is the one checked: its canonical path (a symbolic
  // link changed after the check cannot redirect the load).
  std::error_code error;
  std::filesystem::path real = std::filesystem::canonical(*path, error);
  if (real.empty()) {
    // Not there (LoadEnvPlugin names dlopen's error), checked as named.
    real = std::filesystem::absolute(*path, error).lexically_normal();
  }
  if (!allowed_dirs.empty() &&
      std::find(allowed_dirs.begin(), allowed_dirs.end(), "*") ==
          allowed_dirs.end()) {
    // Inside an allowed directory: the file itself (after resolving links)
    // or its path as named (without "..", so a link the operator put in an
    // allowed directory may point elsewhere; a run file's "../../" cannot).
    const std::filesystem::path named =
        std::filesystem::absolute(*path, error).lexically_normal();
    bool inside = false;
    for (const std::string& dir : allowed_dirs) {
      const std::filesystem::path lexical =
          std::filesystem::absolute(dir, error).lexically_normal();
      const std::filesystem::path root =
          std::filesystem::weakly_canonical(dir, error);
      for (const std::filesystem::path& base : {lexical, root}) {
        std::string prefix = base.string();
        if (prefix.empty()) continue;
        if (prefix.back() != '/') prefix += '/';
        inside |= real.string().rfind(prefix, 0) == 0 ||
                  named.string().rfind(prefix, 0) == 0;
      }
    }
    if (!inside) {
      return absl::PermissionDeniedError(absl::StrCat(
          "environment plugin ", *path,
          ": outside the directories this worker loads plugins from (",
          absl::StrJoin(allowed_dirs, ":"),
          "; the operator sets them with the actor's --env_plugin_dirs, "
          "default: beside the binaries, $RL_ENV_PLUGIN_PATH and the "
          "working directory; docs/security.md)"));
    }
  }
  ASSIGN_OR_RETURN(const rl_env_plugin* table, LoadEnvPlugin(real.string()));
  return EnvPluginRef{table, real.string()};
}

}  // namespace rl
