#include "telemetry/tfevents/tfrecord.h"

#include <array>

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

}  // namespace rl
