#include "telemetry/tfevents/tfrecord.h"

#include <array>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rl {
namespace {

// Slice-by-8 tables: kCrcTables[0] is the classic byte-at-a-time table;
// kCrcTables[k][b] is the CRC of byte b followed by k zero bytes, so eight
// lookups fold in eight input bytes at once.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

constexpr CrcTables MakeCrcTables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? kCastagnoliReflected : 0u);
    }
    t[0][i] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) {
      const uint32_t prev = t[k - 1][i];
      t[k][i] = (prev >> 8) ^ t[0][prev & 0xFFu];
    }
  }
  return t;
}

constexpr CrcTables kCrcTables = MakeCrcTables();

// Byte-order independent loads and stores (the format is little-endian).
inline uint32_t LoadLe32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

inline uint64_t LoadLe64(const unsigned char* p) {
  return static_cast<uint64_t>(LoadLe32(p)) |
         (static_cast<uint64_t>(LoadLe32(p + 4)) << 32);
}

inline void AppendLe32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

inline void AppendLe64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// Protobuf wire format: the handful of pieces tensorflow.Event needs.
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5,
};

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendKey(uint32_t field, WireType type, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | type, out);
}

void AppendDoubleField(uint32_t field, double v, std::string* out) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  AppendKey(field, kFixed64, out);
  AppendLe64(bits, out);
}

void AppendFloatField(uint32_t field, float v, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  AppendKey(field, kFixed32, out);
  AppendLe32(bits, out);
}

// int64 fields are varints of the two's complement (negative steps take ten
// bytes, as protobuf writes them).
void AppendInt64Field(uint32_t field, int64_t v, std::string* out) {
  AppendKey(field, kVarint, out);
  AppendVarint(static_cast<uint64_t>(v), out);
}

void AppendBytesField(uint32_t field, absl::string_view v, std::string* out) {
  AppendKey(field, kLengthDelimited, out);
  AppendVarint(v.size(), out);
  out->append(v.data(), v.size());
}

// Field numbers from tensorflow/core/util/event.proto and
// tensorflow/core/framework/summary.proto.
constexpr uint32_t kEventWallTime = 1;     // double
constexpr uint32_t kEventStep = 2;         // int64
constexpr uint32_t kEventFileVersion = 3;  // string
constexpr uint32_t kEventSummary = 5;      // Summary
constexpr uint32_t kSummaryValue = 1;      // repeated Summary.Value
constexpr uint32_t kValueTag = 1;          // string
constexpr uint32_t kValueSimpleValue = 2;  // float

constexpr char kFileVersion[] = "brain.Event:2";
constexpr size_t kHeaderSize = sizeof(uint64_t) + sizeof(uint32_t);
constexpr size_t kFooterSize = sizeof(uint32_t);

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  const auto& t = kCrcTables;
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = LoadLe32(p) ^ c;
    const uint32_t hi = LoadLe32(p + 4);
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^
        t[4][lo >> 24] ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^
        t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return ~c;
}

uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

uint32_t MaskedCrc32c(const void* data, size_t n) {
  return MaskCrc32c(Crc32c(data, n));
}

std::string EncodeTfRecord(absl::string_view data) {
  std::string out;
  out.reserve(kHeaderSize + data.size() + kFooterSize);
  AppendLe64(data.size(), &out);
  AppendLe32(MaskedCrc32c(out.data(), sizeof(uint64_t)), &out);
  out.append(data.data(), data.size());
  AppendLe32(MaskedCrc32c(data.data(), data.size()), &out);
  return out;
}

absl::StatusOr<std::vector<std::string>> DecodeTfRecords(
    absl::string_view file) {
  std::vector<std::string> records;
  const auto* base = reinterpret_cast<const unsigned char*>(file.data());
  size_t offset = 0;
  while (offset < file.size()) {
    const size_t left = file.size() - offset;
    if (left < kHeaderSize) {
      return absl::DataLossError(absl::StrCat("record at offset ", offset,
                                              ": truncated header (", left,
                                              " of ", kHeaderSize, " bytes)"));
    }
    const unsigned char* p = base + offset;
    const uint64_t length = LoadLe64(p);
    const uint32_t length_crc = LoadLe32(p + sizeof(uint64_t));
    if (MaskedCrc32c(p, sizeof(uint64_t)) != length_crc) {
      return absl::DataLossError(
          absl::StrCat("record at offset ", offset, ": length CRC mismatch"));
    }
    // The length CRC matched, so `length` is what the writer wrote; a file
    // shorter than it is truncated, not corrupt.
    if (length > left - kHeaderSize ||
        left - kHeaderSize - length < kFooterSize) {
      return absl::DataLossError(absl::StrCat(
          "record at offset ", offset, ": truncated (length ", length,
          ", only ", left - kHeaderSize, " bytes follow the header)"));
    }
    const unsigned char* data = p + kHeaderSize;
    const uint32_t data_crc = LoadLe32(data + length);
    if (MaskedCrc32c(data, length) != data_crc) {
      return absl::DataLossError(
          absl::StrCat("record at offset ", offset, ": data CRC mismatch"));
    }
    records.emplace_back(reinterpret_cast<const char*>(data), length);
    offset += kHeaderSize + length + kFooterSize;
  }
  return records;
}

std::string EncodeFileVersionEvent(double wall_time_s) {
  std::string event;
  AppendDoubleField(kEventWallTime, wall_time_s, &event);
  AppendBytesField(kEventFileVersion, kFileVersion, &event);
  return event;
}

std::string EncodeScalarEvent(double wall_time_s, int64_t step,
                              absl::string_view tag, float value) {
  std::string summary_value;
  AppendBytesField(kValueTag, tag, &summary_value);
  AppendFloatField(kValueSimpleValue, value, &summary_value);
  std::string summary;
  AppendBytesField(kSummaryValue, summary_value, &summary);

  std::string event;
  AppendDoubleField(kEventWallTime, wall_time_s, &event);
  AppendInt64Field(kEventStep, step, &event);
  AppendBytesField(kEventSummary, summary, &event);
  return event;
}

}  // namespace rl
