// Linked into a LibTorch test (deps: //testing:one_torch_thread), this runs
// every test of the binary on one LibTorch thread, as rl_local does: a
// second one only spins (OpenMP waits busily) beside the other tests of a
// 2-core machine, and learning tests then take 50x longer.
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace rl {
namespace {

class OneTorchThread : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};

::testing::Environment* const kOneTorchThread =
    ::testing::AddGlobalTestEnvironment(new OneTorchThread);

}  // namespace
}  // namespace rl
