#include "envs/env_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "envs/env_agents.h"
#include "envs/env_plugin.h"
#include "envs/env_registry.h"

namespace rl {
namespace {

constexpr size_t kErrorBytes = 1024;

int64_t MaskElements(const rl_space& s) {
  if (s.kind == RL_SPACE_DISCRETE) return s.shape[0];
  if (s.kind == RL_SPACE_MULTI_DISCRETE) {
    int64_t n = 0;
    for (int64_t k = 0; k < s.shape[0]; ++k) n += s.nvec[k];
    return n;
  }
  return 0;
}

// One batch made through a table, with its buffers.
class Probe {
 public:
  static absl::StatusOr<std::unique_ptr<Probe>> Create(
      const EnvPluginRef& plugin, const EnvSpec& spec,
      const EnvCheckOptions& options) {
    auto probe = std::unique_ptr<Probe>(new Probe(plugin.table));
    ASSIGN_OR_RETURN(probe->kwargs_, KwargsJson(spec));
    rl_env_options o{};
    o.env_id = spec.id().c_str();
    o.kwargs_json = probe->kwargs_.c_str();
    o.num_envs = options.num_envs;
    o.seed = options.seed;
    o.max_episode_steps = spec.max_episode_steps();
    o.num_threads = 1;
    char error[kErrorBytes] = "";
    probe->env_ = plugin.table->create(&o, &probe->info_, error, sizeof(error));
    if (probe->env_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "environment plugin ", plugin.origin, ": create failed: ", error));
    }
    // The range the run enforces: what the run file declares
    // (env.reward_low/high) where it is narrower than the env's own.
    probe->reward_low_ =
        std::max<double>(probe->info_.reward_low, spec.reward_low());
    probe->reward_high_ =
        std::min<double>(probe->info_.reward_high, spec.reward_high());
    const int64_t n = options.num_envs;
    const rl_space& obs = probe->info_.observation;
    probe->obs_bytes_ = obs.dtype == RL_DTYPE_UINT8;
    probe->obs_.assign(
        n * SpaceElements(obs) * (probe->obs_bytes_ ? 1 : sizeof(float)), 0);
    probe->final_obs_.assign(probe->obs_.size(), 0);
    probe->rewards_.assign(n, 0.f);
    probe->terminated_.assign(n, 0);
    probe->truncated_.assign(n, 0);
    probe->returns_.assign(n, 0.f);
    probe->lengths_.assign(n, 0);
    if (spec.agents_leave()) {
      probe->alive_.assign(n, 1);
      probe->was_alive_.assign(n, 1);
    }
    if (probe->info_.has_action_mask) {
      probe->masks_.assign(n * MaskElements(probe->info_.action), 1);
    }
    return probe;
  }
  ~Probe() {
    if (env_ != nullptr) table_->destroy(env_);
  }

  const rl_env_info& info() const { return info_; }
  // Rewards outside [reward_low(), reward_high()] are violations.
  double reward_low() const { return reward_low_; }
  double reward_high() const { return reward_high_; }
  rl_env* env() const { return env_; }
  rl_env_buffers Buffers() {
    rl_env_buffers b{};
    b.observations = obs_.data();
    b.rewards = rewards_.data();
    b.terminated = terminated_.data();
    b.truncated = truncated_.data();
    b.action_masks = masks_.empty() ? nullptr : masks_.data();
    b.final_observations = final_obs_.data();
    b.episode_returns = returns_.data();
    b.episode_lengths = lengths_.data();
    b.alive = alive_.empty() ? nullptr : alive_.data();
    return b;
  }
  std::string Reset() {
    char error[kErrorBytes] = "";
    const rl_env_buffers b = Buffers();
    if (table_->reset(env_, &b, error, sizeof(error)) != 0) {
      return absl::StrCat("reset failed: ", error);
    }
    std::fill(alive_.begin(), alive_.end(), 1);
    return "";
  }
  std::string Step(const void* actions) {
    char error[kErrorBytes] = "";
    was_alive_ = alive_;
    const rl_env_buffers b = Buffers();
    if (table_->step(env_, actions, &b, error, sizeof(error)) != 0) {
      return absl::StrCat("step failed: ", error);
    }
    return "";
  }

  // The batch's state through the table's save_state, or an error.
  std::string SaveState(std::string* bytes) {
    absl::StatusOr<std::string> saved = SavePluginState(*table_, env_);
    if (!saved.ok()) return std::string(saved.status().message());
    *bytes = *std::move(saved);
    return "";
  }
  std::string RestoreState(const std::string& bytes) {
    char error[kErrorBytes] = "";
    if (table_->restore_state(env_, bytes.data(),
                              static_cast<int64_t>(bytes.size()), error,
                              sizeof(error)) != 0) {
      return absl::StrCat("restore_state failed: ", error);
    }
    return "";
  }

  // Element k of the observations.
  float Observation(int64_t k) const {
    if (obs_bytes_) return obs_[k];
    float v;
    std::memcpy(&v, obs_.data() + k * sizeof(float), sizeof(float));
    return v;
  }
  int64_t ObservationElements() const {
    return static_cast<int64_t>(obs_.size()) / (obs_bytes_ ? 1 : 4);
  }

  // Observations as bytes: float32, or uint8 where obs_bytes_.
  std::vector<uint8_t> obs_, final_obs_;
  bool obs_bytes_ = false;
  std::vector<float> rewards_, returns_;
  std::vector<uint8_t> terminated_, truncated_, masks_;
  // env.agents_leave: each row's alive after the last step, and before it.
  std::vector<uint8_t> alive_, was_alive_;
  std::vector<int32_t> lengths_;

 private:
  explicit Probe(const rl_env_plugin* table) : table_(table) {}
  const rl_env_plugin* table_;
  std::string kwargs_;
  rl_env* env_ = nullptr;
  rl_env_info info_{};
  double reward_low_ = 0, reward_high_ = 0;
};

// The first problem of what `p` wrote, or "".
std::string CheckOutputs(const Probe& p, bool after_step) {
  const rl_space& obs = p.info().observation;
  const int64_t size = SpaceElements(obs);
  for (int64_t k = 0; k < p.ObservationElements(); ++k) {
    const float v = p.Observation(k);
    const int64_t e = static_cast<int64_t>(k) % size;
    if (!std::isfinite(v)) {
      return absl::StrCat("observation element ", e, " of env row ", k / size,
                          " is not finite (", v, ")");
    }
    if ((obs.low != nullptr && v < obs.low[e]) ||
        (obs.high != nullptr && v > obs.high[e])) {
      return absl::StrCat("observation element ", e, " of env row ", k / size,
                          " is ", v, ", outside the declared bounds [",
                          obs.low != nullptr ? obs.low[e] : -INFINITY, ", ",
                          obs.high != nullptr ? obs.high[e] : INFINITY, "]");
    }
  }
  if (!p.masks_.empty()) {
    const int64_t m = MaskElements(p.info().action);
    for (size_t i = 0; i < p.masks_.size() / m; ++i) {
      bool any = false;
      for (int64_t k = 0; k < m; ++k) any |= p.masks_[i * m + k] != 0;
      if (!any) {
        return absl::StrCat("the action mask of env row ", i,
                            " allows no action");
      }
    }
  }
  if (!after_step) return "";
  for (size_t i = 0; i < p.rewards_.size(); ++i) {
    const float r = p.rewards_[i];
    if (!std::isfinite(r) || r < p.reward_low() || r > p.reward_high()) {
      return absl::StrCat("the reward of env row ", i, " is ", r,
                          ", outside the declared range [", p.reward_low(),
                          ", ", p.reward_high(), "] (or not finite)");
    }
    if (p.terminated_[i] > 1 || p.truncated_[i] > 1) {
      return absl::StrCat("env row ", i, " wrote terminated=", p.terminated_[i],
                          " truncated=", p.truncated_[i],
                          " (flags are 0 or 1)");
    }
    if (p.terminated_[i] == 1 && p.truncated_[i] == 1) {
      return absl::StrCat("env row ", i,
                          " is both terminated and truncated (truncated is "
                          "for a time limit that cut a live episode)");
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<EnvCheckReport> CheckEnv(const EnvSpec& spec,
                                        const EnvCheckOptions& asked) {
  if (asked.num_envs < 1 || asked.steps < 1) {
    return absl::InvalidArgumentError("check-env: num_envs and steps >= 1");
  }
  // Whole environments: several agents each are as many rows.
  EnvCheckOptions options = asked;
  options.num_envs = WholeCopies(asked.num_envs, spec);
  RETURN_IF_ERROR(CheckResolvedEnvSpec(spec));
  ASSIGN_OR_RETURN(const EnvPluginRef plugin,
                   FindEnvPlugin(spec, options.search_path));
  ASSIGN_OR_RETURN(std::unique_ptr<Probe> a,
                   Probe::Create(plugin, spec, options));
  ASSIGN_OR_RETURN(std::unique_ptr<Probe> b,
                   Probe::Create(plugin, spec, options));
  EnvCheckReport report;
  report.origin = plugin.origin;
  report.plugin_name =
      plugin.table->name != nullptr ? plugin.table->name : "unnamed";
  const rl_env_info& info = a->info();
  report.observation = DescribeSpace(info.observation);
  report.action = DescribeSpace(info.action);
  report.reward_low = a->reward_low();
  report.reward_high = a->reward_high();
  report.action_masks = info.has_action_mask != 0;
  auto violation = [&](std::string v) {
    report.violation = std::move(v);
    return report;
  };
  if (absl::Status fits = CheckPluginInfo(info, spec, plugin.origin);
      !fits.ok()) {
    return violation(std::string(fits.message()));
  }
  // A Dict or Tuple: its parts, checked as an actor checks them.
  absl::StatusOr<EnvSpaceParts> parts =
      ReadSpaceParts(plugin.table, a->env(), info, plugin.origin);
  if (!parts.ok()) return violation(std::string(parts.status().message()));
  if (!parts->observation.empty()) {
    report.observation = absl::StrCat(report.observation, " = Dict(",
                                      DescribeLayout(parts->observation), ")");
  }
  if (!parts->action.empty()) {
    report.action = absl::StrCat(report.action, " = Dict(",
                                 DescribeLayout(parts->action), ")");
  }
  if (absl::Status fits = CheckObservationParts(*parts, spec, plugin.origin);
      !fits.ok()) {
    return violation(std::string(fits.message()));
  }
  absl::StatusOr<EnvAgents> agents =
      ReadEnvAgents(plugin.table, a->env(), plugin.origin);
  if (!agents.ok()) return violation(std::string(agents.status().message()));
  report.agents = DescribeAgents(*agents);
  if (absl::Status fits = CheckEnvAgents(*agents, spec, plugin.origin);
      !fits.ok()) {
    return violation(std::string(fits.message()));
  }
  const int64_t per_env = agents->per_env;
  for (Probe* p : {a.get(), b.get()}) {
    if (absl::Status allowed =
            AllowLeaving(plugin.table, p->env(), spec, plugin.origin);
        !allowed.ok()) {
      return violation(std::string(allowed.message()));
    }
  }
  if (spec.agents_leave()) report.agents += "; agents may leave early";
  if (std::string e = a->Reset(); !e.empty()) return violation(e);
  if (std::string e = b->Reset(); !e.empty()) return violation(e);
  if (a->obs_ != b->obs_) {
    return violation(
        "reset is not deterministic: two batches created with the same seed "
        "reset to different observations (randomness must come only from "
        "the seed and the env index)");
  }
  if (std::string e = CheckOutputs(*a, false); !e.empty()) {
    return violation("after reset: " + e);
  }
  // Random actions, the same for both batches.
  std::mt19937_64 rng(options.seed);
  const rl_space& act = info.action;
  const int64_t n = options.num_envs;
  std::vector<int64_t> ints(n * SpaceElements(act));
  std::vector<float> floats(n * SpaceElements(act));
  const bool box = act.kind == RL_SPACE_BOX;
  double returns = 0;
  const absl::Time start = absl::Now();
  absl::Duration in_plugin;
  // The next random actions, allowed by `a`'s masks; returns the buffer.
  auto draw_actions = [&]() -> const void* {
    for (size_t k = 0; k < ints.size(); ++k) {
      const int64_t e = static_cast<int64_t>(k) % SpaceElements(act);
      switch (act.kind) {
        case RL_SPACE_DISCRETE: {
          // A masked action is never taken.
          const int64_t choices = act.shape[0];
          int64_t pick = static_cast<int64_t>(rng() % choices);
          if (!a->masks_.empty()) {
            const uint8_t* mask =
                &a->masks_[(k / SpaceElements(act)) * choices];
            for (int64_t j = 0; j < choices && !mask[pick]; ++j) {
              pick = (pick + 1) % choices;
            }
          }
          ints[k] = pick;
          break;
        }
        case RL_SPACE_MULTI_DISCRETE:
          ints[k] = static_cast<int64_t>(rng() % act.nvec[e]);
          break;
        case RL_SPACE_MULTI_BINARY:
          ints[k] = static_cast<int64_t>(rng() % 2);
          break;
        case RL_SPACE_BOX: {
          const double low = act.low != nullptr ? act.low[e] : -1.0;
          const double high = act.high != nullptr ? act.high[e] : 1.0;
          std::uniform_real_distribution<double> u(
              std::isfinite(low) ? low : -1.0,
              std::isfinite(high) ? high : 1.0);
          floats[k] = static_cast<float>(u(rng));
          break;
        }
      }
    }
    return box ? static_cast<const void*>(floats.data()) : ints.data();
  };
  for (int64_t t = 0; t < options.steps; ++t) {
    const void* actions = draw_actions();
    const absl::Time before = absl::Now();
    if (std::string e = a->Step(actions); !e.empty()) {
      return violation(absl::StrCat("at step ", t + 1, ": ", e));
    }
    in_plugin += absl::Now() - before;
    if (std::string e = CheckOutputs(*a, true); !e.empty()) {
      return violation(absl::StrCat("at step ", t + 1, ": ", e));
    }
    if (spec.agents_leave()) {
      if (std::string e = CheckLeavingStep(
              a->was_alive_.data(), a->alive_.data(), a->rewards_.data(),
              a->terminated_.data(), a->truncated_.data(), n,
              static_cast<int>(per_env));
          !e.empty()) {
        return violation(absl::StrCat("at step ", t + 1, ": ", e));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const bool ended = a->terminated_[i] || a->truncated_[i];
      if (ended) {
        ++report.episodes;
        returns += a->returns_[i];
      }
      if (spec.agents_leave()) continue;  // checked above
      // The agents of one environment end together (its first row says).
      const int64_t first = i - i % per_env;
      if (ended != (a->terminated_[first] || a->truncated_[first])) {
        return violation(absl::StrCat(
            "at step ", t + 1, ": agent ", i % per_env, " of environment ",
            i / per_env, ended ? " ended its episode" : " went on",
            " while agent 0 ", ended ? "went on" : "ended its episode",
            " (the agents of one environment end together)"));
      }
    }
    report.steps += n;
    if (t < 1000) {  // determinism of steps, on the first ones
      if (std::string e = b->Step(actions); !e.empty()) {
        return violation(absl::StrCat("at step ", t + 1, ": ", e));
      }
      if (a->obs_ != b->obs_ || a->rewards_ != b->rewards_ ||
          a->terminated_ != b->terminated_ || a->alive_ != b->alive_) {
        return violation(absl::StrCat(
            "step ", t + 1,
            " is not deterministic: two batches with the same seed and "
            "actions wrote different observations, rewards or flags"));
      }
    }
  }
  (void)start;
  report.steps_per_second =
      report.steps / std::max(1e-9, absl::ToDoubleSeconds(in_plugin));
  report.mean_return = report.episodes > 0 ? returns / report.episodes : 0;
  // Resuming exactly: the state saved now, restored into fresh batches made
  // as a resumed run makes them (the same options), plays on as this one
  // does (rl_env_plugin.h, save_state). One batch has the run's seed, one
  // another seed: the first must play on as the original (a resumed run
  // recreates its envs with the run's seed); the second shows whether the
  // state carries the random streams too (a device env's randomness comes
  // from the seed, so its state need not).
  if (plugin.table->save_state == nullptr ||
      plugin.table->restore_state == nullptr) {
    report.state = "not saved (a resumed run starts new episodes)";
    return report;
  }
  report.state = "does not play on exactly (the violation below)";
  std::string state;
  if (std::string e = a->SaveState(&state); !e.empty()) {
    return violation(absl::StrCat("after step ", options.steps, ": ", e));
  }
  if (state.empty()) {  // as a resumed run reads it: nothing to restore
    report.state =
        "save_state wrote 0 bytes: not saved (a resumed run starts new "
        "episodes)";
    return report;
  }
  std::unique_ptr<Probe> fresh[2];  // the run's seed, another
  for (int k = 0; k < 2; ++k) {
    EnvCheckOptions o = options;
    o.seed = options.seed + k;
    ASSIGN_OR_RETURN(fresh[k], Probe::Create(plugin, spec, o));
    if (absl::Status allowed =
            AllowLeaving(plugin.table, fresh[k]->env(), spec, plugin.origin);
        !allowed.ok()) {
      return violation(std::string(allowed.message()));
    }
    if (std::string e = fresh[k]->Reset(); !e.empty()) return violation(e);
    if (std::string e = fresh[k]->RestoreState(state); !e.empty()) {
      return violation(absl::StrCat(
          "the state saved after step ", options.steps, " (", state.size(),
          " bytes), restored into a fresh batch: ", e));
    }
  }
  // What `c` wrote differently from `a` at a step, or nullptr.
  const int64_t row_bytes = static_cast<int64_t>(a->obs_.size()) / n;
  auto differs = [&](const Probe& c) -> const char* {
    if (a->obs_ != c.obs_) return "observations";
    if (a->rewards_ != c.rewards_) return "rewards";
    if (a->terminated_ != c.terminated_ || a->truncated_ != c.truncated_) {
      return "flags";
    }
    if (a->returns_ != c.returns_ || a->lengths_ != c.lengths_) {
      return "episode returns or lengths";
    }
    for (int64_t i = 0; i < n; ++i) {  // where an episode ended
      if ((a->terminated_[i] || a->truncated_[i]) &&
          std::memcmp(a->final_obs_.data() + i * row_bytes,
                      c.final_obs_.data() + i * row_bytes, row_bytes) != 0) {
        return "final observations";
      }
    }
    if (a->masks_ != c.masks_) return "action masks";
    if (a->alive_ != c.alive_) return "alive rows";
    return nullptr;
  };
  // 200 steps, and on until an episode has ended (a reset after the
  // restore), up to 2,000 (and never more than --steps).
  const int64_t least = std::min<int64_t>(options.steps, 200);
  const int64_t most = std::min<int64_t>(options.steps, 2000);
  int64_t replay = 0, ended_in_replay = 0;
  std::string other_seed_differs;  // where the batch of another seed did
  for (int64_t t = 0; t < most && (t < least || ended_in_replay == 0); ++t) {
    replay = t + 1;
    const void* actions = draw_actions();
    if (std::string e = a->Step(actions); !e.empty()) {
      return violation(
          absl::StrCat("at step ", options.steps + t + 1, ": ", e));
    }
    if (std::string e = CheckOutputs(*a, true); !e.empty()) {
      return violation(
          absl::StrCat("at step ", options.steps + t + 1, ": ", e));
    }
    for (int64_t i = 0; i < n; ++i) {
      ended_in_replay += a->terminated_[i] || a->truncated_[i];
    }
    for (int k = 0; k < 2; ++k) {
      if (k == 1 && !other_seed_differs.empty()) continue;
      if (std::string e = fresh[k]->Step(actions); !e.empty()) {
        return violation(
            absl::StrCat("restored, at its step ", t + 1, ": ", e));
      }
      const char* what = differs(*fresh[k]);
      if (what == nullptr) continue;
      if (k == 1) {
        other_seed_differs = absl::StrCat(what, " at step ", t + 1);
        continue;
      }
      return violation(absl::StrCat(
          "save_state does not save the whole state: the state saved after "
          "step ",
          options.steps,
          ", restored into a fresh batch of the same seed, wrote ", what,
          " different from the original's at its step ", t + 1,
          " (with the same actions); a resumed run would not play on as "
          "the original"));
    }
  }
  report.state = absl::StrCat(
      state.size(),
      " bytes; restored into a fresh batch, it played on as "
      "the original for ",
      replay, " steps (", ended_in_replay, " episodes ended in them)");
  if (!other_seed_differs.empty()) {
    absl::StrAppend(&report.state,
                    " with the run's seed; with another seed it wrote other ",
                    other_seed_differs,
                    ": the state carries no random stream, the seed does");
  } else {
    absl::StrAppend(&report.state, ", with the run's seed or another");
  }
  if (ended_in_replay == 0) {
    absl::StrAppend(&report.state,
                    "; as no episode ended in them, no reset after the "
                    "restore was checked");
  }
  return report;
}

std::string FormatEnvCheckReport(const EnvCheckReport& r) {
  std::string out = absl::StrFormat(
      "environment: %s (%s)\n"
      "observation: %s\n"
      "action:      %s%s\n"
      "agents:      %s\n"
      "rewards:     [%g, %g]\n"
      "stepped:     %d env steps at %.0f steps/s, %d episodes ended "
      "(random actions: mean return %.3f)\n"
      "state:       %s\n",
      r.origin, r.plugin_name, r.observation, r.action,
      r.action_masks ? " with action masks" : "",
      r.agents.empty() ? "(not read)" : r.agents, r.reward_low, r.reward_high,
      r.steps, r.steps_per_second, r.episodes, r.mean_return,
      r.state.empty() ? "(not checked)" : r.state);
  absl::StrAppend(&out, r.violation.empty()
                            ? "no violation found\n"
                            : absl::StrCat("VIOLATION: ", r.violation, "\n"));
  return out;
}

}  // namespace rl
