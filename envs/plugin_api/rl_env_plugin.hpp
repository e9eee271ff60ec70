// A header-only C++ helper over the plugin ABI (rl_env_plugin.h): write one
// environment as a class, get a batched plugin. C++17, no dependency but the
// standard library; copy both headers into your repository.
//
//   #include "rl_env_plugin.hpp"
//
//   class Corridor final : public rlenv::Env {
//    public:
//     // The spaces, from the run file's env.kwargs.
//     static rlenv::Spaces Declare(const rlenv::Kwargs& kwargs) {
//       return {rlenv::Space::Box({2}, -1, 1), rlenv::Space::Discrete(2)};
//     }
//     explicit Corridor(const rlenv::Kwargs& kwargs) {}
//     void Reset(rlenv::Rng& rng, float* obs) override { ... }
//     rlenv::StepResult Step(const rlenv::Action& action, rlenv::Rng& rng,
//                            float* obs) override { ... }
//   };
//   RL_ENV_PLUGIN(Corridor, "corridor 1.0")
//
// The helper keeps N instances, a random stream per instance (seeded from
// the run's seed and the instance's index, so runs repeat), the episode
// counters, the time limit, final observations and auto reset. An exception
// thrown by the class becomes the plugin's error string (the run fails with
// it). Observations are float32 (derive from rlenv::Env) or uint8
// (rlenv::ByteEnv, with a Space::Bytes observation: images); actions are
// int64 (Discrete, MultiDiscrete, MultiBinary) or float32 (Box).
//
// Several agents per environment (a game of two players, a team): derive
// from rlenv::MultiAgentEnv (or MultiAgentByteEnv) and declare
// Spaces::agents. Reset and Step then handle every agent of one copy at
// once: agent k's observation at obs + k * (observation elements), its
// action actions[k], its result results[k]. The batch's rows are the
// agents of each copy in turn (rl_env_plugin.h); every agent of a copy
// ends its episode when any one's does.
//
// Resuming exactly: a class that also defines
//
//     void SaveState(std::string* bytes) const;    // its own state
//     void RestoreState(const std::string& bytes);  // throws on bad bytes
//
// gets the ABI's save_state and restore_state: the batch keeps each copy's
// bytes with its random stream, step count, returns and which agents are
// still in the game, so a run resumed from a checkpoint plays on from the
// same positions. Without them a resumed run starts new episodes.
#ifndef RL_ENV_PLUGIN_HPP_
#define RL_ENV_PLUGIN_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <locale>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rl_env_plugin.h"

namespace rlenv {

using Rng = std::mt19937_64;

struct Space {
  rl_space_kind kind = RL_SPACE_BOX;
  rl_dtype dtype = RL_DTYPE_FLOAT32;  // Box: float32 or uint8
  std::vector<int64_t> shape;
  std::vector<double> low, high;  // Box, one per element
  std::vector<int64_t> nvec;      // MultiDiscrete

  // float32 elements of `shape`, each in [low, high].
  static Space Box(std::vector<int64_t> shape, double low, double high) {
    Space s;
    s.kind = RL_SPACE_BOX;
    s.shape = std::move(shape);
    s.low.assign(s.elements(), low);
    s.high.assign(s.elements(), high);
    return s;
  }
  // uint8 elements of `shape` (an image: e.g. {84, 84, 4}), each in
  // [low, high]; observations of a ByteEnv.
  static Space Bytes(std::vector<int64_t> shape, int low = 0, int high = 255) {
    Space s = Box(std::move(shape), low, high);
    s.dtype = RL_DTYPE_UINT8;
    return s;
  }
  static Space Discrete(int64_t n) {
    Space s;
    s.kind = RL_SPACE_DISCRETE;
    s.shape = {n};
    return s;
  }
  static Space MultiDiscrete(std::vector<int64_t> nvec) {
    Space s;
    s.kind = RL_SPACE_MULTI_DISCRETE;
    s.shape = {static_cast<int64_t>(nvec.size())};
    s.nvec = std::move(nvec);
    return s;
  }
  static Space MultiBinary(int64_t n) {
    Space s;
    s.kind = RL_SPACE_MULTI_BINARY;
    s.shape = {n};
    return s;
  }
  // A Dict of named parts (Box, Discrete, MultiDiscrete, MultiBinary), in
  // the order given (Gymnasium's Dict sorts its keys: list them sorted to
  // match a Python twin). An observation of it is the parts flattened and
  // concatenated, as gymnasium.spaces.flatten does (a Discrete a one-hot,
  // a MultiDiscrete a one-hot per entry); write a part at
  // obs + Offset(name). It is uint8 (a ByteEnv) when every part is a
  // Space::Bytes, else float32 (an Env; a byte part then holds its values
  // as floats). An action of it is one MultiDiscrete of every discrete
  // part's entries, or one Box of every Box part's elements (Action::
  // discrete or box, from Offset(name)); the two kinds do not mix.
  static Space Dict(std::vector<std::pair<std::string, Space>> parts) {
    Space s;
    s.parts = std::move(parts);
    for (const auto& p : s.parts) {
      if (!p.second.parts.empty()) {
        throw std::invalid_argument("a Dict or Tuple part nests another");
      }
    }
    return s;
  }
  // A Tuple: a Dict whose parts are named "0", "1", ...
  static Space Tuple(std::vector<Space> parts) {
    std::vector<std::pair<std::string, Space>> named;
    for (size_t i = 0; i < parts.size(); ++i) {
      named.emplace_back(std::to_string(i), std::move(parts[i]));
    }
    return Dict(std::move(named));
  }
  std::vector<std::pair<std::string, Space>> parts;  // Dict and Tuple

  // Elements of one value of the space as an array (Discrete: 1); for a
  // Dict or Tuple, of the flat observation.
  int64_t elements() const {
    if (!parts.empty()) {
      int64_t n = 0;
      for (const auto& p : parts) n += p.second.flat_elements();
      return n;
    }
    if (kind == RL_SPACE_DISCRETE) return 1;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Elements in a flat observation: n for Discrete(n), sum(nvec) for a
  // MultiDiscrete, elements() otherwise.
  int64_t flat_elements() const {
    if (kind == RL_SPACE_DISCRETE && parts.empty()) return shape[0];
    if (kind == RL_SPACE_MULTI_DISCRETE && parts.empty()) {
      int64_t n = 0;
      for (int64_t k : nvec) n += k;
      return n;
    }
    return elements();
  }
  // Where part `name` of a Dict or Tuple starts: in an observation (its
  // flat elements), or in an action (`action` true: its entries, or its
  // Box elements).
  int64_t Offset(const std::string& name, bool action = false) const {
    int64_t at = 0;
    for (const auto& p : parts) {
      if (p.first == name) return at;
      at += action ? p.second.elements() : p.second.flat_elements();
    }
    throw std::invalid_argument("no part named " + name);
  }
};

struct Spaces {
  Space observation;
  Space action;
  double reward_low = -std::numeric_limits<double>::infinity();
  double reward_high = std::numeric_limits<double>::infinity();
  // The env writes an action mask with every observation (Discrete
  // actions): Env::ActionMask is called after each Reset and Step.
  bool action_mask = false;
  // Agents per environment copy (a MultiAgentEnv), and their names for
  // logs ("player_0", ...; empty: "0", "1", ...).
  int agents = 1;
  std::vector<std::string> agent_names;
};

// One environment's action: `discrete` (int64) for Discrete,
// MultiDiscrete and MultiBinary, `box` (float32) for Box.
struct Action {
  const int64_t* discrete = nullptr;
  const float* box = nullptr;
  int64_t index() const { return discrete[0]; }  // Discrete
};

struct StepResult {
  float reward = 0;
  bool terminated = false;
  bool truncated = false;
};

// The run file's env.kwargs (a JSON object). Top-level numbers, strings
// and booleans by key; json() is the whole text for anything else.
class Kwargs {
 public:
  explicit Kwargs(std::string json) : json_(std::move(json)) {}
  const std::string& json() const { return json_; }

  bool Has(const std::string& key) const { return Find(key) != nullptr; }
  double Number(const std::string& key, double fallback) const {
    const char* v = Find(key);
    if (v == nullptr) return fallback;
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    if (end == v)
      throw std::invalid_argument("kwargs." + key + ": not a number");
    return d;
  }
  int64_t Int(const std::string& key, int64_t fallback) const {
    const double d = Number(key, static_cast<double>(fallback));
    if (d != std::floor(d)) {
      throw std::invalid_argument("kwargs." + key + ": not an integer");
    }
    return static_cast<int64_t>(d);
  }
  bool Bool(const std::string& key, bool fallback) const {
    const char* v = Find(key);
    if (v == nullptr) return fallback;
    if (std::strncmp(v, "true", 4) == 0) return true;
    if (std::strncmp(v, "false", 5) == 0) return false;
    throw std::invalid_argument("kwargs." + key + ": not a boolean");
  }
  std::string String(const std::string& key,
                     const std::string& fallback) const {
    const char* v = Find(key);
    if (v == nullptr) return fallback;
    if (*v != '"')
      throw std::invalid_argument("kwargs." + key + ": not a string");
    std::string out;
    for (++v; *v != '\0' && *v != '"'; ++v) {
      if (*v == '\\' && v[1] != '\0') ++v;
      out += *v;
    }
    return out;
  }
  // A top-level array of numbers, e.g. "healthy_z_range": [0.7, 2.0].
  std::vector<double> Numbers(const std::string& key,
                              std::vector<double> fallback) const {
    const char* v = Find(key);
    if (v == nullptr) return fallback;
    if (*v != '[')
      throw std::invalid_argument("kwargs." + key + ": not an array");
    std::vector<double> out;
    for (++v;;) {
      v = SkipSpace(v);
      if (*v == ']') return out;
      char* end = nullptr;
      out.push_back(std::strtod(v, &end));
      if (end == v) {
        throw std::invalid_argument("kwargs." + key +
                                    ": not an array of numbers");
      }
      v = SkipSpace(end);
      if (*v == ',') ++v;
    }
  }
  // The top-level keys, in order: to refuse those an env does not know.
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    ForEachKey([&](std::string name, const char*) {
      keys.push_back(std::move(name));
      return false;
    });
    return keys;
  }

 private:
  static const char* SkipSpace(const char* p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') ++p;
    return p;
  }
  // Calls visit(name, start of its value) for each top-level key in order
  // until it returns true; returns that value's start, or null.
  template <typename Visit>
  const char* ForEachKey(Visit visit) const {
    const char* p = json_.c_str();
    int depth = 0;
    while (*p != '\0') {
      if (*p == '"') {
        const char* start = ++p;
        while (*p != '\0' && *p != '"') p += (*p == '\\' && p[1]) ? 2 : 1;
        std::string name(start, p - start);
        if (*p == '"') ++p;
        const char* q = SkipSpace(p);
        if (depth == 1 && *q == ':') {
          const char* value = SkipSpace(q + 1);
          if (visit(std::move(name), value)) return value;
        }
        continue;
      }
      if (*p == '{' || *p == '[') ++depth;
      if (*p == '}' || *p == ']') --depth;
      ++p;
    }
    return nullptr;
  }
  // The start of the value of top-level `key`, or null.
  const char* Find(const std::string& key) const {
    return ForEachKey(
        [&](const std::string& name, const char*) { return name == key; });
  }
  std::string json_;
};

// Derive from Env (float32 observations) or ByteEnv (uint8); see the top
// of the file.
template <typename T>
class BasicEnv {
  static_assert(std::is_same<T, float>::value ||
                    std::is_same<T, uint8_t>::value,
                "observations are float (Env) or uint8_t (ByteEnv)");

 public:
  using Observation = T;
  virtual ~BasicEnv() = default;
  // Starts an episode: writes the first observation.
  virtual void Reset(Rng& rng, T* obs) = 0;
  // One step: writes the next observation.
  virtual StepResult Step(const Action& action, Rng& rng, T* obs) = 0;
  // With Spaces::action_mask: which actions the current observation
  // allows (1 = allowed; at least one per part): n bytes for Discrete(n),
  // each part's choices in turn for MultiDiscrete. A masked action is
  // never taken.
  virtual void ActionMask(uint8_t* mask) { (void)mask; }
};
using Env = BasicEnv<float>;
using ByteEnv = BasicEnv<uint8_t>;

// An environment copy of Spaces::agents agents; see the top of the file.
template <typename T>
class BasicMultiAgentEnv {
 public:
  using Observation = T;
  virtual ~BasicMultiAgentEnv() = default;
  // Starts an episode: writes every agent's first observation.
  virtual void Reset(Rng& rng, T* obs) = 0;
  // One step of every agent: writes each one's next observation and
  // result. The episode ends for all when any result ends it (an agent
  // whose result says neither is then truncated). Where the run allows
  // agents to leave early (env.agents_leave), an agent whose result ends
  // leaves instead while others play on: later steps still pass it an
  // action (ignore it; its result is ignored too, and its observation
  // must stay finite), and the episode ends for all when every agent still
  // in it has ended.
  virtual void Step(const Action* actions, Rng& rng, T* obs,
                    StepResult* results) = 0;
  // With Spaces::action_mask: every agent's mask in turn.
  virtual void ActionMask(uint8_t* masks) { (void)masks; }
};
using MultiAgentEnv = BasicMultiAgentEnv<float>;
using MultiAgentByteEnv = BasicMultiAgentEnv<uint8_t>;

// True for a class that saves and restores its own state (see the top of
// the file); one of the two alone is a mistake the table refuses to build.
template <typename E, typename = void>
struct HasSaveState : std::false_type {};
template <typename E>
struct HasSaveState<E, std::void_t<decltype(std::declval<const E&>().SaveState(
                           std::declval<std::string*>()))>> : std::true_type {};
template <typename E, typename = void>
struct HasRestoreState : std::false_type {};
template <typename E>
struct HasRestoreState<E, std::void_t<decltype(std::declval<E&>().RestoreState(
                              std::declval<const std::string&>()))>>
    : std::true_type {};
template <typename E>
struct SavesState
    : std::bool_constant<HasSaveState<E>::value && HasRestoreState<E>::value> {
  static_assert(HasSaveState<E>::value == HasRestoreState<E>::value,
                "define both `void SaveState(std::string*) const` and "
                "`void RestoreState(const std::string&)`, public, or neither");
};

// The seed of environment `i` of a batch created with `seed`: splitmix64
// of (seed, i), so each environment has its own stream and runs repeat.
inline uint64_t EnvSeed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace internal {

inline void WriteError(char* error, size_t size, const char* what) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", what);
}

}  // namespace internal

// Runs `body` for a plugin's table entry written by hand (a batch class of
// its own, as the MuJoCo and Atari plugins have): 0, or 1 with the
// exception's message in `error`, since nothing may throw across the ABI.
template <typename F>
int Guard(char* error, size_t error_size, F&& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    internal::WriteError(error, error_size, e.what());
  } catch (...) {
    internal::WriteError(error, error_size, "unknown exception in the plugin");
  }
  return 1;
}

namespace internal {

inline void ToC(const Space& s, rl_space* out) {
  *out = rl_space{};
  out->kind = s.kind;
  out->dtype = s.kind == RL_SPACE_BOX ? s.dtype : RL_DTYPE_INT64;
  out->rank = static_cast<int32_t>(s.shape.size());
  for (size_t i = 0; i < s.shape.size() && i < RL_ENV_MAX_RANK; ++i) {
    out->shape[i] = s.shape[i];
  }
  out->low = s.low.empty() ? nullptr : s.low.data();
  out->high = s.high.empty() ? nullptr : s.high.data();
  out->nvec = s.nvec.empty() ? nullptr : s.nvec.data();
}

// A Dict or Tuple observation as the one Box its flat vector is: uint8
// when every part is, else float32; a Box part's bounds, [0, 1] for the
// others' one-hots and bits.
inline Space FlatObservation(const Space& dict) {
  Space flat;
  flat.kind = RL_SPACE_BOX;
  flat.dtype = RL_DTYPE_UINT8;
  for (const auto& p : dict.parts) {
    const Space& part = p.second;
    const bool box = part.kind == RL_SPACE_BOX;
    if (!box || part.dtype != RL_DTYPE_UINT8) flat.dtype = RL_DTYPE_FLOAT32;
    for (int64_t k = 0; k < part.flat_elements(); ++k) {
      flat.low.push_back(box && !part.low.empty() ? part.low[k] : 0.0);
      flat.high.push_back(box && !part.high.empty() ? part.high[k] : 1.0);
    }
  }
  flat.shape = {static_cast<int64_t>(flat.low.size())};
  return flat;
}

// A Dict or Tuple action as one MultiDiscrete of its discrete parts'
// entries, or one Box of its Box parts' elements.
inline Space FlatAction(const Space& dict) {
  Space flat;
  int boxes = 0;
  for (const auto& p : dict.parts) {
    const Space& part = p.second;
    switch (part.kind) {
      case RL_SPACE_BOX:
        ++boxes;
        if (part.dtype != RL_DTYPE_FLOAT32) {
          throw std::invalid_argument("action part " + p.first +
                                      ": a Box action holds float32");
        }
        flat.low.insert(flat.low.end(), part.low.begin(), part.low.end());
        flat.high.insert(flat.high.end(), part.high.begin(), part.high.end());
        break;
      case RL_SPACE_DISCRETE:
        flat.nvec.push_back(part.shape[0]);
        break;
      case RL_SPACE_MULTI_DISCRETE:
        flat.nvec.insert(flat.nvec.end(), part.nvec.begin(), part.nvec.end());
        break;
      case RL_SPACE_MULTI_BINARY:
        flat.nvec.insert(flat.nvec.end(), part.elements(), 2);
        break;
    }
  }
  if (boxes > 0 && !flat.nvec.empty()) {
    throw std::invalid_argument(
        "a Dict or Tuple action mixes Boxes with discrete parts");
  }
  if (boxes > 0) {
    flat.kind = RL_SPACE_BOX;
    flat.shape = {static_cast<int64_t>(flat.low.size())};
  } else {
    flat.kind = RL_SPACE_MULTI_DISCRETE;
    flat.shape = {static_cast<int64_t>(flat.nvec.size())};
  }
  return flat;
}

// The parts of a Dict or Tuple as the ABI lists them; `dict` (whose
// spaces they point into) must outlive them.
inline std::vector<rl_space_part> PartsToC(const Space& dict) {
  std::vector<rl_space_part> out(dict.parts.size());
  for (size_t i = 0; i < dict.parts.size(); ++i) {
    out[i].name = dict.parts[i].first.c_str();
    ToC(dict.parts[i].second, &out[i].space);
  }
  return out;
}

template <typename E>
class Batch {
 public:
  using T = typename E::Observation;  // float or uint8_t
  static constexpr bool kMultiAgent =
      std::is_base_of<BasicMultiAgentEnv<T>, E>::value;
  Batch(const rl_env_options& o, rl_env_info* info)
      : kwargs_(o.kwargs_json != nullptr ? o.kwargs_json : "{}"),
        spaces_(E::Declare(kwargs_)),
        max_steps_(o.max_episode_steps) {
    // Dict and Tuple spaces: their parts kept for space_parts, the batch
    // stepped on their flat spaces.
    if (!spaces_.observation.parts.empty()) {
      observation_dict_ = spaces_.observation;
      observation_parts_ = PartsToC(observation_dict_);
      spaces_.observation = FlatObservation(observation_dict_);
    }
    if (!spaces_.action.parts.empty()) {
      action_dict_ = spaces_.action;
      action_parts_ = PartsToC(action_dict_);
      spaces_.action = FlatAction(action_dict_);
    }
    if (spaces_.observation.kind != RL_SPACE_BOX) {
      throw std::invalid_argument("the helper's observations are Box spaces");
    }
    const rl_dtype want = sizeof(T) == 1 ? RL_DTYPE_UINT8 : RL_DTYPE_FLOAT32;
    if (spaces_.observation.dtype != want) {
      throw std::invalid_argument(
          sizeof(T) == 1 ? "a ByteEnv observes a Space::Bytes (or a Dict of "
                           "them only)"
                         : "an Env observes a float32 Space::Box (uint8 "
                           "observations: derive from ByteEnv)");
    }
    if (spaces_.observation.shape.size() > RL_ENV_MAX_RANK ||
        spaces_.action.shape.size() > RL_ENV_MAX_RANK) {
      throw std::invalid_argument("a space has more than 8 dimensions");
    }
    obs_size_ = spaces_.observation.elements();
    action_size_ = spaces_.action.elements();
    if (spaces_.action_mask) {
      // One byte per choice: n for Discrete(n); each part's choices in
      // turn for MultiDiscrete (2 per part of a MultiBinary).
      switch (spaces_.action.kind) {
        case RL_SPACE_DISCRETE:
          mask_size_ = spaces_.action.shape[0];
          break;
        case RL_SPACE_MULTI_DISCRETE:
          for (int64_t n : spaces_.action.nvec) mask_size_ += n;
          break;
        case RL_SPACE_MULTI_BINARY:
          mask_size_ = 2 * spaces_.action.elements();
          break;
        default:
          throw std::invalid_argument("action masks need integer actions");
      }
    }
    agents_ = spaces_.agents;
    if (agents_ < 1 || (agents_ > 1 && !kMultiAgent)) {
      throw std::invalid_argument(
          "Spaces::agents is " + std::to_string(agents_) +
          (agents_ < 1 ? "; at least 1"
                       : "; several agents need a MultiAgentEnv"));
    }
    if (!spaces_.agent_names.empty() &&
        spaces_.agent_names.size() != static_cast<size_t>(agents_)) {
      throw std::invalid_argument("Spaces::agent_names names " +
                                  std::to_string(spaces_.agent_names.size()) +
                                  " agents of " + std::to_string(agents_));
    }
    for (const std::string& name : spaces_.agent_names) {
      agent_names_.push_back(name.c_str());
    }
    if (o.num_envs % agents_ != 0) {
      throw std::invalid_argument(
          "num_envs " + std::to_string(o.num_envs) + " is not a multiple of " +
          std::to_string(agents_) +
          ", the agents of one environment (declare env.agents_per_env: " +
          std::to_string(agents_) +
          "; envs_per_actor counts rows and must be a multiple of it)");
    }
    // One instance, random stream and step count per copy; a return per
    // row.
    for (int32_t c = 0; c < o.num_envs / agents_; ++c) {
      envs_.push_back(std::make_unique<E>(kwargs_));
      rngs_.emplace_back(EnvSeed(o.seed, static_cast<uint64_t>(c)));
    }
    elapsed_.assign(envs_.size(), 0);
    returns_.assign(o.num_envs, 0.0);
    alive_.assign(o.num_envs, 1);
    actions_.resize(agents_);
    results_.resize(agents_);
    *info = rl_env_info{};
    ToC(spaces_.observation, &info->observation);
    ToC(spaces_.action, &info->action);
    info->reward_low = spaces_.reward_low;
    info->reward_high = spaces_.reward_high;
    info->has_action_mask = spaces_.action_mask ? 1 : 0;
  }

  void Parts(rl_env_parts* parts) const {
    *parts = rl_env_parts{};
    parts->num_observation_parts =
        static_cast<int32_t>(observation_parts_.size());
    parts->observation_parts =
        observation_parts_.empty() ? nullptr : observation_parts_.data();
    parts->num_action_parts = static_cast<int32_t>(action_parts_.size());
    parts->action_parts =
        action_parts_.empty() ? nullptr : action_parts_.data();
  }

  void Agents(rl_env_agents* agents) const {
    agents->agents_per_env = agents_;
    agents->agent_names = agent_names_.empty() ? nullptr : agent_names_.data();
  }

  // The run allows agents to leave early (rl_env_plugin.h).
  void AllowLeaving() {
    if (agents_ < 2) {
      throw std::invalid_argument(
          "agents leave early only from an environment of several agents "
          "(Spaces::agents >= 2)");
    }
    leave_ = true;
  }

  void Reset(const rl_env_buffers& out) {
    T* obs = static_cast<T*>(out.observations);
    std::fill(alive_.begin(), alive_.end(), 1);
    for (size_t c = 0; c < envs_.size(); ++c) {
      envs_[c]->Reset(rngs_[c], obs + c * agents_ * obs_size_);
      elapsed_[c] = 0;
      for (int k = 0; k < agents_; ++k) returns_[c * agents_ + k] = 0;
      if (mask_size_ > 0 && out.action_masks != nullptr) {
        envs_[c]->ActionMask(out.action_masks + c * agents_ * mask_size_);
      }
    }
  }

  // Every copy's state (SavesState<E>): its bytes, random stream, step
  // count, returns and alive rows, behind a tag and the batch's shape.
  std::string SaveState() const {
    std::string out(kStateTag);
    PutInt(&out, static_cast<int64_t>(envs_.size()));
    PutInt(&out, agents_);
    for (size_t c = 0; c < envs_.size(); ++c) {
      std::ostringstream rng;
      rng.imbue(std::locale::classic());
      rng << rngs_[c];
      PutBytes(&out, rng.str());
      PutInt(&out, elapsed_[c]);
      for (int k = 0; k < agents_; ++k) {
        const size_t i = c * agents_ + k;
        out.append(reinterpret_cast<const char*>(&returns_[i]), sizeof(double));
        out.push_back(static_cast<char>(alive_[i]));
      }
      std::string own;
      envs_[c]->SaveState(&own);
      PutBytes(&out, own);
    }
    return out;
  }

  void RestoreState(const char* bytes, size_t size) {
    const size_t tag = sizeof(kStateTag) - 1;
    if (size < tag || std::memcmp(bytes, kStateTag, tag) != 0) {
      throw std::invalid_argument(
          "restore_state: not a state this helper saved");
    }
    StateReader in{bytes + tag, size - tag};
    const int64_t copies = in.Int(), agents = in.Int();
    if (copies != static_cast<int64_t>(envs_.size()) || agents != agents_) {
      throw std::invalid_argument("restore_state: saved from " +
                                  std::to_string(copies) + " environments of " +
                                  std::to_string(agents) + " agents; this " +
                                  "batch has " + std::to_string(envs_.size()) +
                                  " of " + std::to_string(agents_));
    }
    // Read whole before changing anything: a bad state changes nothing.
    std::vector<Rng> rngs(envs_.size());
    std::vector<int32_t> elapsed(envs_.size());
    std::vector<double> returns(returns_.size());
    std::vector<uint8_t> alive(alive_.size());
    std::vector<std::string> own(envs_.size());
    for (size_t c = 0; c < envs_.size(); ++c) {
      std::istringstream rng(in.Bytes());
      rng.imbue(std::locale::classic());
      rng >> rngs[c];
      if (rng.fail()) {
        throw std::invalid_argument("restore_state: a random stream unread");
      }
      elapsed[c] = static_cast<int32_t>(in.Int());
      for (int k = 0; k < agents_; ++k) {
        const size_t i = c * agents_ + k;
        std::memcpy(&returns[i], in.Take(sizeof(double)).data(),
                    sizeof(double));
        alive[i] = static_cast<uint8_t>(in.Take(1)[0]);
      }
      own[c] = in.Bytes();
    }
    if (in.size != 0) {
      throw std::invalid_argument("restore_state: " + std::to_string(in.size) +
                                  " bytes left over");
    }
    // An instance that refuses its bytes puts the ones before it back.
    std::vector<std::string> before(envs_.size());
    for (size_t c = 0; c < envs_.size(); ++c) envs_[c]->SaveState(&before[c]);
    for (size_t c = 0; c < envs_.size(); ++c) {
      try {
        envs_[c]->RestoreState(own[c]);
      } catch (...) {
        for (size_t r = 0; r < c; ++r) envs_[r]->RestoreState(before[r]);
        throw;
      }
    }
    rngs_ = std::move(rngs);
    elapsed_ = std::move(elapsed);
    returns_ = std::move(returns);
    alive_ = std::move(alive);
  }

  void Step(const void* actions, const rl_env_buffers& out) {
    T* obs = static_cast<T*>(out.observations);
    T* final_obs = static_cast<T*>(out.final_observations);
    const bool box = spaces_.action.kind == RL_SPACE_BOX;
    for (size_t c = 0; c < envs_.size(); ++c) {
      const size_t first = c * agents_;  // the copy's first row
      for (int k = 0; k < agents_; ++k) {
        Action& a = actions_[k];
        if (box) {
          a.box =
              static_cast<const float*>(actions) + (first + k) * action_size_;
        } else {
          a.discrete =
              static_cast<const int64_t*>(actions) + (first + k) * action_size_;
        }
      }
      T* rows = obs + first * obs_size_;
      if constexpr (kMultiAgent) {
        for (StepResult& r : results_) r = StepResult{};
        envs_[c]->Step(actions_.data(), rngs_[c], rows, results_.data());
      } else {
        results_[0] = envs_[c]->Step(actions_[0], rngs_[c], rows);
      }
      ++elapsed_[c];
      // The copy's game ends at the time limit, or when any agent's
      // episode ends; where agents leave early, when every agent still in
      // it has ended.
      bool ended = max_steps_ > 0 && elapsed_[c] >= max_steps_;
      bool every_one = true;
      for (int k = 0; k < agents_; ++k) {
        const StepResult& r = results_[k];
        const bool own = r.terminated || r.truncated;
        if (!leave_) ended = ended || own;
        if (alive_[first + k] && !own) every_one = false;
      }
      if (leave_) ended = ended || every_one;
      for (int k = 0; k < agents_; ++k) {
        const size_t i = first + k;
        if (!alive_[i]) {  // it left: padding until the copy resets
          out.rewards[i] = 0.f;
          out.terminated[i] = 0;
          out.truncated[i] = 0;
          if (out.episode_returns != nullptr) out.episode_returns[i] = 0.f;
          if (out.episode_lengths != nullptr) out.episode_lengths[i] = 0;
          continue;
        }
        const StepResult& r = results_[k];
        const bool row_ended = ended || r.terminated || r.truncated;
        returns_[i] += r.reward;
        out.rewards[i] = r.reward;
        out.terminated[i] = r.terminated ? 1 : 0;
        out.truncated[i] = row_ended && !r.terminated ? 1 : 0;
        if (out.episode_returns != nullptr) {
          out.episode_returns[i] =
              row_ended ? static_cast<float>(returns_[i]) : 0.f;
        }
        if (out.episode_lengths != nullptr) {
          out.episode_lengths[i] = row_ended ? elapsed_[c] : 0;
        }
        if (row_ended) returns_[i] = 0;
        if (row_ended && !ended) {  // leaves; its copy plays on
          alive_[i] = 0;
          if (final_obs != nullptr) {
            std::memcpy(final_obs + i * obs_size_, rows + k * obs_size_,
                        obs_size_ * sizeof(T));
          }
        }
      }
      if (ended) {
        if (final_obs != nullptr) {
          std::memcpy(final_obs + first * obs_size_, rows,
                      agents_ * obs_size_ * sizeof(T));
        }
        envs_[c]->Reset(rngs_[c], rows);
        elapsed_[c] = 0;
        std::fill(alive_.begin() + first, alive_.begin() + first + agents_, 1);
      }
      if (leave_ && out.alive != nullptr) {
        std::memcpy(out.alive + first, alive_.data() + first, agents_);
      }
      if (mask_size_ > 0 && out.action_masks != nullptr) {
        envs_[c]->ActionMask(out.action_masks + first * mask_size_);
      }
    }
  }

 private:
  static constexpr char kStateTag[] = "rlenv-batch-state-1";
  static void PutInt(std::string* out, int64_t v) {
    out->append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  static void PutBytes(std::string* out, const std::string& bytes) {
    PutInt(out, static_cast<int64_t>(bytes.size()));
    out->append(bytes);
  }
  struct StateReader {
    const char* at;
    size_t size;
    std::string Take(size_t n) {
      if (n > size) {
        throw std::invalid_argument("restore_state: the state is cut short");
      }
      std::string out(at, n);
      at += n;
      size -= n;
      return out;
    }
    int64_t Int() {
      int64_t v;
      std::memcpy(&v, Take(sizeof(v)).data(), sizeof(v));
      return v;
    }
    std::string Bytes() {
      const int64_t n = Int();
      if (n < 0) throw std::invalid_argument("restore_state: a bad length");
      return Take(static_cast<size_t>(n));
    }
  };

  Kwargs kwargs_;
  Spaces spaces_;                         // Dicts and Tuples flattened
  Space observation_dict_, action_dict_;  // as declared, where Dicts
  std::vector<rl_space_part> observation_parts_, action_parts_;
  int32_t max_steps_;
  int64_t obs_size_ = 0;
  int64_t action_size_ = 0;
  int64_t mask_size_ = 0;
  int agents_ = 1;                        // per copy
  std::vector<const char*> agent_names_;  // into spaces_.agent_names
  std::vector<std::unique_ptr<E>> envs_;  // one per copy
  std::vector<Rng> rngs_;                 // per copy
  std::vector<int32_t> elapsed_;          // per copy
  std::vector<double> returns_;           // per row
  bool leave_ = false;                    // AllowLeaving was called
  std::vector<uint8_t> alive_;            // per row
  std::vector<Action> actions_;           // one copy's, scratch
  std::vector<StepResult> results_;       // one copy's, scratch
};

template <typename E>
const rl_env_plugin* Table(const char* name) {
  static const rl_env_plugin table = [name] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    t.name = name;
    t.create = [](const rl_env_options* o, rl_env_info* info, char* error,
                  size_t error_size) -> rl_env* {
      try {
        return reinterpret_cast<rl_env*>(new Batch<E>(*o, info));
      } catch (const std::exception& e) {
        WriteError(error, error_size, e.what());
      } catch (...) {
        WriteError(error, error_size, "unknown exception in create");
      }
      return nullptr;
    };
    t.destroy = [](rl_env* env) { delete reinterpret_cast<Batch<E>*>(env); };
    t.reset = [](rl_env* env, const rl_env_buffers* out, char* error,
                 size_t error_size) -> int {
      try {
        reinterpret_cast<Batch<E>*>(env)->Reset(*out);
        return 0;
      } catch (const std::exception& e) {
        WriteError(error, error_size, e.what());
      } catch (...) {
        WriteError(error, error_size, "unknown exception in reset");
      }
      return 1;
    };
    t.step = [](rl_env* env, const void* actions, const rl_env_buffers* out,
                char* error, size_t error_size) -> int {
      try {
        reinterpret_cast<Batch<E>*>(env)->Step(actions, *out);
        return 0;
      } catch (const std::exception& e) {
        WriteError(error, error_size, e.what());
      } catch (...) {
        WriteError(error, error_size, "unknown exception in step");
      }
      return 1;
    };
    if constexpr (SavesState<E>::value) {
      t.save_state = [](rl_env* env, void* bytes, int64_t capacity, char* error,
                        size_t error_size) -> int64_t {
        try {
          const std::string state =
              reinterpret_cast<Batch<E>*>(env)->SaveState();
          const int64_t n = static_cast<int64_t>(state.size());
          if (bytes != nullptr && n <= capacity) {
            std::memcpy(bytes, state.data(), state.size());
          }
          return n;
        } catch (const std::exception& e) {
          WriteError(error, error_size, e.what());
        } catch (...) {
          WriteError(error, error_size, "unknown exception in save_state");
        }
        return -1;
      };
      t.restore_state = [](rl_env* env, const void* bytes, int64_t size,
                           char* error, size_t error_size) -> int {
        try {
          if (size < 0) {
            throw std::invalid_argument("restore_state: a negative size");
          }
          reinterpret_cast<Batch<E>*>(env)->RestoreState(
              static_cast<const char*>(bytes), static_cast<size_t>(size));
          return 0;
        } catch (const std::exception& e) {
          WriteError(error, error_size, e.what());
        } catch (...) {
          WriteError(error, error_size, "unknown exception in restore_state");
        }
        return 1;
      };
    }
    t.space_parts = [](rl_env* env, rl_env_parts* parts, char* error,
                       size_t error_size) -> int {
      (void)error;
      (void)error_size;
      reinterpret_cast<Batch<E>*>(env)->Parts(parts);
      return 0;
    };
    t.agents = [](rl_env* env, rl_env_agents* agents, char* error,
                  size_t error_size) -> int {
      (void)error;
      (void)error_size;
      reinterpret_cast<Batch<E>*>(env)->Agents(agents);
      return 0;
    };
    t.allow_leaving = [](rl_env* env, char* error, size_t error_size) -> int {
      try {
        reinterpret_cast<Batch<E>*>(env)->AllowLeaving();
        return 0;
      } catch (const std::exception& e) {
        WriteError(error, error_size, e.what());
      }
      return 1;
    };
    return t;
  }();
  return &table;
}

}  // namespace internal
}  // namespace rlenv

// Exports the plugin entry point for environment class `EnvClass`.
#define RL_ENV_PLUGIN(EnvClass, name)                                    \
  extern "C" __attribute__((visibility("default"))) const rl_env_plugin* \
  rl_env_plugin_v1(void) {                                               \
    return ::rlenv::internal::Table<EnvClass>(name);                     \
  }

#endif  // RL_ENV_PLUGIN_HPP_
