/* The native environment plugin ABI, version 1.
 *
 * A plugin is a shared library that exports one C function,
 *
 *     const rl_env_plugin* rl_env_plugin_v1(void);
 *
 * returning a table of functions over a batch of N environments. Actors and
 * rl_local load the library named by a run file's `env.plugin`, check
 * `abi_version`, create the batch with the run's seed and `env.kwargs` (as
 * JSON), and step it into buffers they own. The service's five built-in
 * environments implement this same table.
 *
 * This header is C (C99 and C++ compilers alike), depends on nothing but the
 * C library, and is meant to be copied into a plugin's own repository. The
 * C++ helper rl_env_plugin.hpp builds this table from a class.
 *
 * Layout of one step, for a batch of N environments:
 *   actions            N x action elements (int64 for Discrete and
 *                      MultiDiscrete and MultiBinary, float32 for Box)
 *   observations       N x observation elements of the observation dtype
 *   rewards            N float32
 *   terminated         N uint8 (1: the episode reached a terminal state)
 *   truncated          N uint8 (1: cut by a time limit, not terminated)
 *   action_masks       N x mask elements uint8, 1 = allowed (optional)
 *   final_observations N x observation elements (optional): for a row whose
 *                      episode ended at this step, its last observation;
 *                      other rows are left untouched
 *   episode_returns    N float32, episode_lengths N int32 (optional): where
 *                      an episode ended at this step, its undiscounted
 *                      return and length; 0 elsewhere
 * An environment whose episode ended is reset within the same step (auto
 * reset): `observations` holds the first observation of its next episode.
 * Elements are row-major ("C order"); row i belongs to environment i.
 *
 * Errors: a function that fails returns nonzero (or NULL) and writes a
 * NUL-terminated message into the caller's `error` buffer (at most
 * `error_size` bytes including the NUL). The run then fails with that
 * message. A plugin must not throw across this boundary or call exit().
 *
 * Threads: the service calls one batch from one thread at a time. Different
 * batches (two runs in one process) may be called concurrently.
 *
 * Dict and Tuple spaces: a batch declares the flat space its buffers hold
 * (`info->observation`, `info->action`) and, through the optional
 * `space_parts`, the named parts that flat space is made of, in order.
 * Each part is flattened as gymnasium.spaces.flatten does:
 *   Box              its elements, row-major
 *   Discrete(n)      n elements, a one-hot
 *   MultiDiscrete    sum(nvec) elements, a one-hot per entry in turn
 *   MultiBinary      its elements, each 0 or 1
 * and the parts are concatenated. Observations: the flat space is a Box of
 * uint8 when every part is a uint8 Box, else of float32 (a uint8 part then
 * holds its byte values as floats; the policy scales it to [0, 1]). Actions
 * stay actions, not one-hots: parts that are all Discrete, MultiDiscrete or
 * MultiBinary make one MultiDiscrete of their entries (Discrete(n): one
 * entry of n; MultiBinary(k): k entries of 2), parts that are all float32
 * Boxes make one Box of their elements; a mix of the two is not a space of
 * this ABI. A Dict's parts are in the order the plugin lists them
 * (Gymnasium's Dict sorts its keys; list them sorted to match a Python
 * twin), a Tuple's are named "0", "1", ...
 *
 * Several agents per environment: a batch may declare, through the
 * optional `agents`, that each environment copy holds A agents (A fixed,
 * every agent with the same spaces). Its N rows are then N / A copies of A
 * agents each: row c * A + k is agent k of copy c, with its own
 * observation, action, reward, flags, mask and episode statistics. The
 * service makes N a multiple of A (the run file's env.agents_per_env); a
 * batch refuses any other N at create. The agents of one copy end their
 * episodes at the same step (each flags terminated or truncated as fits
 * it), and the copy resets as one. One policy acts for every row, so the
 * agents of a game played against itself are trained together (self-play
 * with a shared policy).
 *
 * Agents that leave early: where the run allows it (env.agents_leave), the
 * service calls the optional `allow_leaving` once after create, and from
 * then the batch writes `alive` (N uint8) at every step: 1 where the row's
 * agent is in its game for the observation just written (it acts at the
 * next step), 0 where it has left while others of its copy play on. An
 * agent leaves at the step its own episode ends (terminated or truncated,
 * its episode return and length written as usual) and its copy goes on.
 * Until the copy's game ends, its row is padding: the service still passes
 * it an action, which the batch ignores; its reward, terminated and
 * truncated are 0, its observation is any finite one of its space (its
 * last, say), and its action mask (where the batch writes masks) allows
 * some action. When the last agents' episodes end, the copy resets as one
 * and every row is alive again. After reset every row is alive, so reset
 * writes no `alive`. A copy always has an agent alive. A batch the service
 * did not allow to leave keeps a copy's agents ending together.
 */
#ifndef RL_ENV_PLUGIN_H_
#define RL_ENV_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_ENV_ABI_VERSION 1

/* The name of the exported entry point, as a string for dlsym. */
#define RL_ENV_PLUGIN_ENTRY "rl_env_plugin_v1"

/* The most dimensions of one space. */
#define RL_ENV_MAX_RANK 8

typedef enum {
  RL_DTYPE_FLOAT32 = 1,
  RL_DTYPE_UINT8 = 2,
  RL_DTYPE_INT64 = 3
} rl_dtype;

typedef enum {
  /* A box of `shape` elements of `dtype` (float32 or uint8) within
     [low, high] per element. */
  RL_SPACE_BOX = 1,
  /* One integer in [0, n): n = shape[0], rank 1. As an action: int64. */
  RL_SPACE_DISCRETE = 2,
  /* `shape[0]` integers, the k-th in [0, nvec[k]). As an action: int64. */
  RL_SPACE_MULTI_DISCRETE = 3,
  /* `shape` elements each 0 or 1. As an action: int64. */
  RL_SPACE_MULTI_BINARY = 4
} rl_space_kind;

typedef struct {
  rl_space_kind kind;
  rl_dtype dtype;
  int32_t rank;
  int64_t shape[RL_ENV_MAX_RANK];
  /* Box: per-element bounds (product of shape each), or NULL for
     unbounded. Owned by the plugin; valid while the batch lives. */
  const double* low;
  const double* high;
  /* MultiDiscrete: shape[0] counts. Owned by the plugin. */
  const int64_t* nvec;
} rl_space;

/* What a batch declares when created. */
typedef struct {
  rl_space observation;
  rl_space action;
  /* Nonzero: the plugin writes action masks (one uint8 per discrete choice:
     n for Discrete, sum(nvec) for MultiDiscrete). */
  int32_t has_action_mask;
  /* Every reward of one step lies in [reward_low, reward_high] (use
     -INFINITY / INFINITY where unbounded). */
  double reward_low;
  double reward_high;
} rl_env_info;

/* What the service asks for. */
typedef struct {
  /* The run file's env.id (a plugin may serve several). */
  const char* env_id;
  /* The run file's env.kwargs as a JSON object ("{}" when none). */
  const char* kwargs_json;
  int32_t num_envs;
  /* Environment i's randomness must depend only on (seed, i): the same
     seed gives the same episodes. */
  uint64_t seed;
  /* Steps after which an episode is truncated (0: none from the service;
     the plugin's own limit, if any, applies). */
  int32_t max_episode_steps;
  /* Threads the plugin may use to step the batch (a hint). */
  int32_t num_threads;
} rl_env_options;

/* Where reset and step write; caller-owned, valid for the call. */
typedef struct {
  void* observations;
  float* rewards;
  uint8_t* terminated;
  uint8_t* truncated;
  uint8_t* action_masks;    /* NULL unless has_action_mask */
  void* final_observations; /* may be NULL */
  float* episode_returns;   /* may be NULL */
  int32_t* episode_lengths; /* may be NULL */
  /* N uint8, 1 = the row's agent is in its game (see "Agents that leave
     early" above); NULL unless the service called allow_leaving. Step
     writes it; reset does not (every row is alive). */
  uint8_t* alive;
} rl_env_buffers;

typedef struct rl_env rl_env; /* a plugin's batch, opaque to the service */

/* One named part of a Dict or Tuple space (see the top of the file). */
typedef struct {
  const char* name; /* the Dict key, or "0", "1", ... of a Tuple */
  rl_space space;   /* Box, Discrete, MultiDiscrete or MultiBinary */
} rl_space_part;

/* The parts a batch's flat spaces are made of; a count of 0 (and NULL)
   where that space is not a Dict or Tuple. Owned by the plugin; valid
   while the batch lives. */
typedef struct {
  int32_t num_observation_parts;
  const rl_space_part* observation_parts;
  int32_t num_action_parts;
  const rl_space_part* action_parts;
} rl_env_parts;

/* The agents of each environment copy (see the top of the file). Owned by
   the plugin; valid while the batch lives. */
typedef struct {
  /* A >= 1: agents per copy; rows c * A + k, k in [0, A). */
  int32_t agents_per_env;
  /* A names for logs and reports ("player_0", ...), or NULL: "0", "1". */
  const char* const* agent_names;
} rl_env_agents;

typedef struct {
  /* RL_ENV_ABI_VERSION of the header the plugin was built with. */
  uint32_t abi_version;
  /* sizeof(rl_env_plugin) as the plugin saw it. */
  uint32_t struct_size;
  /* The plugin's name and version, for logs. */
  const char* name;

  /* A batch of options->num_envs environments, its spaces in *info. NULL
     on failure, with the reason in `error`. */
  rl_env* (*create)(const rl_env_options* options, rl_env_info* info,
                    char* error, size_t error_size);
  void (*destroy)(rl_env* env);

  /* Starts a new episode in every environment; writes `observations` (and
     `action_masks`). Rewards and flags are not touched. */
  int (*reset)(rl_env* env, const rl_env_buffers* out, char* error,
               size_t error_size);

  /* One step of every environment, with auto reset (see above). */
  int (*step)(rl_env* env, const void* actions, const rl_env_buffers* out,
              char* error, size_t error_size);

  /* Optional (NULL when not supported): the batch's whole state as bytes,
     so that a resumed run continues exactly. save_state returns the size
     written, or the size needed when `capacity` is too small (call again),
     or -1 on error. */
  int64_t (*save_state)(rl_env* env, void* bytes, int64_t capacity, char* error,
                        size_t error_size);
  int (*restore_state)(rl_env* env, const void* bytes, int64_t size,
                       char* error, size_t error_size);

  /* Optional (NULL, or absent from a table whose struct_size ends before
     it, when the spaces are plain): the Dict or Tuple parts of the batch's
     spaces, written into *parts after create. Added in version 1 after the
     first release: the service reads it only where struct_size covers it,
     so plugins built before it load unchanged. */
  int (*space_parts)(rl_env* env, rl_env_parts* parts, char* error,
                     size_t error_size);

  /* Optional (NULL or absent, as space_parts: one agent per copy): the
     agents of each environment copy, written into *agents after create. */
  int (*agents)(rl_env* env, rl_env_agents* agents, char* error,
                size_t error_size);

  /* Optional (NULL or absent: a copy's agents end together): called once
     after create where the run allows agents to leave early
     (env.agents_leave; see the top of the file); from then `step` writes
     `alive`. Nonzero with a message to refuse. */
  int (*allow_leaving)(rl_env* env, char* error, size_t error_size);
} rl_env_plugin;

typedef const rl_env_plugin* (*rl_env_plugin_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RL_ENV_PLUGIN_H_ */
