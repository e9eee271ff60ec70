// TFRecord framing and the few `tensorflow.Event` messages TensorBoard needs,
// encoded by hand (protobuf wire format), so writing event files needs neither
// TensorFlow nor its protos.
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

// A serialized tensorflow.Event{wall_time, file_version: "brain.Event:2"}:
// the first record of every event file (TensorBoard reads the version from
// it).
std::string EncodeFileVersionEvent(double wall_time_s);

// A serialized tensorflow.Event{wall_time, step,
// summary: Summary{value: [Summary.Value{tag, simple_value}]}}.
std::string EncodeScalarEvent(double wall_time_s, int64_t step,
                              absl::string_view tag, float value);

}  // namespace rl

#endif  // RL_TELEMETRY_TFEVENTS_TFRECORD_H_
