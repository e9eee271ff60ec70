#include "policy/cuda_runtime.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void Touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "";
}

// A LibTorch lib directory laid out as the torch wheel's:
// site-packages/torch/lib beside site-packages/nvidia/<dir>/lib.
fs::path FakeWheels(const std::string& skip_soname,
                    const CudaRuntimeLine& line = CudaRuntimeLines().front()) {
  const fs::path site(MakeTestDir("site-packages"));
  const fs::path lib = site / "torch" / "lib";
  Touch(lib / "libtorch_cuda.so");
  Touch(lib / "libc10_cuda.so");
  for (const CudaLibrary& l : line.libraries) {
    if (l.soname != skip_soname)
      Touch(site / "nvidia" / l.dir / "lib" / l.soname);
  }
  return lib;
}

TEST(CudaRuntimeTest, EveryWheelPresentIsEnough) {
  EXPECT_OK(CheckCudaRuntimeFiles(FakeWheels("").string()));
}

TEST(CudaRuntimeTest, EachLineIsFoundByItsOwnWheels) {
  for (const CudaRuntimeLine& line : CudaRuntimeLines()) {
    absl::StatusOr<const CudaRuntimeLine*> found =
        FindCudaRuntime(FakeWheels("", line).string());
    ASSERT_OK(found.status()) << line.name;
    EXPECT_EQ(*found, &line);
  }
  // torch >= 2.10's PyPI wheels: the CUDA 13 libraries in nvidia/cu13/lib.
  EXPECT_STREQ(CudaRuntimeLines().back().name, "CUDA 13");
  EXPECT_STREQ(CudaRuntimeLines().back().libraries.front().dir, "cu13");
}

void WriteVersion(const fs::path& lib, const std::string& cuda) {
  std::ofstream(lib.parent_path() / "version.py")
      << "__version__ = '2.11.0+cu130'\ndebug = False\ncuda: Optional[str] = "
      << cuda << "\n";
}

TEST(CudaRuntimeTest, TheLineIsTheOneTorchWasBuiltFor) {
  // An upgrade from a cu12 torch leaves the cu12 wheels behind: a torch
  // built for CUDA 13 still takes the CUDA 13 line.
  const fs::path lib = FakeWheels("", CudaRuntimeLines().back());
  const fs::path site = lib.parent_path().parent_path();
  for (const CudaLibrary& l : RequiredCudaLibraries()) {
    Touch(site / "nvidia" / l.dir / "lib" / l.soname);
  }
  EXPECT_EQ(*FindCudaRuntime(lib.string()), &CudaRuntimeLines().front());
  WriteVersion(lib, "'13.0'");
  EXPECT_EQ(TorchCudaMajor(lib.string()), 13);
  EXPECT_EQ(*FindCudaRuntime(lib.string()), &CudaRuntimeLines().back());
  WriteVersion(lib, "None");  // a CPU build: unknown, the first complete
  EXPECT_EQ(TorchCudaMajor(lib.string()), 0);
  WriteVersion(lib, "'11.8'");
  EXPECT_THAT(FindCudaRuntime(lib.string()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("built for CUDA 11, which this build does "
                                 "not know")));
}

TEST(CudaRuntimeTest, ACuda13TorchMissingItsWheelsIsToldItsOwn) {
  // The cu12 set complete, the cu13 one not: refused, naming CUDA 13's.
  const fs::path lib = FakeWheels("libcudnn.so.9", CudaRuntimeLines().back());
  const fs::path site = lib.parent_path().parent_path();
  for (const CudaLibrary& l : RequiredCudaLibraries()) {
    if (std::string(l.dir) != "cudnn") {
      Touch(site / "nvidia" / l.dir / "lib" / l.soname);
    }
  }
  WriteVersion(lib, "'13.0'");
  EXPECT_THAT(
      CheckCudaRuntimeFiles(lib.string()),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("(CUDA 13)"),
                     HasSubstr("libcudnn.so.9 (nvidia-cudnn-cu13)"),
                     HasSubstr("CUDA 13 wheels"), Not(HasSubstr("setup.sh")))));
}

TEST(CudaRuntimeTest, AnIncompleteCuda13SetIsNotTakenAndThePinIsNamed) {
  const absl::Status status = CheckCudaRuntimeFiles(
      FakeWheels("libcudnn.so.9", CudaRuntimeLines().back()).string());
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               AllOf(HasSubstr("libcudart.so.12 "
                                               "(nvidia-cuda-runtime-cu12)"),
                                     HasSubstr("tools/setup.sh --gpu"))));
}

TEST(CudaRuntimeTest, AMissingWheelIsNamedWithTheSetUpCommand) {
  const absl::Status status =
      CheckCudaRuntimeFiles(FakeWheels("libcudnn.so.9").string());
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               AllOf(HasSubstr("missing libcudnn.so.9 "
                                               "(nvidia-cudnn-cu12)"),
                                     HasSubstr("tools/setup.sh --gpu"),
                                     Not(HasSubstr("libcublas")))));
}

TEST(CudaRuntimeTest, ALibTorchZipKeepsThemBesideItself) {
  const fs::path lib = fs::path(MakeTestDir("libtorch")) / "lib";
  for (const char* own : {"libtorch_cuda.so", "libc10_cuda.so"}) {
    Touch(lib / own);
  }
  for (const CudaLibrary& l : RequiredCudaLibraries()) Touch(lib / l.soname);
  EXPECT_OK(CheckCudaRuntimeFiles(lib.string()));
}

TEST(CudaRuntimeTest, ThisProcessLoadsOrSaysWhy) {
  // The torch this test runs: its directory holds libtorch_cpu.so.
  const std::string dir = LoadedTorchLibraryDirectory();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(fs::exists(fs::path(dir) / "libtorch_cpu.so")) << dir;
  const absl::Status status = LoadCudaRuntime();
  if (!status.ok()) {
    // No driver here, or the GPU wheels are not installed: the reason says
    // which, and a second call gives the same answer without trying again.
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(status.message()),
                ::testing::AnyOf(HasSubstr("no NVIDIA driver"),
                                 HasSubstr("tools/setup.sh --gpu"),
                                 HasSubstr("does not load")));
    EXPECT_EQ(LoadCudaRuntime(), status);
  }
}

}  // namespace
}  // namespace rl
