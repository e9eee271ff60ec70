// This process's resident memory, for workers that recycle themselves
// when user code (a leaking environment plugin) left too much behind.
#ifndef RL_COMMON_PROCESS_MEMORY_H_
#define RL_COMMON_PROCESS_MEMORY_H_

#include <cstdint>

namespace rl {

// Resident set size in bytes (/proc/self/statm); 0 if it cannot be read.
int64_t ProcessRssBytes();

// For processes that parse large messages (a learner's rollout segments):
// glibc maps every block over its threshold (128 KiB, raised as blocks are
// freed, up to 32 MiB) from the kernel and unmaps it when freed, so each
// segment's tensors land in fresh pages and the parse spends most of its
// time faulting them in (a 42 MiB segment: ~22 ms against ~4 ms). This
// keeps blocks up to 32 MiB in the heap, and up to 512 MiB of free heap
// before giving it back, so freed segments' memory is reused. Call before
// threads start; false if glibc refused (the defaults then stand).
bool KeepLargeBlocksInHeap();

// The exit code of a worker that ended itself between runs to give its
// memory back (its supervisor starts a fresh one).
inline constexpr int kRecycledExitCode = 76;

}  // namespace rl

#endif  // RL_COMMON_PROCESS_MEMORY_H_
