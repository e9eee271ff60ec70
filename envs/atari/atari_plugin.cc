// Atari as a plugin (envs/plugin_api/rl_env_plugin.h): run files name it
// `plugin: atari` (found beside the binaries, as the MuJoCo plugin is) with
// a game's Gymnasium name as the id (`id: Breakout-v5`, or
// `ALE/Breakout-v5`) and CleanRL's preprocessing (envs/atari/atari_game.h)
// in C++, with no Python in the step. Each environment is its own ALE; the
// batch is split over `num_threads` shards (envs/shard_pool.h).
//
// env.kwargs (all optional): noop_max (30), frame_skip (4), screen_size
// (84), stack_num (4), episodic_life (true), reward_clip (true),
// fire_reset (true), repeat_action_probability (0), and
// max_num_frames_per_episode (108000), as rl_atari:<Game>-v5 takes them;
// rom_dir, the directory of ale-py's ROMs (default $RL_ATARI_ROM_DIR, else
// the installed ale-py wheel's this was built against). With episodic_life
// the reported returns and lengths are the games' (raw rewards over every
// life), as env.episodic_life declares.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ale_rom_dir.h"
#include "envs/atari/atari_game.h"
#include "envs/shard_pool.h"
#include "rl_env_plugin.hpp"

namespace rl::atari {
namespace {

// "Breakout-v5" or "ALE/Breakout-v5" -> "Breakout".
std::string GameName(const std::string& id) {
  std::string name = id;
  if (name.rfind("ALE/", 0) == 0) name = name.substr(4);
  const size_t version = name.rfind("-v");
  if (version == std::string::npos || name.substr(version) != "-v5") {
    throw std::invalid_argument(
        "env.id: an Atari game as Gymnasium names it, e.g. Breakout-v5 (got "
        "\"" +
        id + "\")");
  }
  return name.substr(0, version);
}

// Every option env.kwargs may hold (rl_atari's, and rom_dir).
constexpr const char* kKwargs[] = {"noop_max",
                                   "frame_skip",
                                   "screen_size",
                                   "stack_num",
                                   "episodic_life",
                                   "reward_clip",
                                   "fire_reset",
                                   "repeat_action_probability",
                                   "max_num_frames_per_episode",
                                   "full_action_space",
                                   "rom_dir"};

AtariOptions Options(const rl_env_options& o) {
  const rlenv::Kwargs kwargs(o.kwargs_json != nullptr ? o.kwargs_json : "{}");
  // A misspelt option would silently keep its default: refused instead.
  for (const std::string& key : kwargs.Keys()) {
    if (std::find(std::begin(kKwargs), std::end(kKwargs), key) ==
        std::end(kKwargs)) {
      std::string known;
      for (const char* k : kKwargs)
        known += known.empty() ? k : std::string(", ") + k;
      throw std::invalid_argument(
          "kwargs." + key + ": unknown option of plugin: atari (it takes " +
          known + ")");
    }
  }
  AtariOptions options;
  options.noop_max = static_cast<int>(kwargs.Int("noop_max", 30));
  options.frame_skip = static_cast<int>(kwargs.Int("frame_skip", 4));
  options.screen_size = static_cast<int>(kwargs.Int("screen_size", 84));
  options.stack_num = static_cast<int>(kwargs.Int("stack_num", 4));
  options.episodic_life = kwargs.Bool("episodic_life", true);
  options.reward_clip = kwargs.Bool("reward_clip", true);
  options.fire_reset = kwargs.Bool("fire_reset", true);
  options.repeat_action_probability =
      static_cast<float>(kwargs.Number("repeat_action_probability", 0.0));
  options.max_num_frames_per_episode =
      static_cast<int>(kwargs.Int("max_num_frames_per_episode", 108000));
  if (kwargs.Has("full_action_space") &&
      kwargs.Bool("full_action_space", false)) {
    throw std::invalid_argument(
        "kwargs.full_action_space: the native Atari plays each game's "
        "minimal action set (use rl_atari: ids for the full one)");
  }
  const char* env_dir = std::getenv("RL_ATARI_ROM_DIR");
  const std::string rom_dir = kwargs.String(
      "rom_dir",
      env_dir != nullptr && *env_dir != '\0' ? env_dir : RL_ALE_ROM_DIR);
  const std::string game = GameName(o.env_id != nullptr ? o.env_id : "");
  options.rom_path = rom_dir + "/" + RomName(game) + ".bin";
  return options;
}

class AtariBatch {
 public:
  AtariBatch(const rl_env_options& o, rl_env_info* info)
      : max_steps_(std::max(o.max_episode_steps, 0)) {
    const AtariOptions options = Options(o);
    const int n = std::max(o.num_envs, 0);
    for (int i = 0; i < n; ++i) {
      AtariOptions own = options;
      // Each ALE its own seed (sticky actions draw from it).
      own.ale_seed = static_cast<int>(
          rlenv::EnvSeed(o.seed, static_cast<uint64_t>(i)) & 0x7fffffff);
      games_.push_back(std::make_unique<AtariGame>(own));
      rngs_.emplace_back(rlenv::EnvSeed(o.seed, static_cast<uint64_t>(i)));
    }
    elapsed_.assign(n, 0);
    pool_ = std::make_unique<ShardPool>(
        std::max(1, std::min(std::max(o.num_threads, 1), std::max(n, 1))));
    *info = rl_env_info{};
    info->observation.kind = RL_SPACE_BOX;
    info->observation.dtype = RL_DTYPE_UINT8;
    info->observation.rank = 3;
    info->observation.shape[0] = options.stack_num;
    info->observation.shape[1] = options.screen_size;
    info->observation.shape[2] = options.screen_size;
    info->action.kind = RL_SPACE_DISCRETE;
    info->action.dtype = RL_DTYPE_INT64;
    info->action.rank = 1;
    // A batch of none reads the spaces from a game made for it.
    info->action.shape[0] =
        n > 0 ? games_[0]->num_actions() : AtariGame(options).num_actions();
    info->reward_low = options.reward_clip ? -1.0 : -INFINITY;
    info->reward_high = options.reward_clip ? 1.0 : INFINITY;
    obs_size_ = static_cast<int64_t>(options.stack_num) * options.screen_size *
                options.screen_size;
  }

  void Reset(const rl_env_buffers& out) {
    uint8_t* obs = static_cast<uint8_t*>(out.observations);
    ForEachShard([&](int i) {
      games_[i]->Reset(rngs_[i], obs + i * obs_size_);
      elapsed_[i] = 0;
    });
  }

  void Step(const int64_t* actions, const rl_env_buffers& out) {
    uint8_t* obs = static_cast<uint8_t*>(out.observations);
    uint8_t* final_obs = static_cast<uint8_t*>(out.final_observations);
    ForEachShard([&](int i) {
      uint8_t* row = obs + i * obs_size_;
      const AtariStep r =
          games_[i]->Step(static_cast<int>(actions[i]), rngs_[i], row);
      const int32_t length = ++elapsed_[i];
      // The service's own limit (env.max_episode_steps), if any, on top
      // of ALE's game limit.
      const bool truncated = r.truncated || (!r.terminated && max_steps_ > 0 &&
                                             length >= max_steps_);
      out.rewards[i] = r.reward;
      out.terminated[i] = r.terminated ? 1 : 0;
      out.truncated[i] = truncated ? 1 : 0;
      if (out.episode_returns != nullptr) {
        out.episode_returns[i] =
            r.game_over ? static_cast<float>(r.game_return) : 0.f;
      }
      if (out.episode_lengths != nullptr) {
        out.episode_lengths[i] = r.game_over ? r.game_length : 0;
      }
      if (r.terminated || truncated) {
        if (final_obs != nullptr) {
          std::copy(row, row + obs_size_, final_obs + i * obs_size_);
        }
        games_[i]->Reset(rngs_[i], row);
        elapsed_[i] = 0;
      }
    });
  }

  // Every game, its no-op generator and its step count (rl_env_plugin's
  // save_state and restore_state).
  std::string SaveState() {
    std::string out(kStateMagic);
    const uint64_t n = games_.size();
    PutBytes(&out, &n, sizeof(n));
    for (size_t i = 0; i < games_.size(); ++i) {
      games_[i]->SaveState(&out);
      std::ostringstream rng;
      rng << rngs_[i];
      PutString(&out, rng.str());
      PutBytes(&out, &elapsed_[i], sizeof(elapsed_[i]));
    }
    return out;
  }

  void RestoreState(std::string_view in) {
    if (in.substr(0, sizeof(kStateMagic) - 1) != kStateMagic) {
      throw std::runtime_error("not a saved Atari batch");
    }
    in.remove_prefix(sizeof(kStateMagic) - 1);
    uint64_t n = 0;
    GetBytes(&in, &n, sizeof(n));
    if (n != games_.size()) {
      throw std::runtime_error("a saved batch of " + std::to_string(n) +
                               " games; this one has " +
                               std::to_string(games_.size()));
    }
    for (size_t i = 0; i < games_.size(); ++i) {
      games_[i]->RestoreState(&in);
      std::istringstream rng(GetString(&in));
      rng >> rngs_[i];
      if (rng.fail()) throw std::runtime_error("saved state: a bad generator");
      GetBytes(&in, &elapsed_[i], sizeof(elapsed_[i]));
    }
    if (!in.empty()) {
      throw std::runtime_error("saved state: " + std::to_string(in.size()) +
                               " bytes past its end");
    }
  }

 private:
  static constexpr char kStateMagic[] = "rl-atari-batch-1";

  template <typename F>
  void ForEachShard(F&& fn) {
    const int n = static_cast<int>(games_.size());
    const int shards = pool_->num_shards();
    std::exception_ptr failure;
    std::mutex mu;
    pool_->Run([&](int s) {
      const int begin = static_cast<int>(int64_t{n} * s / shards);
      const int end = static_cast<int>(int64_t{n} * (s + 1) / shards);
      try {
        for (int i = begin; i < end; ++i) fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
    });
    if (failure) std::rethrow_exception(failure);
  }

  const int32_t max_steps_;
  int64_t obs_size_ = 0;
  std::vector<std::unique_ptr<AtariGame>> games_;
  std::vector<Rng> rngs_;
  std::vector<int32_t> elapsed_;
  std::unique_ptr<ShardPool> pool_;
};

AtariBatch* Of(rl_env* env) { return reinterpret_cast<AtariBatch*>(env); }

using rlenv::Guard;

const rl_env_plugin* Table() {
  static const rl_env_plugin table = [] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    t.name = "Atari (ALE 0.10.1, CleanRL's preprocessing in C++)";
    t.create = [](const rl_env_options* o, rl_env_info* info, char* error,
                  size_t error_size) -> rl_env* {
      AtariBatch* batch = nullptr;
      Guard(error, error_size, [&] { batch = new AtariBatch(*o, info); });
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
        Of(env)->Step(static_cast<const int64_t*>(actions), *out);
      });
    };
    t.save_state = [](rl_env* env, void* bytes, int64_t capacity, char* error,
                      size_t error_size) -> int64_t {
      int64_t size = -1;
      Guard(error, error_size, [&] {
        const std::string state = Of(env)->SaveState();
        size = static_cast<int64_t>(state.size());
        if (size <= capacity) std::memcpy(bytes, state.data(), state.size());
      });
      return size;
    };
    t.restore_state = [](rl_env* env, const void* bytes, int64_t size,
                         char* error, size_t error_size) {
      return Guard(error, error_size, [&] {
        Of(env)->RestoreState(
            std::string_view(static_cast<const char*>(bytes), size));
      });
    };
    return t;
  }();
  return &table;
}

}  // namespace
}  // namespace rl::atari

extern "C" __attribute__((visibility("default"))) const rl_env_plugin*
rl_env_plugin_v1(void) {
  return rl::atari::Table();
}
