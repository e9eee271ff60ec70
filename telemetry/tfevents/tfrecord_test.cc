#include "telemetry/tfevents/tfrecord.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rl {
namespace {

uint32_t Crc32cOf(absl::string_view s) { return Crc32c(s.data(), s.size()); }

// Bit-at-a-time reference, to check the slice-by-8 tables and tail handling.
uint32_t ReferenceCrc32c(const unsigned char* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
  }
  return ~crc;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32cOf(""), 0u);
  EXPECT_EQ(Crc32cOf("123456789"), 0xE3069283u);
  // RFC 3720 (iSCSI) appendix B.4.
  EXPECT_EQ(Crc32cOf(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32cOf(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32cOf(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32cOf(descending), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::vector<unsigned char> buf(300);
  for (size_t i = 0; i < buf.size(); ++i) {
    buf[i] = static_cast<unsigned char>(i * 131 + 7);
  }
  for (size_t start = 0; start < 8; ++start) {
    for (size_t n = 0; start + n <= 280; ++n) {
      ASSERT_EQ(Crc32c(buf.data() + start, n),
                ReferenceCrc32c(buf.data() + start, n))
          << "start " << start << " length " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsWholeBuffer) {
  const std::string s = "The quick brown fox jumps over the lazy dog, twice.";
  for (size_t split = 0; split <= s.size(); ++split) {
    EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), split), s.data() + split,
                           s.size() - split),
              Crc32cOf(s))
        << "split " << split;
  }
}

TEST(Crc32cTest, Mask) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, also what
  // TensorBoard's masked_crc32c(b"123456789") returns.
  EXPECT_EQ(MaskCrc32c(0xE3069283u), 0xC78AB0E5u);
  EXPECT_EQ(MaskedCrc32c("123456789", 9), 0xC78AB0E5u);
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x80000000u}) {
    EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  }
}

// Golden bytes from TensorBoard's own code (tensorflow_stub's masked_crc32c
// and event_pb2.Event.SerializeToString()).
TEST(TfRecordTest, FramingMatchesTensorBoardBytes) {
  EXPECT_EQ(absl::BytesToHexString(EncodeTfRecord("")),
            "000000000000000029039807d8ea82a2");
  EXPECT_EQ(absl::BytesToHexString(EncodeTfRecord("hello")),
            "0500000000000000eab2043e68656c6c6fbb1f1c19");
}

std::vector<std::string> SampleRecords() {
  return {"", "a", std::string("\0\xff\n", 3), std::string(100000, 'z')};
}

std::string Concat(const std::vector<std::string>& records) {
  std::string file;
  for (const std::string& r : records) file += EncodeTfRecord(r);
  return file;
}

TEST(TfRecordTest, RoundTrip) {
  const std::vector<std::string> records = SampleRecords();
  auto decoded = DecodeTfRecords(Concat(records));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, records);

  auto empty = DecodeTfRecords("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST(TfRecordTest, EveryFlippedByteIsDetectedWithItsRecordOffset) {
  const std::vector<std::string> records = {"first", "", "third record"};
  const std::string file = Concat(records);
  std::vector<size_t> starts;
  size_t offset = 0;
  for (const std::string& r : records) {
    starts.push_back(offset);
    offset += r.size() + 16;
  }
  for (size_t i = 0; i < file.size(); ++i) {
    std::string corrupt = file;
    corrupt[i] ^= 0x01;
    size_t record_start = 0;
    for (size_t s : starts) {
      if (s <= i) record_start = s;
    }
    const size_t in_record = i - record_start;
    auto decoded = DecodeTfRecords(corrupt);
    ASSERT_FALSE(decoded.ok()) << "flipped byte " << i << " not detected";
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(decoded.status().message().find(
                  absl::StrCat("record at offset ", record_start, ":")),
              absl::string_view::npos)
        << "byte " << i << ": " << decoded.status();
    const bool in_length = in_record < 12;
    EXPECT_NE(
        decoded.status().message().find(in_length ? "length CRC" : "data CRC"),
        absl::string_view::npos)
        << "byte " << i << ": " << decoded.status();
  }
}

TEST(TfRecordTest, TruncatedFileIsDataLoss) {
  const std::string one = EncodeTfRecord("payload");
  const std::string file = one + one;
  for (size_t n = 0; n <= file.size(); ++n) {
    auto decoded = DecodeTfRecords(absl::string_view(file).substr(0, n));
    if (n == 0 || n == one.size() || n == file.size()) {
      ASSERT_TRUE(decoded.ok()) << n << ": " << decoded.status();
      EXPECT_EQ(decoded->size(), n / one.size());
      continue;
    }
    ASSERT_FALSE(decoded.ok()) << "prefix " << n;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(decoded.status().message().find("truncated"),
              absl::string_view::npos)
        << decoded.status();
    EXPECT_NE(decoded.status().message().find(absl::StrCat(
                  "record at offset ", n < one.size() ? 0 : one.size())),
              absl::string_view::npos)
        << decoded.status();
  }
}

TEST(TfRecordTest, HugeLengthWithValidCrcIsTruncatedNotOverflow) {
  // A length field near 2^64 (with a matching CRC) must not wrap the bounds
  // check.
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back('\xff');
  const uint32_t crc = MaskedCrc32c(file.data(), 8);
  for (int i = 0; i < 4; ++i) file.push_back(static_cast<char>(crc >> (8 * i)));
  file += "tail";
  auto decoded = DecodeTfRecords(file);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("truncated"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace rl
