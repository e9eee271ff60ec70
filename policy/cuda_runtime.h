// LibTorch's CUDA library, loaded on demand. The binaries link only
// libtorch_cpu: the same binary runs on a CPU-only machine without ~2.6 GB
// of GPU libraries, and on a GPU machine loads libtorch_cuda.so (beside
// libtorch_cpu.so) at run time, which registers LibTorch's CUDA backend.
//
// The load is refused, with the reason, unless every library
// libtorch_cuda.so needs is the CUDA build torch was built with: from the
// pinned cu12 wheels (tools/requirements-gpu.txt, installed by
// `tools/setup.sh --gpu`), from the cu13 wheels of torch >= 2.10's PyPI
// build (site-packages/nvidia/cu13), or beside libtorch_cpu.so (a LibTorch
// zip). The dynamic loader would otherwise resolve missing ones to another
// toolkit's (a system CUDA 13 answers to some cu12 sonames) and fail
// later, or worse.
//
// Load before LibTorch is first asked about CUDA: LibTorch caches its CUDA
// hooks at the first question (torch::manual_seed asks), so a load after it
// goes unseen. The mains call PrepareCudaRuntime() first thing.
#ifndef RL_POLICY_CUDA_RUNTIME_H_
#define RL_POLICY_CUDA_RUNTIME_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rl {

// A library libtorch_cuda.so needs, and the wheel that ships it.
struct CudaLibrary {
  const char* wheel;   // e.g. "nvidia-cudnn-cu12"
  const char* dir;     // its directory under site-packages/nvidia
  const char* soname;  // e.g. "libcudnn.so.9"
};

// One CUDA major's wheels: what a torch built for it needs, in load order
// (each after what it needs), and what it loads only when present (NVRTC,
// for run-time compiled kernels).
struct CudaRuntimeLine {
  int major;         // 12, 13
  const char* name;  // "CUDA 12", "CUDA 13"
  std::vector<CudaLibrary> libraries;
  std::vector<const char*> optional;  // paths under site-packages/nvidia
  const char* install;                // how to install the missing ones
};
// The lines a torch wheel can be built against, the pinned one (CUDA 12,
// torch 2.9.1) first.
const std::vector<CudaRuntimeLine>& CudaRuntimeLines();
// The pinned line's libraries.
const std::vector<CudaLibrary>& RequiredCudaLibraries();

// The CUDA major a torch wheel was built for, from its torch/version.py
// (`cuda = '13.0'`) beside `torch_lib_dir`; 0 where there is none (a
// LibTorch zip) or it names none (a CPU build).
int TorchCudaMajor(const std::string& torch_lib_dir);

// The line the LibTorch in `torch_lib_dir` was built for (TorchCudaMajor;
// where that is unknown, the first line found complete), with every library
// found (libtorch_cuda.so and libc10_cuda.so there, each library in
// ../../nvidia/<dir>/lib or there too); else FAILED_PRECONDITION naming
// every missing library of that line (the pinned one where unknown) with
// its wheel and how to install it. Another line's libraries, left behind
// by an upgrade of torch, are never taken instead.
absl::StatusOr<const CudaRuntimeLine*> FindCudaRuntime(
    const std::string& torch_lib_dir);
absl::Status CheckCudaRuntimeFiles(const std::string& torch_lib_dir);

// The directory of the libtorch_cpu.so / libc10.so this process runs.
std::string LoadedTorchLibraryDirectory();

// Once per process: the driver (libcuda.so.1), the files above, then
// dlopen(libtorch_cuda.so). OK once loaded; FAILED_PRECONDITION with the
// reason otherwise (the same reason on every later call).
absl::Status LoadCudaRuntime();

// The compute capability's major number of CUDA device `index` (8 for
// Ampere, 9 for Hopper), from the CUDA runtime libtorch_cuda loaded;
// FAILED_PRECONDITION where it is not loaded.
absl::StatusOr<int> CudaComputeCapabilityMajor(int index);

// A symbol of a library built against LibTorch's CUDA library (with
// --config=cuda: learner/libnccl_backend.so, learner/libcuda_graph.so),
// loaded once after LoadCudaRuntime() from $RL_GPU_LIBRARY_PATH, else from
// beside the running binary, else from ../learner/ or ../envs/ (bazel-bin's
// layout).
// FAILED_PRECONDITION naming why not (the CUDA runtime's reason, or each place
// tried).
absl::StatusOr<void*> LoadGpuExtension(const std::string& library,
                                       const std::string& entry);

// LoadCudaRuntime() where an NVIDIA driver is present, its failure logged;
// nothing (and nothing logged) elsewhere. For the mains, first thing.
void PrepareCudaRuntime();

}  // namespace rl

#endif  // RL_POLICY_CUDA_RUNTIME_H_
