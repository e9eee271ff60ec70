// TFRecord framing with its CRC32C, written here because Debian's Abseil
// (20220623) has no CRC32C and TensorFlow is not a dependency. The records'
// contents (tensorflow.Event) come from event.proto.
//
// A TFRecord file is a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes |
//   data[length] | uint32 masked CRC32C of data.
#ifndef RL_TELEMETRY_TFEVENTS_TFRECORD_H_
#define RL_TELEMETRY_TFEVENTS_TFRECORD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by TFRecord,
// iSCSI and ext4. Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(const void* data, size_t n);
// Continues `crc` (a previous Crc32c/Crc32cExtend result) over more bytes:
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

// TFRecord's masking, so a CRC stored inside CRC'd data does not look like a
// CRC of it: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);
uint32_t UnmaskCrc32c(uint32_t masked);
// MaskCrc32c(Crc32c(data, n)).
uint32_t MaskedCrc32c(const void* data, size_t n);

// One framed record (16 bytes of framing around `data`).
std::string EncodeTfRecord(absl::string_view data);

// Splits a whole TFRecord file into its records' data, checking both CRCs of
// every record. DATA_LOSS, naming the record's byte offset, for a truncated
// record or a CRC mismatch.
absl::StatusOr<std::vector<std::string>> DecodeTfRecords(
    absl::string_view file);

}  // namespace rl

#endif  // RL_TELEMETRY_TFEVENTS_TFRECORD_H_
