// libnccl_backend.so: see learner/nccl_backend.h. Never ran on a GPU yet:
// the learner gang tests tagged "cuda" run it where one is
// (tools/gpu_check.sh).
#include "learner/nccl_backend.h"

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

extern "C" __attribute__((visibility("default"))) bool rl_make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    int64_t timeout_ms, c10::intrusive_ptr<c10d::Backend>* backend,
    std::string* error) {
  static_assert(
      std::is_same<decltype(&rl_make_nccl_backend), rl::MakeNcclBackendFn>(),
      "the entry point's type is the header's");
  try {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    // The watchdog's timeout well past the host's wait (c10d_collective.cc
    // waits `timeout_ms`): a lost peer is the wait's ABORTED error, and the
    // watchdog ends the process only if that never comes.
    options->timeout = std::chrono::milliseconds(2 * timeout_ms + 30000);
    *backend =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "unknown exception";
  }
  return false;
}
