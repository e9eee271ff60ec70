// TensorBoard event files: TFRecord framing (lengths and both CRCs) and the
// tensorflow.Event records in them. Records that decode must frame back to
// the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "telemetry/tfevents/event.pb.h"
#include "telemetry/tfevents/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  auto records = rl::DecodeTfRecords(file);
  if (!records.ok()) return 0;
  std::string framed;
  for (const std::string& record : *records) {
    rl::tensorboard::Event event;
    event.ParseFromString(record);
    framed += rl::EncodeTfRecord(record);
  }
  if (framed != file) std::abort();
  return 0;
}
