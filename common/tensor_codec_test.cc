#include "common/tensor_codec.h"

#include <torch/types.h>
#include <torch/utils.h>

#include "common/tensor_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

struct DTypeCase {
  c10::ScalarType torch_type;
  DType wire_type;
  int64_t size;
};

const DTypeCase kCases[] = {
    {torch::kFloat32, DTYPE_FLOAT32, 4}, {torch::kFloat64, DTYPE_FLOAT64, 8},
    {torch::kFloat16, DTYPE_FLOAT16, 2}, {torch::kBFloat16, DTYPE_BFLOAT16, 2},
    {torch::kInt8, DTYPE_INT8, 1},       {torch::kUInt8, DTYPE_UINT8, 1},
    {torch::kInt16, DTYPE_INT16, 2},     {torch::kInt32, DTYPE_INT32, 4},
    {torch::kInt64, DTYPE_INT64, 8},     {torch::kBool, DTYPE_BOOL, 1},
};

at::Tensor Sample(c10::ScalarType type, at::IntArrayRef shape) {
  if (type == torch::kBool) return torch::rand(shape) > 0.5;
  return (torch::randn(shape) * 50).to(type);
}

TEST(TensorCodecTest, EveryDTypeRoundTrips) {
  torch::manual_seed(1);
  for (const auto& c : kCases) {
    SCOPED_TRACE(c10::toString(c.torch_type));
    const at::Tensor original = Sample(c.torch_type, {3, 5, 2});
    Tensor wire;
    ASSERT_OK(EncodeTensor(original, &wire));
    EXPECT_EQ(wire.dtype(), c.wire_type);
    EXPECT_EQ(DTypeSize(c.wire_type), c.size);
    EXPECT_EQ(wire.shape_size(), 3);
    EXPECT_EQ(wire.data().size(), 30u * c.size);
    auto decoded = DecodeTensor(wire);
    ASSERT_OK(decoded);
    EXPECT_EQ(decoded->scalar_type(), c.torch_type);
    EXPECT_TRUE(torch::equal(*decoded, original));
    auto view = DecodeTensorView(wire);
    ASSERT_OK(view);
    EXPECT_TRUE(torch::equal(*view, original));
    EXPECT_EQ(view->data_ptr(), static_cast<const void*>(wire.data().data()));
  }
}

TEST(TensorCodecTest, ScalarEmptyAndNonContiguous) {
  Tensor wire;
  ASSERT_OK(EncodeTensor(torch::tensor(3.5), &wire));
  EXPECT_EQ(wire.shape_size(), 0);
  EXPECT_EQ(DecodeTensor(wire)->item<double>(), 3.5);

  ASSERT_OK(EncodeTensor(torch::zeros({0, 4}), &wire));
  EXPECT_TRUE(wire.data().empty());
  auto empty = DecodeTensor(wire);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->sizes(), (std::vector<int64_t>{0, 4}));

  // A transposed (strided) tensor is written in its logical row-major order.
  const at::Tensor base = torch::arange(12, torch::kInt64).reshape({3, 4});
  ASSERT_OK(EncodeTensor(base.t(), &wire));
  EXPECT_TRUE(torch::equal(*DecodeTensor(wire), base.t().contiguous()));
}

TEST(TensorCodecTest, LargeTensorRoundTrips) {
  const at::Tensor big = torch::rand({1024, 64, 64});  // 16 MiB.
  Tensor wire;
  ASSERT_OK(EncodeTensor(big, &wire));
  EXPECT_EQ(wire.data().size(), 1024u * 64 * 64 * 4);
  EXPECT_TRUE(torch::equal(*DecodeTensor(wire), big));
}

TEST(TensorCodecTest, WireBytesAreLittleEndianRowMajor) {
  Tensor wire;
  ASSERT_OK(EncodeTensor(torch::tensor({1, 258}, torch::kInt32), &wire));
  const std::string expected("\x01\x00\x00\x00\x02\x01\x00\x00", 8);
  EXPECT_EQ(wire.data(), expected);
}

TEST(TensorCodecTest, UnsupportedTorchDTypeIsInvalidArgument) {
  Tensor wire;
  const absl::Status status =
      EncodeTensor(torch::zeros({2}, torch::kComplexFloat), &wire);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("no wire")));
}

Tensor Valid() {
  Tensor t;
  t.set_dtype(DTYPE_FLOAT32);
  t.add_shape(2);
  t.add_shape(3);
  t.set_data(std::string(24, '\0'));
  return t;
}

void ExpectRejected(const Tensor& t, const std::string& needle) {
  for (const auto& result : {DecodeTensor(t, "segment.rewards"),
                             DecodeTensorView(t, "segment.rewards")}) {
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr(needle)));
  }
}

TEST(TensorCodecTest, BadPayloadsAreRejectedNamingTheProblem) {
  ASSERT_OK(DecodeTensor(Valid()));

  Tensor short_data = Valid();
  short_data.mutable_data()->pop_back();
  ExpectRejected(short_data, "segment.rewards.data: has 23 bytes, expected 24");

  Tensor long_data = Valid();
  long_data.mutable_data()->push_back('x');
  ExpectRejected(long_data, "expected 24");

  Tensor unknown = Valid();
  unknown.set_dtype(static_cast<DType>(77));
  ExpectRejected(unknown, "segment.rewards.dtype: unknown");

  Tensor unspecified = Valid();
  unspecified.set_dtype(DTYPE_UNSPECIFIED);
  ExpectRejected(unspecified, "segment.rewards.dtype");

  Tensor negative = Valid();
  negative.set_shape(1, -3);
  ExpectRejected(negative, "segment.rewards.shape[1]: must be >= 0 (got -3)");

  Tensor overflow = Valid();
  overflow.clear_shape();
  overflow.add_shape(int64_t{1} << 40);
  overflow.add_shape(int64_t{1} << 40);
  ExpectRejected(overflow, "overflows");

  // Overflow hidden behind the element size (elements fit, bytes do not).
  Tensor byte_overflow = Valid();
  byte_overflow.clear_shape();
  byte_overflow.add_shape(int64_t{1} << 62);
  ExpectRejected(byte_overflow, "overflows");

  // Empty, but the other dims' product (LibTorch's strides) overflows.
  Tensor empty_overflow = Valid();
  empty_overflow.clear_shape();
  empty_overflow.add_shape(0);
  empty_overflow.add_shape(int64_t{1} << 40);
  empty_overflow.add_shape(int64_t{1} << 40);
  empty_overflow.clear_data();
  ExpectRejected(empty_overflow, "overflows");

  // Bools are one byte, 0 or 1; anything else is no C++ bool.
  Tensor bools;
  bools.set_dtype(DTYPE_BOOL);
  bools.add_shape(3);
  bools.set_data(std::string("\0\1\x81", 3));
  ExpectRejected(bools,
                 "segment.rewards.data: DTYPE_BOOL element 2 is 129 (must be "
                 "0 or 1)");
  bools.set_data(std::string("\0\1\1", 3));
  ASSERT_OK(DecodeTensor(bools));
}

}  // namespace
}  // namespace rl
