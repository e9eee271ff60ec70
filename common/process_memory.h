// This process's resident memory, for workers that recycle themselves
// when user code (a leaking environment plugin) left too much behind.
#ifndef RL_COMMON_PROCESS_MEMORY_H_
#define RL_COMMON_PROCESS_MEMORY_H_

#include <cstdint>

namespace rl {

// Resident set size in bytes (/proc/self/statm); 0 if it cannot be read.
int64_t ProcessRssBytes();

// The exit code of a worker that ended itself between runs to give its
// memory back (its supervisor starts a fresh one).
inline constexpr int kRecycledExitCode = 76;

}  // namespace rl

#endif  // RL_COMMON_PROCESS_MEMORY_H_
