// The NCCL process group of CUDA learner gangs (learner/nccl_backend.h),
// on a machine with at least two GPUs (NCCL takes one device per rank):
// tagged "cuda", run by tools/gpu_check.sh where two are visible. It has
// not run yet: no lent machine had two GPUs.
#include <torch/cuda.h>

#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "learner/c10d_collective.h"
#include "policy/cuda_runtime.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

// Two ranks on cuda:0 and cuda:1: sums and broadcasts of CUDA tensors, and
// of a CPU tensor (staged through the device and back).
TEST(NcclCollectiveTest, TwoGpusAllReduceAndBroadcast) {
  ASSERT_OK(LoadCudaRuntime());
  ASSERT_GE(torch::cuda::device_count(), 2)
      << "NCCL takes one device per rank: this test needs two GPUs";
  ASSERT_OK_AND_ASSIGN(auto server, RendezvousServer::Start(0));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions options;
      options.rank = r;
      options.world_size = 2;
      options.rendezvous_address = absl::StrCat("127.0.0.1:", server->port());
      options.gang_id = "nccl-test";
      options.backend = "nccl";
      options.device = absl::StrCat("cuda:", r);
      auto collective = ConnectCollective(options);
      ASSERT_OK(collective.status());
      Collective& c = **collective;
      const torch::Device device(options.device);
      torch::Tensor sum = torch::full({1024}, static_cast<float>(r + 1),
                                      torch::TensorOptions().device(device));
      ASSERT_OK(c.AllReduce(sum, ReduceOp::kSum));
      EXPECT_TRUE(torch::equal(sum.cpu(), torch::full({1024}, 3.0f)));
      torch::Tensor host = torch::full({3}, static_cast<float>(10 * r));
      ASSERT_OK(c.AllReduce(host, ReduceOp::kMax));
      EXPECT_TRUE(host.device().is_cpu());
      EXPECT_TRUE(torch::equal(host, torch::full({3}, 10.0f)));
      torch::Tensor b = torch::full({2, 2}, static_cast<float>(r),
                                    torch::TensorOptions().device(device));
      ASSERT_OK(c.Broadcast(b, 1));
      EXPECT_TRUE(torch::equal(b.cpu(), torch::full({2, 2}, 1.0f)));
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace rl
