// Shared segments: messages round-trip through slots, slots are reused once
// released and grow for larger messages, and a reader refuses offers and
// references that are not a writer's, naming what is wrong.
#include "common/shared_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

std::string Pattern(int64_t bytes, char seed) {
  std::string s(bytes, '\0');
  for (int64_t i = 0; i < bytes; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

absl::StatusOr<SharedSlotRef> Put(SharedSegmentWriter& writer, int64_t seq,
                                  const std::string& message) {
  return writer.Write(
      seq, static_cast<int64_t>(message.size()),
      [&](uint8_t* out) { std::memcpy(out, message.data(), message.size()); });
}

std::string Viewed(SharedSegmentReader& reader, SharedSlotRef ref) {
  absl::StatusOr<absl::string_view> view = reader.View(ref);
  EXPECT_TRUE(view.ok()) << view.status();
  return view.ok() ? std::string(*view) : "";
}

TEST(SharedSegmentsTest, MessagesRoundTripAndSlotsAreReusedOnceReleased) {
  SharedSegmentWriter::Options options;
  options.slots = 2;
  ASSERT_OK_AND_ASSIGN(auto writer, SharedSegmentWriter::Create(options));
  EXPECT_THAT(writer->offer(), HasSubstr(absl::StrCat(getpid(), ":")));
  ASSERT_OK_AND_ASSIGN(auto reader,
                       SharedSegmentReader::Open(writer->offer(), 64 << 20));
  EXPECT_EQ(reader->slots(), 2);

  const std::string first = Pattern(3 << 20, 1);  // past the first MiB
  const std::string second = Pattern(100, 2);
  ASSERT_OK_AND_ASSIGN(SharedSlotRef a, Put(*writer, 1, first));
  ASSERT_OK_AND_ASSIGN(SharedSlotRef b, Put(*writer, 2, second));
  EXPECT_NE(a.slot, b.slot);
  EXPECT_EQ(writer->free_slots(), 0);
  EXPECT_TRUE(Viewed(*reader, a) == first);
  EXPECT_EQ(Viewed(*reader, b), second);

  // Both in flight: the third goes as bytes.
  EXPECT_THAT(Put(*writer, 3, second).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("all 2 slots are in flight")));

  // Acknowledging 1 frees its slot only; the slot grows for a larger one,
  // and the reader maps it again.
  writer->Release(1);
  EXPECT_EQ(writer->free_slots(), 1);
  const std::string third = Pattern(5 << 20, 3);
  ASSERT_OK_AND_ASSIGN(SharedSlotRef c, Put(*writer, 3, third));
  EXPECT_EQ(c.slot, a.slot);
  EXPECT_TRUE(Viewed(*reader, c) == third);
  EXPECT_EQ(Viewed(*reader, b), second);
  writer->Release(3);
  EXPECT_EQ(writer->free_slots(), 2);
}

TEST(SharedSegmentsTest, ReaderRefusesWhatNoWriterOffered) {
  const std::string token(32, 'a');
  auto open = [&](const std::string& offer) {
    return SharedSegmentReader::Open(offer, 1 << 20).status();
  };
  EXPECT_THAT(open("12"), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("not <pid>:<32 hex digits>")));
  EXPECT_THAT(open(absl::StrCat("0:", token, ":3")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(open(absl::StrCat("1:", token.substr(1), ":3")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(open(absl::StrCat("1:", token, ":")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(open(absl::StrCat("1:", token, ":-1")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Another host: no such descriptor here.
  EXPECT_THAT(open(absl::StrCat(getpid(), ":", token, ":999999")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("another host")));
  // A descriptor that is not the offer's memfd is never taken: a file, or
  // another writer's slot under this offer's token.
  const std::string path = MakeTestDir("shm") + "/file";
  const int file = ::open(path.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(file, 0);
  EXPECT_THAT(open(absl::StrCat(getpid(), ":", token, ":", file)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not /memfd:rl-segments-" + token + "-0")));
  close(file);
  ASSERT_OK_AND_ASSIGN(auto other, SharedSegmentWriter::Create({}));
  const std::string other_offer = other->offer();
  const size_t fds = other_offer.rfind(':');
  EXPECT_THAT(
      open(absl::StrCat(getpid(), ":", token, other_offer.substr(fds))),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is /memfd:")));
  // The right name, but not sealed against shrinking; then sealed, but
  // without a sender's header.
  const int unsealed = memfd_create(("rl-segments-" + token + "-0").c_str(),
                                    MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  const std::string forged = absl::StrCat(getpid(), ":", token, ":", unsealed);
  EXPECT_THAT(open(forged),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a memfd sealed against shrinking")));
  ASSERT_EQ(fcntl(unsealed, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_THAT(open(forged),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not start with the header")));
  close(unsealed);
  // Slots named out of order are not the offer's either.
  const std::string first =
      other_offer.substr(fds + 1, other_offer.find(',', fds) - fds - 1);
  const std::string second_and_on =
      other_offer.substr(other_offer.find(',', fds) + 1);
  EXPECT_THAT(
      open(other_offer.substr(0, fds + 1) + second_and_on + "," + first),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(", not /memfd:rl-segments-")));
}

TEST(SharedSegmentsTest, ViewRefusesReferencesOutsideTheOffer) {
  SharedSegmentWriter::Options options;
  options.slots = 1;
  ASSERT_OK_AND_ASSIGN(auto writer, SharedSegmentWriter::Create(options));
  ASSERT_OK_AND_ASSIGN(auto reader,
                       SharedSegmentReader::Open(writer->offer(), 4 << 20));
  ASSERT_OK_AND_ASSIGN(SharedSlotRef ref, Put(*writer, 1, "abc"));
  EXPECT_EQ(Viewed(*reader, ref), "abc");
  EXPECT_THAT(reader->View({1, 3}, "segment.shared").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.shared.slot: 1 is not in [0, 1)")));
  EXPECT_THAT(reader->View({0, 5 << 20}, "segment.shared").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("segment.shared.length: 5242880 bytes")));
  // More than the slot holds (it was reserved in 1 MiB steps): refused,
  // never a fault past its end.
  EXPECT_THAT(reader->View({0, 2 << 20}, "segment.shared").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("announced, slot 0 holds")));
}

TEST(SharedSegmentsTest, WriterRefusesBadOptions) {
  SharedSegmentWriter::Options options;
  options.slots = 0;
  EXPECT_THAT(SharedSegmentWriter::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots")));
  options.slots = 65;
  EXPECT_THAT(SharedSegmentWriter::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slots")));
}

}  // namespace
}  // namespace rl
