#include "common/grpc_message.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/support/slice.h"
#include "gtest/gtest.h"
#include "proto/learner.pb.h"
#include "testing/status_matchers.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

Tensor MakeTensor(std::vector<int64_t> shape, size_t bytes, char seed) {
  Tensor t;
  t.set_dtype(DTYPE_FLOAT32);
  for (int64_t d : shape) t.add_shape(d);
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(seed + i * 7);
  t.set_data(std::move(data));
  return t;
}

// A segment with two large tensors (aliased) and small fields (copied).
std::shared_ptr<RolloutSegment> MakeSegment() {
  auto s = std::make_shared<RolloutSegment>();
  s->set_run_id("run-1");
  s->set_actor_id(3);
  s->set_sequence_number(42);
  s->set_actor_incarnation(0x1234567890abcdefULL);
  s->mutable_env()->set_id("CartPole-v1");
  s->mutable_env()->set_observation_size(4);
  *s->mutable_observations() = MakeTensor({64, 256, 4}, 64 * 256 * 4 * 4, 1);
  *s->mutable_values() = MakeTensor({64, 256}, 64 * 256 * 4, 2);
  *s->mutable_next_values() = MakeTensor({4}, 16, 3);  // small: copied
  s->add_episode_returns(12.5f);
  s->add_episode_lengths(13);
  return s;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

grpc::ByteBuffer FromString(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST(SerializeAliasedTest, SameBytesAsProtobuf) {
  const std::shared_ptr<RolloutSegment> segment = MakeSegment();
  const grpc::ByteBuffer buffer = SerializeAliased(segment);
  EXPECT_EQ(buffer.Length(), segment->ByteSizeLong());
  EXPECT_EQ(Flatten(buffer), segment->SerializeAsString());
}

TEST(SerializeAliasedTest, LargeFieldsPointIntoTheMessage) {
  const std::shared_ptr<RolloutSegment> segment = MakeSegment();
  const grpc::ByteBuffer buffer = SerializeAliased(segment);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  int aliased = 0;
  for (const grpc::Slice& slice : slices) {
    const void* start = slice.begin();
    if (start == segment->observations().data().data()) {
      EXPECT_EQ(slice.size(), segment->observations().data().size());
      ++aliased;
    }
    if (start == segment->values().data().data()) ++aliased;
    EXPECT_NE(start, segment->next_values().data().data());
  }
  EXPECT_EQ(aliased, 2);
}

TEST(SerializeAliasedTest, BufferKeepsTheMessageAlive) {
  std::shared_ptr<RolloutSegment> segment = MakeSegment();
  const std::string expected = segment->SerializeAsString();
  const std::weak_ptr<RolloutSegment> weak = segment;
  auto buffer = std::make_unique<grpc::ByteBuffer>(SerializeAliased(segment));
  segment.reset();
  ASSERT_FALSE(weak.expired());
  const grpc::ByteBuffer copy = *buffer;  // shares the slices
  buffer.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(Flatten(copy), expected);
}

TEST(SerializeAliasedTest, SmallMessageIsOneCopy) {
  RolloutAck ack;
  ack.set_acked_sequence_number(7);
  ack.set_credits(2);
  EXPECT_EQ(Flatten(SerializeCopy(ack)), ack.SerializeAsString());
  auto shared = std::make_shared<RolloutAck>(ack);
  EXPECT_EQ(Flatten(SerializeAliased(shared)), ack.SerializeAsString());
}

TEST(ParseByteBufferTest, RoundTrip) {
  const std::shared_ptr<RolloutSegment> segment = MakeSegment();
  grpc::ByteBuffer buffer = SerializeAliased(segment);
  RolloutSegment parsed;
  parsed.set_policy_version(99);  // cleared by the parse
  ASSERT_THAT(ParseByteBuffer(&buffer, &parsed, "segment"), IsOk());
  EXPECT_EQ(parsed.SerializeAsString(), segment->SerializeAsString());
  EXPECT_EQ(parsed.policy_version(), 0);
  EXPECT_EQ(buffer.Length(), segment->ByteSizeLong());  // not consumed
}

TEST(ParseByteBufferTest, EmptyBufferIsAnEmptyMessage) {
  grpc::ByteBuffer buffer = FromString("");
  RolloutAck ack;
  ack.set_credits(3);
  ASSERT_THAT(ParseByteBuffer(&buffer, &ack, "ack"), IsOk());
  EXPECT_EQ(ack.credits(), 0);
}

TEST(ParseByteBufferTest, NoPayload) {
  grpc::ByteBuffer buffer;
  RolloutAck ack;
  EXPECT_THAT(ParseByteBuffer(&buffer, &ack, "ack"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ack: no payload")));
}

TEST(ParseByteBufferTest, TruncatedNamesTheField) {
  const std::shared_ptr<RolloutSegment> segment = MakeSegment();
  const std::string bytes = segment->SerializeAsString();
  // Cut inside the observations' data.
  const size_t cut = bytes.find(segment->observations().data()) + 1000;
  grpc::ByteBuffer buffer = FromString(bytes.substr(0, cut));
  RolloutSegment parsed;
  EXPECT_THAT(ParseByteBuffer(&buffer, &parsed, "segment"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.observations: declares")));
  EXPECT_EQ(parsed.ByteSizeLong(), 0u);  // nothing half-parsed is left
}

TEST(ParseByteBufferTest, EveryTruncationIsRefused) {
  const std::string bytes = MakeSegment()->SerializeAsString();
  // Each cut point up to the first large field, then a sample of the rest.
  for (size_t cut = 1; cut < bytes.size(); cut += cut < 200 ? 1 : 997) {
    grpc::ByteBuffer buffer = FromString(bytes.substr(0, cut));
    RolloutSegment parsed;
    const absl::Status status = ParseByteBuffer(&buffer, &parsed, "segment");
    // A cut between two top-level fields is a valid shorter message.
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << cut;
      EXPECT_THAT(std::string(status.message()), HasSubstr("segment"));
    }
  }
}

TEST(ParseByteBufferTest, BadUtf8NamesTheField) {
  RolloutSegment segment;
  segment.set_run_id("ok");
  std::string bytes = segment.SerializeAsString();
  bytes.back() = '\xff';
  grpc::ByteBuffer buffer = FromString(bytes);
  EXPECT_THAT(ParseByteBuffer(&buffer, &segment, "segment"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.run_id: not valid UTF-8")));
}

TEST(ParseByteBufferTest, RepeatedMessagesAreIndexed) {
  PolicyUpdate update;
  update.add_parameters()->set_name("a");
  update.add_parameters()->set_name("b");
  std::string bytes = update.SerializeAsString();
  bytes.back() = '\xc0';  // the second name's only byte: a bad lead byte
  grpc::ByteBuffer buffer = FromString(bytes);
  EXPECT_THAT(ParseByteBuffer(&buffer, &update, "policy"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("policy.parameters[1].name")));
}

TEST(ParseByteBufferTest, GarbageIsRefusedNotACrash) {
  std::mt19937 random(7);
  const std::string valid = MakeSegment()->SerializeAsString();
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes;
    if (trial % 2 == 0) {
      bytes.resize(random() % 300);
      for (char& c : bytes) c = static_cast<char>(random());
    } else {  // a valid segment with a few bytes of its head flipped
      bytes = valid;
      for (int k = 0; k < 3; ++k) bytes[random() % 200] ^= 1 + random() % 255;
    }
    grpc::ByteBuffer buffer = FromString(bytes);
    RolloutSegment parsed;
    const absl::Status status = ParseByteBuffer(&buffer, &parsed, "segment");
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(status.message()), HasSubstr("segment"));
    }
  }
}

}  // namespace
}  // namespace rl
