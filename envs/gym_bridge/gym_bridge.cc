// The Gymnasium bridge: a plugin (envs/plugin_api/rl_env_plugin.h) that
// steps any Gymnasium env through an embedded CPython, as
// gymnasium.make_vec (sync, or async with worker processes) with same-step
// autoreset. Inference, segments and the wire stay in C++; the Python half
// (gym_bridge.py, compiled into this library) only makes the vector env
// and turns its steps into arrays.
//
// The interpreter is started once per process, from $RL_PYTHON (a python3
// executable, e.g. a virtual environment's, whose site-packages are then
// used) or else $VIRTUAL_ENV/bin/python3, else the system's; $PYTHONPATH
// reaches it as usual (a user's own env module). The GIL is taken for each
// call and released between them.
#include <dlfcn.h>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "rl_env_plugin.h"

namespace py = pybind11;

namespace {

const char kBridgePy[] =
#include "envs/gym_bridge/gym_bridge_py.inc"
    ;
// rl_atari.py: CleanRL's Atari preprocessing as ids (rl_atari:Breakout-v5),
// loaded by gym_bridge.py when a run names one.
const char kAtariPy[] =
#include "envs/gym_bridge/rl_atari_py.inc"
    ;
// parallel_rows.py: PettingZoo Parallel envs as rows, loaded by
// gym_bridge.py when a run's function returns one.
const char kParallelRowsPy[] =
#include "envs/gym_bridge/parallel_rows_py.inc"
    ;

void WriteError(char* error, size_t size, const std::string& what) {
  if (error != nullptr && size > 0) {
    std::snprintf(error, size, "%s", what.c_str());
  }
}

std::string StartError() {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    // Extension modules (numpy's) resolve CPython's symbols globally: this
    // library was loaded RTLD_LOCAL, with libpython as its dependency.
    if (dlopen("libpython3.11.so.1.0", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) ==
        nullptr) {
      dlopen("libpython3.11.so.1.0", RTLD_NOW | RTLD_GLOBAL);
    }
    if (Py_IsInitialized()) return;  // the host runs Python already
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // the host's SIGTERM handling stays
    config.parse_argv = 0;
    std::string python;
    if (const char* p = std::getenv("RL_PYTHON"); p != nullptr && *p) {
      python = p;
    } else if (const char* v = std::getenv("VIRTUAL_ENV"); v != nullptr && *v) {
      python = std::string(v) + "/bin/python3";
    }
    if (!python.empty()) {
      PyConfig_SetBytesString(&config, &config.executable, python.c_str());
    }
    try {
      py::initialize_interpreter(&config, 0, nullptr, false);
      py::module_ bridge =
          py::module_::import("types").attr("ModuleType")("rl_gym_bridge");
      bridge.attr("_RL_ATARI_PY") = py::str(kAtariPy);
      bridge.attr("_PARALLEL_ROWS_PY") = py::str(kParallelRowsPy);
      py::exec(kBridgePy, bridge.attr("__dict__"));
      py::module_::import("sys").attr("modules")["rl_gym_bridge"] = bridge;
      // pybind11 2.10 sets up its internals on the first
      // gil_scoped_acquire; where that is on another thread it keeps a
      // thread state that PyGILState_Release has already freed, and the
      // next acquire crashes (pybind11 #2888). Set them up here, on the
      // thread that holds the GIL and the main thread state: two trainers
      // opening the bridge at once crashed in about half of runs before.
      py::detail::get_internals();
    } catch (const std::exception& e) {
      error = std::string(
                  "cannot start the embedded Python (set RL_PYTHON "
                  "to a python3 with gymnasium installed): ") +
              e.what();
    }
    PyConfig_Clear(&config);
    if (Py_IsInitialized()) PyEval_SaveThread();  // the GIL, released
  });
  return error;
}

struct Space {
  // "box", "discrete", "multi_discrete", "multi_binary", or an
  // unsupported class name.
  std::string kind;
  std::vector<int64_t> shape;
  std::vector<double> low, high;
  int64_t n = 0;
  std::vector<int64_t> nvec;  // multi_discrete
  std::string dtype;
  int64_t elements() const {
    int64_t e = 1;
    for (int64_t d : shape) e *= d;
    return kind == "discrete" ? 1 : e;
  }
};

Space ToSpace(const py::tuple& t) {
  Space s;
  s.kind = t[0].cast<std::string>();
  s.shape = t[1].cast<std::vector<int64_t>>();
  s.low = t[2].cast<std::vector<double>>();
  s.high = t[3].cast<std::vector<double>>();
  if (py::isinstance<py::list>(t[4])) {
    s.nvec = t[4].cast<std::vector<int64_t>>();
  } else {
    s.n = t[4].cast<int64_t>();
  }
  s.dtype = t[5].cast<std::string>();
  return s;
}

// Fills `out` from `s`; an error message for a space the ABI cannot say.
// A uint8 observation Box stays uint8 (gym_bridge.py's obs_dtype); other
// boxes are float32 (float64 ones converted; actions are float32).
std::string ToC(const Space& s, bool observation, rl_space* out) {
  *out = rl_space{};
  if (s.shape.size() > RL_ENV_MAX_RANK) return "more than 8 dimensions";
  out->rank = static_cast<int32_t>(s.shape.size());
  for (size_t i = 0; i < s.shape.size(); ++i) out->shape[i] = s.shape[i];
  if (s.kind == "box") {
    out->kind = RL_SPACE_BOX;
    out->dtype =
        observation && s.dtype == "uint8" ? RL_DTYPE_UINT8 : RL_DTYPE_FLOAT32;
    out->low = s.low.data();
    out->high = s.high.data();
    return "";
  }
  if (s.kind == "discrete") {
    out->kind = RL_SPACE_DISCRETE;
    out->dtype = RL_DTYPE_INT64;
    return "";
  }
  if (s.kind == "multi_discrete") {
    out->kind = RL_SPACE_MULTI_DISCRETE;
    out->dtype = RL_DTYPE_INT64;
    out->nvec = s.nvec.data();
    return "";
  }
  if (s.kind == "multi_binary") {
    out->kind = RL_SPACE_MULTI_BINARY;
    out->dtype = RL_DTYPE_INT64;
    return "";
  }
  return "a " + s.kind +
         " space (the bridge passes Box, Discrete, MultiDiscrete and "
         "MultiBinary actions)";
}

struct Bridge {
  py::object module;
  py::object env;
  Space observation, action;
  // A Dict or Tuple's leaves (space_parts), and the ABI's view of them.
  std::vector<std::pair<std::string, Space>> observation_leaves, action_leaves;
  std::vector<rl_space_part> observation_parts, action_parts;
  bool byte_observations = false;  // uint8, else float32
  // The env's episodes are lives of games (rl_atari): Python reports the
  // games; else the bridge counts episodes itself.
  bool episodic_life = false;
  int num_envs = 0;
  // A PettingZoo Parallel env's agents per copy (rows), and their names.
  int agents_per_env = 1;
  // Mask elements per row (a PettingZoo AEC env's Discrete n), 0: none.
  int action_mask_size = 0;
  std::vector<std::string> agent_names;
  std::vector<const char*> agent_name_pointers;
  uint64_t seed = 0;
  std::vector<double> returns;
  std::vector<int32_t> lengths;
  // env.agents_leave: each row's alive after the last call (padding rows
  // add no step to an episode).
  bool leave = false;
  std::vector<uint8_t> alive;

  ~Bridge() {
    py::gil_scoped_acquire gil;
    if (env) {
      try {
        env.attr("close")();
      } catch (...) {
      }
    }
    env = py::object();
    module = py::object();
  }
};

Bridge* Of(rl_env* env) { return reinterpret_cast<Bridge*>(env); }

std::string Describe(const std::exception& e) { return e.what(); }

rl_env* Create(const rl_env_options* o, rl_env_info* info, char* error,
               size_t error_size) {
  if (std::string e = StartError(); !e.empty()) {
    WriteError(error, error_size, e);
    return nullptr;
  }
  py::gil_scoped_acquire gil;
  try {
    auto bridge = std::make_unique<Bridge>();
    bridge->module = py::module_::import("rl_gym_bridge");
    py::object kwargs =
        py::module_::import("json").attr("loads")(o->kwargs_json);
    bridge->env = bridge->module.attr("make")(o->env_id, o->num_envs, kwargs,
                                              o->max_episode_steps, o->seed);
    py::tuple spaces = bridge->module.attr("spaces")(bridge->env);
    bridge->observation = ToSpace(spaces[0]);
    bridge->action = ToSpace(spaces[1]);
    bridge->num_envs = o->num_envs;
    bridge->seed = o->seed;
    bridge->episodic_life =
        bridge->module.attr("episodic_life")(bridge->env).cast<bool>();
    py::tuple agents = bridge->module.attr("agents")(bridge->env);
    bridge->agents_per_env = agents[0].cast<int>();
    bridge->agent_names = agents[1].cast<std::vector<std::string>>();
    for (const std::string& name : bridge->agent_names) {
      bridge->agent_name_pointers.push_back(name.c_str());
    }
    bridge->action_mask_size =
        bridge->module.attr("action_mask_size")(bridge->env).cast<int>();
    bridge->returns.assign(o->num_envs, 0.0);
    bridge->lengths.assign(o->num_envs, 0);
    *info = rl_env_info{};
    for (const auto& [space, c, what] :
         {std::tuple<const Space*, rl_space*, const char*>{
              &bridge->observation, &info->observation, "observation"},
          {&bridge->action, &info->action, "action"}}) {
      if (std::string e = ToC(*space, c == &info->observation, c); !e.empty()) {
        WriteError(error, error_size,
                   std::string("the Gymnasium bridge cannot pass its ") + what +
                       " space: " + e);
        return nullptr;
      }
    }
    info->has_action_mask = bridge->action_mask_size > 0 ? 1 : 0;
    info->reward_low = -INFINITY;
    info->reward_high = INFINITY;
    bridge->byte_observations = info->observation.dtype == RL_DTYPE_UINT8;
    // A Dict or Tuple: its leaves, for space_parts.
    py::tuple leaves = bridge->module.attr("parts")(bridge->env);
    for (int k = 0; k < 2; ++k) {
      auto& keep = k == 0 ? bridge->observation_leaves : bridge->action_leaves;
      auto& parts = k == 0 ? bridge->observation_parts : bridge->action_parts;
      for (const py::handle& leaf : leaves[k].cast<py::list>()) {
        const py::tuple pair = leaf.cast<py::tuple>();
        keep.emplace_back(pair[0].cast<std::string>(),
                          ToSpace(pair[1].cast<py::tuple>()));
      }
      parts.resize(keep.size());
      for (size_t i = 0; i < keep.size(); ++i) {
        parts[i].name = keep[i].first.c_str();
        if (std::string e = ToC(keep[i].second, k == 0, &parts[i].space);
            !e.empty()) {
          // Not listed, as gym_bridge.py's parts() does: the flat space
          // passes all the same.
          std::fprintf(stderr,
                       "[gym_bridge] the parts are not listed (part %s: "
                       "%s); the space passes flat\n",
                       keep[i].first.c_str(), e.c_str());
          keep.clear();
          parts.clear();
          break;
        }
      }
    }
    return reinterpret_cast<rl_env*>(bridge.release());
  } catch (const std::exception& e) {
    WriteError(error, error_size, Describe(e));
    return nullptr;
  }
}

void Destroy(rl_env* env) { delete Of(env); }

int AllowLeaving(rl_env* env, char* error, size_t error_size) {
  Bridge* b = Of(env);
  py::gil_scoped_acquire gil;
  try {
    b->module.attr("allow_leaving")(b->env);
    b->leave = true;
    b->alive.assign(b->num_envs, 1);
    return 0;
  } catch (const std::exception& e) {
    WriteError(error, error_size, Describe(e));
    return 1;
  }
}

int Agents(rl_env* env, rl_env_agents* agents, char*, size_t) {
  const Bridge* b = Of(env);
  agents->agents_per_env = b->agents_per_env;
  agents->agent_names =
      b->agent_name_pointers.empty() ? nullptr : b->agent_name_pointers.data();
  return 0;
}

int SpaceParts(rl_env* env, rl_env_parts* parts, char*, size_t) {
  const Bridge* b = Of(env);
  *parts = rl_env_parts{};
  parts->num_observation_parts =
      static_cast<int32_t>(b->observation_parts.size());
  parts->observation_parts =
      b->observation_parts.empty() ? nullptr : b->observation_parts.data();
  parts->num_action_parts = static_cast<int32_t>(b->action_parts.size());
  parts->action_parts =
      b->action_parts.empty() ? nullptr : b->action_parts.data();
  return 0;
}

// A view of `count` elements at `p` for Python (no copy). The bridge does
// not use pybind11's NumPy API: Debian's pybind11 2.10 predates NumPy 2's
// ABI. Python wraps the views with numpy.frombuffer instead.
template <typename T>
py::memoryview View(T* p, size_t count) {
  return py::memoryview::from_memory(
      const_cast<std::remove_const_t<T>*>(p),
      static_cast<py::ssize_t>(count * sizeof(T)),
      /*readonly=*/std::is_const_v<T>);
}

// The caller's action masks for Python to fill, or None.
py::object MaskView(const Bridge* b, const rl_env_buffers* out) {
  if (b->action_mask_size == 0 || out->action_masks == nullptr) {
    return py::none();
  }
  return View(out->action_masks,
              static_cast<size_t>(b->num_envs) * b->action_mask_size);
}

// `count` observation elements at `p`: uint8 or float32, as declared.
py::memoryview ObservationView(const Bridge* b, void* p, size_t count) {
  if (b->byte_observations) {
    return View(static_cast<uint8_t*>(p), count);
  }
  return View(static_cast<float*>(p), count);
}

int Reset(rl_env* env, const rl_env_buffers* out, char* error,
          size_t error_size) {
  Bridge* b = Of(env);
  py::gil_scoped_acquire gil;
  try {
    b->module.attr("reset_into")(
        b->env, b->seed,
        ObservationView(
            b, out->observations,
            static_cast<size_t>(b->num_envs) * b->observation.elements()),
        MaskView(b, out));
    std::fill(b->returns.begin(), b->returns.end(), 0.0);
    std::fill(b->lengths.begin(), b->lengths.end(), 0);
    std::fill(b->alive.begin(), b->alive.end(), 1);
    return 0;
  } catch (const std::exception& e) {
    WriteError(error, error_size, Describe(e));
    return 1;
  }
}

int Step(rl_env* env, const void* actions, const rl_env_buffers* out,
         char* error, size_t error_size) {
  Bridge* b = Of(env);
  const int n = b->num_envs;
  const size_t obs_count = static_cast<size_t>(n) * b->observation.elements();
  py::gil_scoped_acquire gil;
  try {
    py::object action_view =
        b->action.kind != "box"
            ? View(static_cast<const int64_t*>(actions),
                   static_cast<size_t>(n) * b->action.elements())
            : View(static_cast<const float*>(actions),
                   static_cast<size_t>(n) * b->action.elements());
    py::object final_view = py::none();
    if (out->final_observations != nullptr) {
      final_view = ObservationView(b, out->final_observations, obs_count);
    }
    py::object returns_view = py::none(), lengths_view = py::none();
    if (b->episodic_life && out->episode_returns != nullptr &&
        out->episode_lengths != nullptr) {
      returns_view = View(out->episode_returns, n);
      lengths_view = View(out->episode_lengths, n);
    }
    py::object alive_view = py::none();
    if (b->leave && out->alive != nullptr) alive_view = View(out->alive, n);
    b->module.attr("step_into")(
        b->env, action_view, ObservationView(b, out->observations, obs_count),
        View(out->rewards, n), View(out->terminated, n),
        View(out->truncated, n), final_view, returns_view, lengths_view,
        MaskView(b, out), alive_view);
    if (b->episodic_life) return 0;  // Python wrote the games
    for (int i = 0; i < n; ++i) {
      if (b->leave) {
        const bool was_alive = b->alive[i] != 0;
        b->alive[i] = out->alive != nullptr ? out->alive[i] : 1;
        if (!was_alive) {  // padding: its agent left; no episode runs
          if (out->episode_returns != nullptr) out->episode_returns[i] = 0.f;
          if (out->episode_lengths != nullptr) out->episode_lengths[i] = 0;
          continue;
        }
      }
      b->returns[i] += out->rewards[i];
      ++b->lengths[i];
      const bool ended = out->terminated[i] || out->truncated[i];
      if (out->episode_returns != nullptr) {
        out->episode_returns[i] =
            ended ? static_cast<float>(b->returns[i]) : 0.f;
      }
      if (out->episode_lengths != nullptr) {
        out->episode_lengths[i] = ended ? b->lengths[i] : 0;
      }
      if (ended) {
        b->returns[i] = 0;
        b->lengths[i] = 0;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    WriteError(error, error_size, Describe(e));
    return 1;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const rl_env_plugin*
rl_env_plugin_v1(void) {
  static const rl_env_plugin table = [] {
    rl_env_plugin t{};
    t.abi_version = RL_ENV_ABI_VERSION;
    t.struct_size = sizeof(rl_env_plugin);
    t.name = "Gymnasium bridge (embedded CPython 3.11)";
    t.create = Create;
    t.destroy = Destroy;
    t.reset = Reset;
    t.step = Step;
    t.space_parts = SpaceParts;
    t.agents = Agents;
    t.allow_leaving = AllowLeaving;
    return t;
  }();
  return &table;
}
