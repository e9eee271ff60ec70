#include "envs/env_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "envs/builtin_env_plugin.h"
#include "envs/call_watch.h"
#include "envs/env_agents.h"
#include "envs/env_registry.h"

namespace rl {
namespace {

constexpr size_t kErrorBytes = 1024;

// Whether every one of `n` floats is finite: an exponent test on the bits
// (vectorised, unlike std::isfinite in a loop).
bool AllFinite(const float* p, int64_t n) {
  uint32_t bad = 0;
  for (int64_t k = 0; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, p + k, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// Calls into the built-in table are ours; every other plugin's are watched
// (envs/call_watch.h).
bool WatchCalls(const rl_env_plugin* plugin) {
  return plugin != BuiltinEnvPlugin();
}

// A plugin's failure: it would recur on any actor (common/status.h).
absl::Status Fatal(const std::string& message) {
  return MarkRunFatal(absl::FailedPreconditionError(message));
}

// A batch created through a plugin table.
class PluginEnv final : public BatchedEnv {
 public:
  // `widen`: the plugin writes uint8 observations that the run takes as
  // float32 (converted here).
  PluginEnv(const rl_env_plugin* plugin, std::string origin, rl_env* env,
            EnvSpec spec, int num_envs, bool widen)
      : plugin_(plugin),
        origin_(std::move(origin)),
        env_(env),
        spec_(std::move(spec)),
        num_envs_(num_envs),
        parts_(DiscreteActionParts(spec_)),
        bytes_(ObservationsAreBytes(spec_)),
        widen_(widen),
        timeout_(EnvCallTimeout(spec_)),
        watch_(WatchCalls(plugin_) ? CallWatch::Process().Register(
                                         WatchedOrigin(origin_, spec_))
                                   : nullptr),
        leave_(spec_.agents_leave()),
        alive_(leave_ ? num_envs : 0, 1),
        scratch_alive_(alive_.size(), 1) {}
  ~PluginEnv() override {
    {
      CallWatch::Scope call(watch_, "destroy", timeout_);
      plugin_->destroy(env_);
    }
    CallWatch::Process().Unregister(watch_);
  }

  const EnvSpec& spec() const override { return spec_; }
  int num_envs() const override { return num_envs_; }

  absl::Status Reset(void* observations,
                     uint8_t* action_masks = nullptr) override {
    rl_env_buffers out{};
    out.observations = PluginObservations(observations, &scratch_obs_);
    RETURN_IF_ERROR(MaskBuffer(action_masks, &out.action_masks));
    char error[kErrorBytes] = "";
    int failed;
    {
      CallWatch::Scope call(watch_, "reset", timeout_);
      failed = plugin_->reset(env_, &out, error, sizeof(error));
    }
    if (failed != 0) return Failed("reset", error);
    if (widen_) Widen(scratch_obs_.data(), observations, 0, num_envs_);
    std::fill(alive_.begin(), alive_.end(), 1);
    RETURN_IF_ERROR(CheckObservations(observations, "reset"));
    return CheckMasks(out.action_masks, "reset");
  }

  absl::Status StepDiscrete(const int64_t* actions,
                            const StepOutputs& out) override {
    if (!IsDiscrete(spec_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_.id(), " takes continuous actions; call StepContinuous"));
    }
    // [E] for Discrete, [E, parts] for MultiDiscrete.
    const int64_t k = static_cast<int64_t>(parts_.size());
    bool bad = false;
    for (int i = 0; i < num_envs_; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        bad |= static_cast<uint64_t>(actions[i * k + j]) >=
               static_cast<uint64_t>(parts_[j]);
      }
    }
    for (int64_t x = 0; bad && x < num_envs_ * k; ++x) {
      if (actions[x] < 0 || actions[x] >= parts_[x % k]) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec_.id(), ": action ", actions[x], " of env row ",
                         x / k, k > 1 ? absl::StrCat(", part ", x % k) : "",
                         " is out of range [0, ", parts_[x % k],
                         "); no environment was stepped"));
      }
    }
    return Step(actions, out);
  }

  absl::Status StepContinuous(const float* actions,
                              const StepOutputs& out) override {
    if (IsDiscrete(spec_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_.id(), " takes discrete actions; call StepDiscrete"));
    }
    const int64_t n =
        static_cast<int64_t>(num_envs_) * spec_.continuous_action_size();
    const bool finite = AllFinite(actions, n);
    for (int64_t k = 0; !finite && k < n; ++k) {
      if (!std::isfinite(actions[k])) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec_.id(), ": action of env row ",
                         k / spec_.continuous_action_size(),
                         " is not finite; no environment was stepped"));
      }
    }
    return Step(actions, out);
  }

  absl::Status SetState(int, const double*, int) override {
    return absl::UnimplementedError("SetState: built-in environments only");
  }
  int state_size() const override { return 0; }
  absl::Status SetElapsedSteps(int, int) override {
    return absl::UnimplementedError(
        "SetElapsedSteps: built-in environments only");
  }

  std::string SaveState() const override {
    if (plugin_->save_state == nullptr) return "";
    absl::StatusOr<std::string> bytes;
    {
      CallWatch::Scope call(watch_, "save_state", timeout_);
      bytes = SavePluginState(*plugin_, env_);
    }
    if (!bytes.ok()) {
      RL_LOG_WARNING("{}: {}", origin_, std::string(bytes.status().message()));
      return "";
    }
    return *std::move(bytes);
  }

  absl::Status RestoreState(const std::string& bytes) override {
    if (bytes.empty()) return absl::OkStatus();  // nothing was saved
    if (plugin_->restore_state == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          origin_, " cannot restore a saved state (no restore_state)"));
    }
    char error[kErrorBytes] = "";
    int failed;
    {
      CallWatch::Scope call(watch_, "restore_state", timeout_);
      failed = plugin_->restore_state(env_, bytes.data(), bytes.size(), error,
                                      sizeof(error));
    }
    if (failed != 0) return Failed("restore_state", error);
    return absl::OkStatus();
  }

  void RestoreAlive(const uint8_t* alive) override {
    if (leave_) std::copy(alive, alive + num_envs_, alive_.begin());
  }

 private:
  // Where the plugin writes masks: the caller's buffer, or scratch when the
  // caller wants none (the plugin writes them all the same).
  absl::Status MaskBuffer(uint8_t* caller, uint8_t** out) {
    *out = nullptr;
    if (!spec_.action_mask()) return absl::OkStatus();
    if (caller != nullptr) {
      *out = caller;
      return absl::OkStatus();
    }
    scratch_masks_.resize(static_cast<size_t>(num_envs_) *
                          ActionMaskSize(spec_));
    *out = scratch_masks_.data();
    return absl::OkStatus();
  }

  // Every part of every row allows at least one choice, and masks are 0
  // or 1.
  absl::Status CheckMasks(const uint8_t* masks, const char* call) const {
    if (masks == nullptr) return absl::OkStatus();
    const int64_t n = ActionMaskSize(spec_);
    for (int i = 0; i < num_envs_; ++i) {
      int64_t at = 0;
      for (size_t j = 0; j < parts_.size(); ++j) {
        uint8_t any = 0, bits = 0;
        for (int64_t c = 0; c < parts_[j]; ++c) {
          any |= masks[i * n + at + c];
          bits |= masks[i * n + at + c];
        }
        at += parts_[j];
        if (any == 0 || bits > 1) {
          return Fatal(
              absl::StrCat("environment plugin ", origin_, ": ", call,
                           " wrote an action mask for env row ", i,
                           parts_.size() > 1 ? absl::StrCat(", part ", j) : "",
                           any == 0 ? " that allows no action"
                                    : " with a value not 0 or 1"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Failed(const char* call, const char* error) const {
    return Fatal(
        absl::StrCat("environment plugin ", origin_, ": ", call,
                     " failed: ", error[0] != '\0' ? error : "(no message)"));
  }

  // Where the plugin writes observations: the caller's buffer, or uint8
  // scratch widened into it afterwards.
  void* PluginObservations(void* caller, std::vector<uint8_t>* scratch) {
    if (!widen_ || caller == nullptr) return caller;
    scratch->resize(static_cast<size_t>(num_envs_) * spec_.observation_size());
    return scratch->data();
  }

  // uint8 rows [begin, end) of `from` as float32 into `to`.
  void Widen(const uint8_t* from, void* to, int begin, int end) const {
    const int64_t size = spec_.observation_size();
    float* out = static_cast<float*>(to);
    for (int64_t k = begin * size; k < end * size; ++k) out[k] = from[k];
  }

  absl::Status CheckObservations(const void* observations,
                                 const char* call) const {
    if (bytes_) return absl::OkStatus();  // every byte is a valid element
    const float* obs = static_cast<const float*>(observations);
    const int64_t size = spec_.observation_size();
    const int64_t n = static_cast<int64_t>(num_envs_) * size;
    if (AllFinite(obs, n)) return absl::OkStatus();
    for (int64_t k = 0; k < n; ++k) {
      if (!std::isfinite(obs[k])) {
        return Fatal(absl::StrCat("environment plugin ", origin_, ": ", call,
                                  " wrote a non-finite observation (", obs[k],
                                  ") at env row ", k / size, ", element ",
                                  k % size));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Step(const void* actions, const StepOutputs& o) {
    rl_env_buffers out{};
    out.observations = PluginObservations(o.observations, &scratch_obs_);
    out.rewards = o.rewards;
    out.terminated = o.terminated;
    out.truncated = o.truncated;
    out.final_observations =
        PluginObservations(o.final_observations, &scratch_final_obs_);
    out.episode_returns = o.episode_returns;
    out.episode_lengths = o.episode_lengths;
    if (leave_) {
      out.alive = o.alive != nullptr ? o.alive : scratch_alive_.data();
    } else if (o.alive != nullptr) {
      std::fill(o.alive, o.alive + num_envs_, 1);  // no agent ever leaves
    }
    RETURN_IF_ERROR(MaskBuffer(o.action_masks, &out.action_masks));
    char error[kErrorBytes] = "";
    int failed;
    {
      CallWatch::Scope call(watch_, "step", timeout_);
      failed = plugin_->step(env_, actions, &out, error, sizeof(error));
    }
    if (failed != 0) return Failed("step", error);
    if (leave_) {
      if (std::string e = CheckLeavingStep(alive_.data(), out.alive, o.rewards,
                                           o.terminated, o.truncated, num_envs_,
                                           AgentsPerEnv(spec_));
          !e.empty()) {
        return Fatal(absl::StrCat("environment plugin ", origin_,
                                  ": step broke the rules of agents that "
                                  "leave early: ",
                                  e));
      }
      std::copy(out.alive, out.alive + num_envs_, alive_.begin());
    }
    RETURN_IF_ERROR(CheckMasks(out.action_masks, "step"));
    if (widen_) {
      Widen(scratch_obs_.data(), o.observations, 0, num_envs_);
      for (int i = 0; o.final_observations != nullptr && i < num_envs_; ++i) {
        if (o.terminated[i] | o.truncated[i]) {
          Widen(scratch_final_obs_.data(), o.final_observations, i, i + 1);
        }
      }
    }
    RETURN_IF_ERROR(CheckObservations(o.observations, "step"));
    if (o.final_observations != nullptr && !bytes_) {
      const float* final_obs = static_cast<const float*>(o.final_observations);
      // The last observation of each episode that ended: its value is
      // bootstrapped from when it was cut by a time limit.
      const int64_t size = spec_.observation_size();
      for (int i = 0; i < num_envs_; ++i) {
        if (!o.terminated[i] && !o.truncated[i]) continue;
        for (int64_t k = 0; k < size; ++k) {
          if (!std::isfinite(final_obs[i * size + k])) {
            return Fatal(absl::StrCat(
                "environment plugin ", origin_,
                ": step wrote a non-finite final observation (",
                final_obs[i * size + k], ") at env row ", i, ", element ", k));
          }
        }
      }
    }
    // Branch-free reductions first (vectorised); the slow search for what
    // is wrong only when something is.
    float low = INFINITY, high = -INFINITY;
    uint8_t flags = 0;
    for (int i = 0; i < num_envs_; ++i) {
      low = std::min(low, o.rewards[i]);
      high = std::max(high, o.rewards[i]);
      flags |= o.terminated[i] | o.truncated[i];
    }
    if (AllFinite(o.rewards, num_envs_) && low >= spec_.reward_low() &&
        high <= spec_.reward_high() && flags <= 1) {
      return absl::OkStatus();
    }
    for (int i = 0; i < num_envs_; ++i) {
      if (!std::isfinite(o.rewards[i]) || o.rewards[i] < spec_.reward_low() ||
          o.rewards[i] > spec_.reward_high()) {
        return Fatal(absl::StrCat(
            "environment plugin ", origin_, ": step gave env row ", i,
            " the reward ", o.rewards[i], ", outside the declared range [",
            spec_.reward_low(), ", ", spec_.reward_high(), "]"));
      }
      if (o.terminated[i] > 1 || o.truncated[i] > 1) {
        return Fatal(absl::StrCat("environment plugin ", origin_,
                                  ": step wrote terminated=", o.terminated[i],
                                  " truncated=", o.truncated[i], " at env row ",
                                  i, " (flags are 0 or 1)"));
      }
    }
    return absl::OkStatus();
  }

  const rl_env_plugin* const plugin_;
  const std::string origin_;
  rl_env* const env_;
  const EnvSpec spec_;
  const int num_envs_;
  const std::vector<int64_t> parts_;  // DiscreteActionParts
  const bool bytes_;                  // uint8 observations for the caller
  const bool widen_;                  // uint8 from the plugin, float32 out
  const absl::Duration timeout_;
  CallWatch::Slot* const watch_;  // null for the built-in table
  std::vector<uint8_t> scratch_masks_;
  std::vector<uint8_t> scratch_obs_, scratch_final_obs_;  // when widen_
  // env.agents_leave: each row's alive after the last call (all 1 after a
  // reset), and where the plugin writes it when the caller passes none.
  const bool leave_;
  std::vector<uint8_t> alive_, scratch_alive_;
};

}  // namespace

std::string WatchedOrigin(const std::string& origin, const EnvSpec& spec) {
  return absl::StrCat("environment plugin ", origin, " (env ", spec.id(), ")");
}

absl::StatusOr<std::string> SavePluginState(const rl_env_plugin& table,
                                            rl_env* env) {
  char error[kErrorBytes] = "";
  std::string bytes(4096, '\0');
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int64_t n =
        table.save_state(env, bytes.data(), static_cast<int64_t>(bytes.size()),
                         error, sizeof(error));
    if (n < 0) {
      return absl::InternalError(absl::StrCat("save_state failed: ", error));
    }
    if (static_cast<size_t>(n) <= bytes.size()) {
      bytes.resize(static_cast<size_t>(n));
      return bytes;
    }
    bytes.resize(static_cast<size_t>(n));  // the size it needs: again
  }
  return absl::InternalError(
      "save_state failed: it asked for more room three times");
}

absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenEnvWith(
    const rl_env_plugin* plugin, const std::string& origin, const EnvSpec& spec,
    const EnvOpenOptions& options) {
  if (options.num_envs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_envs must be >= 1 (got ", options.num_envs, ")"));
  }
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_threads must be >= 1 (got ", options.num_threads, ")"));
  }
  if (options.num_envs % AgentsPerEnv(spec) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_envs ", options.num_envs, " is not a multiple of ",
                     AgentsPerEnv(spec),
                     ", the agents of one environment (env.agents_per_env)"));
  }
  ASSIGN_OR_RETURN(const std::string kwargs, KwargsJson(spec));
  rl_env_options o{};
  o.env_id = spec.id().c_str();
  o.kwargs_json = kwargs.c_str();
  o.num_envs = options.num_envs;
  o.seed = options.seed;
  o.max_episode_steps = spec.max_episode_steps();
  o.num_threads = options.num_threads;
  rl_env_info info{};
  char error[kErrorBytes] = "";
  rl_env* env;
  {
    CallWatch::Slot* watch =
        WatchCalls(plugin)
            ? CallWatch::Process().Register(WatchedOrigin(origin, spec))
            : nullptr;
    {
      CallWatch::Scope call(watch, "create", EnvCallTimeout(spec));
      env = plugin->create(&o, &info, error, sizeof(error));
    }
    CallWatch::Process().Unregister(watch);
  }
  if (env == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "environment plugin ", origin,
        ": create failed: ", error[0] != '\0' ? error : "(no message)"));
  }
  if (absl::Status fits = CheckPluginInfo(info, spec, origin); !fits.ok()) {
    plugin->destroy(env);
    return fits;
  }
  absl::StatusOr<EnvSpaceParts> parts =
      ReadSpaceParts(plugin, env, info, origin);
  if (parts.ok()) {
    if (absl::Status fits = CheckObservationParts(*parts, spec, origin);
        !fits.ok()) {
      parts = fits;
    }
  }
  if (!parts.ok()) {
    plugin->destroy(env);
    return parts.status();
  }
  absl::StatusOr<EnvAgents> agents = ReadEnvAgents(plugin, env, origin);
  if (agents.ok()) {
    if (absl::Status fits = CheckEnvAgents(*agents, spec, origin); !fits.ok()) {
      agents = fits;
    }
  }
  if (!agents.ok()) {
    plugin->destroy(env);
    return agents.status();
  }
  if (absl::Status allowed = AllowLeaving(plugin, env, spec, origin);
      !allowed.ok()) {
    plugin->destroy(env);
    return allowed;
  }
  if (agents->per_env > 1) {
    RL_LOG_INFO("{}: {}{}", spec.id(), DescribeAgents(*agents),
                spec.agents_leave() ? "; agents may leave early" : "");
  }
  if (!parts->observation.empty()) {
    RL_LOG_INFO("{}: observation parts: {}", spec.id(),
                DescribeLayout(parts->observation));
  }
  if (!parts->action.empty()) {
    RL_LOG_INFO("{}: action parts: {}", spec.id(),
                DescribeLayout(parts->action));
  }
  const bool widen =
      info.observation.dtype == RL_DTYPE_UINT8 && !ObservationsAreBytes(spec);
  return std::unique_ptr<BatchedEnv>(
      new PluginEnv(plugin, origin, env, spec, options.num_envs, widen));
}

namespace {

absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenEnvUnmarked(
    const EnvSpec& spec, const EnvOpenOptions& options) {
  RETURN_IF_ERROR(CheckResolvedEnvSpec(spec));
  ASSIGN_OR_RETURN(
      const EnvPluginRef plugin,
      FindEnvPlugin(spec, options.search_path, options.allowed_dirs));
  return OpenEnvWith(plugin.table, plugin.origin, spec, options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchedEnv>> OpenEnv(
    const EnvSpec& spec, const EnvOpenOptions& options) {
  auto env = OpenEnvUnmarked(spec, options);
  if (!env.ok()) return MarkRunFatal(env.status());
  return env;
}

}  // namespace rl
