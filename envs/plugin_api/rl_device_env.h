/* The device environment ABI, version 1: environments whose state lives on
 * a compute device (a GPU) beside the policy, stepped by kernels the caller
 * never waits for, and built for the host too so that every machine runs
 * and tests them.
 *
 * A device environment library exports one C function,
 *
 *     const rl_device_env_plugin* rl_device_env_v1(void);
 *
 * A run file names it as any plugin (`env.plugin`). The service then:
 *   1. calls create(options) once per batch: the env parses its kwargs,
 *      declares its spaces (rl_env_info, as rl_env_plugin.h) and the layout
 *      of its state: named fields, each `count` elements of a dtype per env;
 *   2. allocates every field itself, structure of arrays: field f is one
 *      buffer of num_envs x count_f elements, env i's at i x count_f, on the
 *      device the batch steps on (host memory on a CPU machine, device
 *      memory on a GPU);
 *   3. calls reset and step with the fields, the rows to step, and the
 *      output buffers (rl_env_buffers, laid out as rl_env_plugin.h says),
 *      all on that same device.
 * Because the service owns the state, it saves and restores it (resumed
 * runs continue exactly), copies it between the host and the device (the
 * first-use self-check steps the same state on both and compares), and
 * splits a host batch across threads (a call's rows are a contiguous range;
 * `first_env` says where it starts in the batch).
 *
 * Device calls (RL_DEVICE_CUDA): every pointer in `rows` and `out` and
 * `actions` is device memory; the call enqueues its kernels on
 * `rows->stream` (a cudaStream_t; NULL is the legacy default stream, the
 * one LibTorch's kernels use) and returns without synchronising. It
 * returns nonzero only when a launch fails (cudaGetLastError). Actions come
 * from the policy's sampling and are valid; they are not checked there.
 * Host calls (RL_DEVICE_HOST): the same, in host memory; the service checks
 * the actions before the call, and the call may fail with a message.
 *
 * Each step: the env writes observations, rewards, terminated, truncated
 * for every row, final_observations for rows whose episode ended (when not
 * NULL), episode_returns and episode_lengths (when not NULL: the ended
 * episode's undiscounted return and length, 0 elsewhere), and resets the
 * ended rows within the step (auto reset). It applies `max_episode_steps`
 * (options) itself, as truncation. Randomness must depend only on the
 * batch's seed, the env's index (first_env + row) and the env's own state
 * (e.g. an episode counter in a field): the host and device builds then
 * produce the same episodes.
 *
 * The C++ helper rl_device_env.hpp builds this table from one class of
 * per-env functions compiled by both g++ and nvcc.
 */
#ifndef RL_DEVICE_ENV_H_
#define RL_DEVICE_ENV_H_

#include <stddef.h>
#include <stdint.h>

#include "rl_env_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_DEVICE_ENV_ABI_VERSION 1

/* The name of the exported entry point, as a string for dlsym. */
#define RL_DEVICE_ENV_ENTRY "rl_device_env_v1"

/* The most state fields one env may declare. */
#define RL_DEVICE_ENV_MAX_FIELDS 32

/* Where a call runs (bits of rl_device_env_plugin.devices). */
typedef enum { RL_DEVICE_HOST = 1, RL_DEVICE_CUDA = 2 } rl_device;

/* The dtypes of state fields. */
typedef enum {
  RL_FIELD_FLOAT32 = 1,
  RL_FIELD_FLOAT64 = 2,
  RL_FIELD_INT32 = 3,
  RL_FIELD_INT64 = 4, /* also a uint64's bits */
  RL_FIELD_UINT8 = 5
} rl_field_dtype;

typedef struct {
  /* A name unique in the layout ([A-Za-z0-9_]+): checkpoints and
     messages use it. Owned by the env; valid while the batch lives. */
  const char* name;
  rl_field_dtype dtype;
  /* Elements per env (>= 1). */
  int64_t count;
} rl_device_field;

/* What create declares about the state. */
typedef struct {
  int32_t num_fields;
  rl_device_field fields[RL_DEVICE_ENV_MAX_FIELDS];
} rl_device_state_layout;

/* The rows one call steps: envs [first_env, first_env + num_rows) of the
   batch. `fields[f]` points at the first of these rows' elements of field
   f (the caller offsets it); the output buffers likewise start at the
   first row. */
typedef struct {
  void* const* fields;
  int64_t num_rows;
  int64_t first_env;
  /* RL_DEVICE_CUDA: the cudaStream_t to launch on (NULL: the legacy
     default stream). RL_DEVICE_HOST: NULL. */
  void* stream;
} rl_device_rows;

typedef struct rl_device_env rl_device_env; /* the env's parsed options */

typedef struct {
  /* RL_DEVICE_ENV_ABI_VERSION of the header the library was built with. */
  uint32_t abi_version;
  /* sizeof(rl_device_env_plugin) as the library saw it. */
  uint32_t struct_size;
  /* The library's name and version, for logs. */
  const char* name;
  /* The devices this build can step on: RL_DEVICE_HOST always, and
     RL_DEVICE_CUDA when its kernels were compiled (nvcc). */
  uint32_t devices;

  /* Parses `options` (env_id, kwargs_json, num_envs, seed,
     max_episode_steps; num_threads is the service's), declares the spaces
     in *info and the state in *layout. No device memory is touched. NULL
     on failure, with the reason in `error`. */
  rl_device_env* (*create)(const rl_env_options* options, rl_env_info* info,
                           rl_device_state_layout* layout, char* error,
                           size_t error_size);
  void (*destroy)(rl_device_env* env);

  /* Starts episode 0 of every row from the seed alone (whatever the fields
     held) and writes `observations`. */
  int (*reset)(const rl_device_env* env, rl_device device,
               const rl_device_rows* rows, const rl_env_buffers* out,
               char* error, size_t error_size);

  /* One step of every row, with auto reset (see the top of the file). */
  int (*step)(const rl_device_env* env, rl_device device,
              const rl_device_rows* rows, const void* actions,
              const rl_env_buffers* out, char* error, size_t error_size);
} rl_device_env_plugin;

typedef const rl_device_env_plugin* (*rl_device_env_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RL_DEVICE_ENV_H_ */
