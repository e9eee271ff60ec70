// NCCL, the process group of CUDA learner gangs, in a library of its own:
// libnccl_backend.so (learner/nccl_backend.cc) links LibTorch's CUDA
// library, which the learner binaries do not (policy/cuda_runtime.h loads
// it on demand), so the learners keep running on CPU-only machines and load
// this library only when a CUDA gang forms (learner/c10d_collective.cc).
//
// Built under --config=cuda (it needs the CUDA wheels' headers: `tools/
// setup.sh --gpu`), beside learner_main, which finds it there.
#ifndef RL_LEARNER_NCCL_BACKEND_H_
#define RL_LEARNER_NCCL_BACKEND_H_

#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace rl {

inline constexpr char kNcclBackendLibrary[] = "libnccl_backend.so";
inline constexpr char kNcclBackendEntry[] = "rl_make_nccl_backend";

// The library's entry point: a ProcessGroupNCCL of `size` ranks meeting in
// `store`, its collectives timing out after `timeout_ms`, into *backend;
// false with the reason in *error (LibTorch's exception message). Called
// across dlopen with the same compiler and LibTorch on both sides.
using MakeNcclBackendFn = bool (*)(const c10::intrusive_ptr<c10d::Store>& store,
                                   int rank, int size, int64_t timeout_ms,
                                   c10::intrusive_ptr<c10d::Backend>* backend,
                                   std::string* error);

}  // namespace rl

#endif  // RL_LEARNER_NCCL_BACKEND_H_
