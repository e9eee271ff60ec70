#include "envs/space_parts.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

rl_space Box(std::vector<int64_t> shape, rl_dtype dtype = RL_DTYPE_FLOAT32,
             const double* low = nullptr, const double* high = nullptr) {
  rl_space s{};
  s.kind = RL_SPACE_BOX;
  s.dtype = dtype;
  s.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) s.shape[i] = shape[i];
  s.low = low;
  s.high = high;
  return s;
}

rl_space Of(rl_space_kind kind, int64_t n, const int64_t* nvec = nullptr) {
  rl_space s{};
  s.kind = kind;
  s.dtype = RL_DTYPE_INT64;
  s.rank = 1;
  s.shape[0] = n;
  s.nvec = nvec;
  return s;
}

// What the fake plugin's space_parts hands out.
rl_env_parts* declared = nullptr;

int SpacePartsOf(rl_env*, rl_env_parts* parts, char*, size_t) {
  *parts = *declared;
  return 0;
}

int FailingSpaceParts(rl_env*, rl_env_parts*, char* error, size_t size) {
  snprintf(error, size, "no parts today");
  return 1;
}

absl::StatusOr<EnvSpaceParts> Read(rl_env_parts parts,
                                   const rl_env_info& info) {
  rl_env_plugin table{};
  table.space_parts = SpacePartsOf;
  declared = &parts;
  return ReadSpaceParts(&table, nullptr, info, "test.so");
}

// The Dict of the tests: an image of bytes and a Discrete, one-hot.
const rl_space_part kDictObservation[] = {
    {"image", Box({4, 4, 1}, RL_DTYPE_UINT8)},
    {"flip", Of(RL_SPACE_DISCRETE, 2)},
};

TEST(SpacePartsTest, APlainPluginHasNoParts) {
  rl_env_plugin table{};
  rl_env_info info{};
  auto parts = ReadSpaceParts(&table, nullptr, info, "test.so");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE(parts->observation.empty());
  EXPECT_TRUE(parts->action.empty());
}

TEST(SpacePartsTest, ADictObservationIsPlacedAsGymnasiumFlattensIt) {
  rl_env_info info{};
  info.observation = Box({18});
  const int64_t nvec[] = {3, 4};
  const rl_space_part parts[] = {kDictObservation[0],
                                 kDictObservation[1],
                                 {"keys", Of(RL_SPACE_MULTI_DISCRETE, 2, nvec)},
                                 {"bits", Of(RL_SPACE_MULTI_BINARY, 3)}};
  info.observation = Box({16 + 2 + 7 + 3});
  auto read = Read({4, parts, 0, nullptr}, info);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->observation.size(), 4u);
  EXPECT_EQ(read->observation[0].offset, 0);
  EXPECT_EQ(read->observation[0].size, 16);
  EXPECT_TRUE(read->observation[0].bytes);
  EXPECT_THAT(read->observation[0].flat_shape, ElementsAre(4, 4, 1));
  EXPECT_EQ(read->observation[1].offset, 16);
  EXPECT_THAT(read->observation[1].flat_shape, ElementsAre(2));
  EXPECT_EQ(read->observation[2].offset, 18);
  EXPECT_THAT(read->observation[2].flat_shape, ElementsAre(7));
  EXPECT_EQ(read->observation[3].offset, 25);
  EXPECT_THAT(read->observation[3].flat_shape, ElementsAre(3));
  EXPECT_EQ(DescribeLayout(read->observation),
            "image Box(uint8, [4, 4, 1]) at [0, 16), flip Discrete(2) at [16, "
            "18), keys MultiDiscrete([3, 4]) at [18, 25), bits "
            "MultiBinary([3]) at [25, 28)");
}

TEST(SpacePartsTest, TheFlatObservationMustBeThePartsFlattened) {
  rl_env_info info{};
  // A float part: the flat vector is float32, not uint8.
  info.observation = Box({18}, RL_DTYPE_UINT8);
  auto read = Read({2, kDictObservation, 0, nullptr}, info);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(read.status().message(),
              HasSubstr("flatten to a Box of 18 float32 elements; it declares "
                        "Box(uint8, [18])"));
  info.observation = Box({17});
  EXPECT_THAT(Read({2, kDictObservation, 0, nullptr}, info).status().message(),
              HasSubstr("it declares Box(float32, [17])"));
  // Every part bytes: the flat vector is uint8.
  info.observation = Box({16}, RL_DTYPE_UINT8);
  EXPECT_TRUE(Read({1, kDictObservation, 0, nullptr}, info).ok());
}

TEST(SpacePartsTest, BadPartsAreNamed) {
  rl_env_info info{};
  info.observation = Box({4});
  const rl_space_part twice[] = {{"a", Box({2})}, {"a", Box({2})}};
  EXPECT_THAT(Read({2, twice, 0, nullptr}, info).status().message(),
              HasSubstr("observation part 1 (\"a\"): the name of an earlier "
                        "part too"));
  const rl_space_part unnamed[] = {{nullptr, Box({4})}};
  EXPECT_THAT(Read({1, unnamed, 0, nullptr}, info).status().message(),
              HasSubstr("a name of 1 to 64 characters"));
  const rl_space_part bad_shape[] = {{"a", Box({0, 4})}};
  EXPECT_THAT(Read({1, bad_shape, 0, nullptr}, info).status().message(),
              HasSubstr("observation part 0 (\"a\"): shape[0] is 0"));
  const rl_space_part no_nvec[] = {{"a", Of(RL_SPACE_MULTI_DISCRETE, 2)}};
  EXPECT_THAT(Read({1, no_nvec, 0, nullptr}, info).status().message(),
              HasSubstr("a MultiDiscrete without nvec"));
  EXPECT_THAT(Read({-1, nullptr, 0, nullptr}, info).status().message(),
              HasSubstr("-1 observation parts"));
  rl_env_plugin table{};
  table.space_parts = FailingSpaceParts;
  EXPECT_THAT(
      ReadSpaceParts(&table, nullptr, info, "test.so").status().message(),
      HasSubstr("space_parts failed: no parts today"));
}

TEST(SpacePartsTest, DiscreteActionPartsMakeOneMultiDiscrete) {
  rl_env_info info{};
  info.observation = Box({3});
  const int64_t nvec[] = {4, 5};
  const rl_space_part parts[] = {{"fire", Of(RL_SPACE_MULTI_BINARY, 2)},
                                 {"move", Of(RL_SPACE_DISCRETE, 3)},
                                 {"aim", Of(RL_SPACE_MULTI_DISCRETE, 2, nvec)}};
  const int64_t flat_nvec[] = {2, 2, 3, 4, 5};
  info.action = Of(RL_SPACE_MULTI_DISCRETE, 5, flat_nvec);
  auto read = Read({0, nullptr, 3, parts}, info);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->action.size(), 3u);
  EXPECT_EQ(read->action[1].offset, 2);
  EXPECT_EQ(read->action[2].offset, 3);
  EXPECT_EQ(read->action[2].size, 2);
  const int64_t other[] = {2, 2, 3, 4, 6};
  info.action = Of(RL_SPACE_MULTI_DISCRETE, 5, other);
  EXPECT_THAT(Read({0, nullptr, 3, parts}, info).status().message(),
              HasSubstr("make MultiDiscrete([2, 2, 3, 4, 5]); it declares "
                        "MultiDiscrete([2, 2, 3, 4, 6])"));
}

TEST(SpacePartsTest, BoxActionPartsMakeOneBoxWithTheirBounds) {
  const double low_a[] = {-1, -1}, high_a[] = {1, 1};
  const double low_b[] = {0}, high_b[] = {2};
  const rl_space_part parts[] = {
      {"steer", Box({2}, RL_DTYPE_FLOAT32, low_a, high_a)},
      {"throttle", Box({1}, RL_DTYPE_FLOAT32, low_b, high_b)}};
  const double low[] = {-1, -1, 0}, high[] = {1, 1, 2};
  rl_env_info info{};
  info.observation = Box({3});
  info.action = Box({3}, RL_DTYPE_FLOAT32, low, high);
  EXPECT_TRUE(Read({0, nullptr, 2, parts}, info).ok());
  const double wrong_high[] = {1, 1, 3};
  info.action = Box({3}, RL_DTYPE_FLOAT32, low, wrong_high);
  EXPECT_THAT(Read({0, nullptr, 2, parts}, info).status().message(),
              HasSubstr("make a float32 Box of 3 elements and their bounds"));
  const rl_space_part mixed[] = {parts[0], {"fire", Of(RL_SPACE_DISCRETE, 2)}};
  EXPECT_THAT(Read({0, nullptr, 2, mixed}, info).status().message(),
              HasSubstr("mix Boxes with discrete parts"));
}

TEST(SpacePartsTest, TheRunsPartsMustBeThePluginsParts) {
  rl_env_info info{};
  info.observation = Box({18});
  auto read = Read({2, kDictObservation, 0, nullptr}, info);
  ASSERT_TRUE(read.ok()) << read.status();
  EnvSpec spec;
  // A run without parts takes the observation whole.
  EXPECT_TRUE(CheckObservationParts(*read, spec, "test.so").ok());
  ObservationPart* image = spec.add_observation_parts();
  image->set_name("image");
  for (int d : {4, 4, 1}) image->add_shape(d);
  image->set_dtype("uint8");
  ObservationPart* flip = spec.add_observation_parts();
  flip->set_name("flip");
  flip->add_shape(2);
  EXPECT_TRUE(CheckObservationParts(*read, spec, "test.so").ok());
  flip->set_name("flop");
  const absl::Status status = CheckObservationParts(*read, spec, "test.so");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              HasSubstr("its observation parts are (image uint8 [4, 4, 1]; "
                        "flip float32 [2]), env.observation_parts are (image "
                        "uint8 [4, 4, 1]; flop float32 [2])"));
  EXPECT_THAT(CheckObservationParts(EnvSpaceParts{}, spec, "test.so").message(),
              HasSubstr("its observation is not a Dict or Tuple"));
}

}  // namespace
}  // namespace rl
