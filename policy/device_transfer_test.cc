#include "policy/device_transfer.h"

#include "gtest/gtest.h"

namespace rl {
namespace {

TEST(DeviceTransferTest, PackedTensorsComeBackWithTheirDtypesAndShapes) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const std::vector<torch::Tensor> host = {
      torch::randn({5, 3, 7}, gen),
      torch::randint(0, 9, {5, 3}, gen, torch::kInt64),
      torch::Tensor(),  // an undefined one keeps its place
      torch::randint(0, 255, {5, 3, 2}, gen, torch::kUInt8),
      torch::randn({4, 6}, gen).t(),  // not contiguous
      torch::randn({}, gen).to(torch::kFloat64),
  };
  const torch::Tensor packed = PackTensors(host, /*pin=*/false);
  // Each piece starts 64-byte aligned: 420, 120, 30, 96 and 8 bytes.
  EXPECT_EQ(packed.numel(), 448 + 128 + 64 + 128 + 64);
  const std::vector<torch::Tensor> back = UnpackTensors(packed, host);
  ASSERT_EQ(back.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(back[i].defined(), host[i].defined());
    if (!host[i].defined()) continue;
    EXPECT_EQ(back[i].scalar_type(), host[i].scalar_type());
    EXPECT_EQ(back[i].sizes(), host[i].sizes());
    EXPECT_TRUE(torch::equal(back[i], host[i]));
    // Views of the one buffer, not copies.
    EXPECT_EQ(back[i].storage().data(), packed.storage().data());
  }
}

// Back to the host in one packed copy: the same values, dtypes and shapes,
// in copies of their own (here from the CPU, as from a GPU).
TEST(DeviceTransferTest, ToHostCopiesEveryTensorInOnePiece) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const std::vector<torch::Tensor> device = {
      torch::randn({5, 3, 7}, gen),
      torch::Tensor(),
      torch::randint(0, 9, {5, 3}, gen, torch::kInt64),
      torch::randint(0, 255, {3}, gen, torch::kUInt8),
      torch::randn({4, 6}, gen).t(),
      torch::zeros({0, 2}),
  };
  const std::vector<torch::Tensor> host = ToHost(device);
  ASSERT_EQ(host.size(), device.size());
  for (size_t i = 0; i < device.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(host[i].defined(), device[i].defined());
    if (!device[i].defined()) continue;
    EXPECT_TRUE(host[i].is_cpu());
    EXPECT_EQ(host[i].scalar_type(), device[i].scalar_type());
    EXPECT_EQ(host[i].sizes(), device[i].sizes());
    EXPECT_TRUE(torch::equal(host[i], device[i]));
  }
  // One buffer for all, apart from the originals.
  EXPECT_EQ(host[0].storage().data(), host[2].storage().data());
  device[0].fill_(7);
  EXPECT_FALSE(torch::equal(host[0], device[0]));
}

// A staging buffer is reused while it is large enough, and grown when not.
TEST(DeviceTransferTest, ToHostReusesItsStagingBuffer) {
  torch::Tensor staging;
  const torch::Tensor a = torch::arange(10, torch::kFloat32);
  std::vector<torch::Tensor> host = ToHost({a}, &staging);
  ASSERT_TRUE(staging.defined());
  EXPECT_EQ(host[0].storage().data(), staging.storage().data());
  EXPECT_TRUE(torch::equal(host[0], a));
  const void* first = staging.data_ptr();
  host = ToHost({torch::arange(3, torch::kFloat32)}, &staging);
  EXPECT_EQ(staging.data_ptr(), first);  // reused
  EXPECT_TRUE(torch::equal(host[0], torch::arange(3, torch::kFloat32)));
  const torch::Tensor big = torch::arange(100, torch::kFloat32);
  host = ToHost({big}, &staging);
  EXPECT_GE(staging.numel(), 400);  // grown
  EXPECT_TRUE(torch::equal(host[0], big));
}

TEST(DeviceTransferTest, TheCpuGetsTheTensorsThemselves) {
  const std::vector<torch::Tensor> host = {torch::ones({3}), torch::Tensor()};
  const std::vector<torch::Tensor> same = ToDevice(host, torch::kCPU);
  ASSERT_EQ(same.size(), 2u);
  EXPECT_TRUE(same[0].is_same(host[0]));
  EXPECT_FALSE(same[1].defined());
}

}  // namespace
}  // namespace rl
