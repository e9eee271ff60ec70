#include "policy/cuda_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "ATen/Context.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "c10/core/CPUAllocator.h"
#include "common/logging.h"
#include "common/status.h"

namespace rl {
namespace fs = std::filesystem;

const std::vector<CudaRuntimeLine>& CudaRuntimeLines() {
  // libtorch_cuda.so's and libtorch_nvshmem.so's NEEDED entries outside
  // LibTorch and glibc (readelf -d): torch 2.9.1+cu128 and 2.11.0+cu130.
  static const auto* lines = new std::vector<CudaRuntimeLine>{
      {12,
       "CUDA 12",
       {
           {"nvidia-cuda-runtime-cu12", "cuda_runtime", "libcudart.so.12"},
           {"nvidia-nvjitlink-cu12", "nvjitlink", "libnvJitLink.so.12"},
           {"nvidia-cublas-cu12", "cublas", "libcublasLt.so.12"},
           {"nvidia-cublas-cu12", "cublas", "libcublas.so.12"},
           {"nvidia-cusparse-cu12", "cusparse", "libcusparse.so.12"},
           {"nvidia-cusparselt-cu12", "cusparselt", "libcusparseLt.so.0"},
           {"nvidia-cufft-cu12", "cufft", "libcufft.so.11"},
           {"nvidia-curand-cu12", "curand", "libcurand.so.10"},
           {"nvidia-cufile-cu12", "cufile", "libcufile.so.0"},
           {"nvidia-nccl-cu12", "nccl", "libnccl.so.2"},
           {"nvidia-cudnn-cu12", "cudnn", "libcudnn.so.9"},
           {"nvidia-nvshmem-cu12", "nvshmem", "libnvshmem_host.so.3"},
       },
       {"cuda_nvrtc/lib/libnvrtc.so.12",
        "cuda_nvrtc/lib/libnvrtc-builtins.so.12.8"},
       "Run tools/setup.sh --gpu (the CUDA 12.8 wheels torch was built "
       "with; another CUDA toolkit's libraries are never used instead)"},
      // The CUDA 13 wheels share one directory, nvidia/cu13/lib.
      {13,
       "CUDA 13",
       {
           {"nvidia-cuda-runtime", "cu13", "libcudart.so.13"},
           {"nvidia-nvjitlink", "cu13", "libnvJitLink.so.13"},
           {"nvidia-cublas", "cu13", "libcublasLt.so.13"},
           {"nvidia-cublas", "cu13", "libcublas.so.13"},
           {"nvidia-cusparse", "cu13", "libcusparse.so.12"},
           {"nvidia-cusparselt-cu13", "cusparselt", "libcusparseLt.so.0"},
           {"nvidia-cufft", "cu13", "libcufft.so.12"},
           {"nvidia-curand", "cu13", "libcurand.so.10"},
           {"nvidia-cufile", "cu13", "libcufile.so.0"},
           {"nvidia-nccl-cu13", "nccl", "libnccl.so.2"},
           {"nvidia-cudnn-cu13", "cudnn", "libcudnn.so.9"},
           {"nvidia-nvshmem-cu13", "nvshmem", "libnvshmem_host.so.3"},
       },
       {"cu13/lib/libnvrtc.so.13", "cu13/lib/libnvrtc-builtins.so.13.0"},
       "Install this torch's own CUDA 13 wheels (pip install of its torch "
       "version with its dependencies; another CUDA toolkit's libraries are "
       "never used instead)"},
  };
  return *lines;
}

const std::vector<CudaLibrary>& RequiredCudaLibraries() {
  return CudaRuntimeLines().front().libraries;
}

namespace {

// Where `l` is for the LibTorch in `lib`, or "" where it is not there.
fs::path FindLibrary(const fs::path& lib, const CudaLibrary& l) {
  const fs::path wheel =
      lib.parent_path().parent_path() / "nvidia" / l.dir / "lib" / l.soname;
  if (fs::exists(wheel)) return wheel;
  if (fs::exists(lib / l.soname)) return lib / l.soname;
  return {};
}

}  // namespace

int TorchCudaMajor(const std::string& torch_lib_dir) {
  std::ifstream version(fs::path(torch_lib_dir).parent_path() / "version.py");
  std::string line;
  while (std::getline(version, line)) {
    // cuda: Optional[str] = '13.0'   (or cuda = '12.8'; None on a CPU build)
    if (!absl::StartsWith(line, "cuda")) continue;
    const size_t quote = line.find_first_of("'\"");
    int major = 0;
    if (quote != std::string::npos &&
        absl::SimpleAtoi(
            line.substr(quote + 1, line.find('.', quote) - quote - 1),
            &major)) {
      return major;
    }
    return 0;
  }
  return 0;
}

absl::StatusOr<const CudaRuntimeLine*> FindCudaRuntime(
    const std::string& torch_lib_dir) {
  const fs::path lib(torch_lib_dir);
  std::vector<std::string> missing;
  for (const char* own : {"libtorch_cuda.so", "libc10_cuda.so"}) {
    if (!fs::exists(lib / own))
      missing.push_back(absl::StrCat(own, " (torch)"));
  }
  auto complete = [&](const CudaRuntimeLine& line) {
    for (const CudaLibrary& l : line.libraries) {
      if (FindLibrary(lib, l).empty()) return false;
    }
    return true;
  };
  // The line torch was built for; the first complete one where unknown.
  const CudaRuntimeLine* line = &CudaRuntimeLines().front();
  if (const int major = TorchCudaMajor(torch_lib_dir); major > 0) {
    line = nullptr;
    for (const CudaRuntimeLine& l : CudaRuntimeLines()) {
      if (l.major == major) line = &l;
    }
    if (line == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LibTorch in ", torch_lib_dir, " is built for CUDA ", major,
          ", which this build does not know (it knows CUDA 12 and 13)"));
    }
  } else {
    for (const CudaRuntimeLine& l : CudaRuntimeLines()) {
      if (complete(l)) {
        line = &l;
        break;
      }
    }
  }
  if (missing.empty() && complete(*line)) return line;
  for (const CudaLibrary& l : line->libraries) {
    if (FindLibrary(lib, l).empty()) {
      missing.push_back(absl::StrCat(l.soname, " (", l.wheel, ")"));
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("LibTorch's GPU runtime (", line->name,
                   ") is not installed for ", torch_lib_dir, ": missing ",
                   absl::StrJoin(missing, ", "), ". ", line->install));
}

absl::Status CheckCudaRuntimeFiles(const std::string& torch_lib_dir) {
  return FindCudaRuntime(torch_lib_dir).status();
}

std::string LoadedTorchLibraryDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&c10::GetCPUAllocator), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::error_code ec;
  const fs::path path = fs::canonical(info.dli_fname, ec);
  return (ec ? fs::path(info.dli_fname) : path).parent_path().string();
}

namespace {

absl::Status Load() {
  // The driver first: without it nothing else matters, and CPU-only
  // machines stop here at once.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("no NVIDIA driver here (libcuda.so.1 does not load: ",
                     error != nullptr ? error : "unknown error", ")"));
  }
  const std::string dir = LoadedTorchLibraryDirectory();
  if (dir.empty()) {
    return absl::FailedPreconditionError(
        "cannot find the directory of this process's libtorch_cpu.so");
  }
  absl::StatusOr<const CudaRuntimeLine*> line = FindCudaRuntime(dir);
  if (!line.ok()) return line.status();
  // The wheels' libraries first, by absolute path and global, as torch's
  // own Python loader does: libtorch_cuda.so's RPATH misses some of their
  // directories (nvjitlink's), so the dynamic loader would otherwise take
  // another toolkit's copy from LD_LIBRARY_PATH or ld.so.conf.
  const fs::path nvidia = fs::path(dir).parent_path().parent_path() / "nvidia";
  std::vector<fs::path> preload;
  for (const CudaLibrary& l : (*line)->libraries) {
    preload.push_back(FindLibrary(dir, l));
  }
  for (const char* optional : (*line)->optional) {
    preload.push_back(nvidia / optional);
  }
  for (const fs::path& library : preload) {
    if (!fs::exists(library)) continue;  // an optional one
    if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* error = dlerror();
      return absl::FailedPreconditionError(absl::StrCat(
          library.string(),
          " does not load: ", error != nullptr ? error : "unknown error"));
    }
  }
  const std::string path = (fs::path(dir) / "libtorch_cuda.so").string();
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* error = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        path, " does not load: ", error != nullptr ? error : "unknown error"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadCudaRuntime() {
  static std::once_flag once;
  static absl::Status* status = nullptr;
  std::call_once(once, [] { status = new absl::Status(Load()); });
  return *status;
}

absl::StatusOr<int> CudaComputeCapabilityMajor(int index) {
  RETURN_IF_ERROR(LoadCudaRuntime());
  // cudaError_t cudaDeviceGetAttribute(int*, cudaDeviceAttr, int), from the
  // libcudart.so.12 libtorch_cuda.so brought in (no CUDA headers needed).
  using GetAttribute = int (*)(int*, int, int);
  constexpr int kComputeCapabilityMajor =
      75;  // cudaDevAttrComputeCapabilityMajor
  auto get = reinterpret_cast<GetAttribute>(
      dlsym(RTLD_DEFAULT, "cudaDeviceGetAttribute"));
  if (get == nullptr) {
    return absl::FailedPreconditionError(
        "cudaDeviceGetAttribute is not in this process");
  }
  int major = 0;
  if (const int error = get(&major, kComputeCapabilityMajor, index);
      error != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cudaDeviceGetAttribute(compute capability, ", index,
                     ") failed with CUDA error ", error));
  }
  return major;
}

void PrepareCudaRuntime() {
  const absl::Status status = LoadCudaRuntime();
  if (status.ok()) {
    // float32 means float32: cuDNN's convolutions would run in TF32 by
    // default (LibTorch's matrix products already do not), ~1e-3 from the
    // CPU's, which the first-use self-checks would refuse. bfloat16
    // autocast (execution.precision) is the fast path where it pays (CNNs).
    at::globalContext().setAllowTF32CuDNN(false);
    RL_LOG_INFO("LibTorch's CUDA runtime loaded ({})",
                LoadedTorchLibraryDirectory());
  } else if (!absl::StartsWith(status.message(), "no NVIDIA driver")) {
    RL_LOG_WARNING("CUDA is unavailable to this process: {}",
                   std::string(status.message()));
  }
}

absl::StatusOr<void*> LoadGpuExtension(const std::string& library,
                                       const std::string& entry) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::map<std::string, absl::StatusOr<void*>>;
  absl::MutexLock lock(&mu);
  const std::string key = library + "/" + entry;
  if (auto it = loaded->find(key); it != loaded->end()) return it->second;
  absl::StatusOr<void*> found = [&]() -> absl::StatusOr<void*> {
    if (absl::Status cuda = LoadCudaRuntime(); !cuda.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          library, " needs LibTorch's CUDA runtime: ", cuda.message()));
    }
    std::vector<std::string> tried;
    if (const char* dir = std::getenv("RL_GPU_LIBRARY_PATH")) {
      tried.push_back(absl::StrCat(dir, "/", library));
    }
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
      tried.push_back((self.parent_path() / library).string());
      // bazel-bin's layout: the libraries sit in learner/ (beside
      // learner_main) and envs/, and other binaries (trainer/rl_local)
      // look there.
      for (const char* dir : {"learner", "envs"}) {
        tried.push_back(
            (self.parent_path().parent_path() / dir / library).string());
      }
    }
    std::vector<std::string> errors;
    for (const std::string& path : tried) {
      dlerror();
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* e = dlerror();
        errors.push_back(e != nullptr ? e : path);
        continue;
      }
      if (void* symbol = dlsym(handle, entry.c_str())) {
        return symbol;  // never unloaded
      }
      errors.push_back(absl::StrCat(path, " lacks ", entry));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load ", library,
        " (built under --config=cuda beside the binaries; or set "
        "$RL_GPU_LIBRARY_PATH): ",
        errors.empty() ? "nowhere to look" : absl::StrJoin(errors, "; ")));
  }();
  loaded->emplace(key, found);
  return found;
}

}  // namespace rl
