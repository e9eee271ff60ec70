// What the fuzz targets share: a request message from the fuzzer's bytes
// (binary wire format, or text format so seed inputs can be written by
// hand) and a scratch directory per process for stores and event files.
#ifndef RL_FUZZ_FUZZ_INPUT_H_
#define RL_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "google/protobuf/message.h"

namespace rl {

// True if `data` parses as `message`, in the binary wire format or (when that
// fails) in text format. Parsing from a peer's bytes is what every service
// does first; the text form only makes the seed corpora readable.
bool ParseFuzzInput(const uint8_t* data, size_t size,
                    google::protobuf::Message* message);

// A new directory under $TMPDIR (or /tmp), made once per call; aborts if it
// cannot be made (a fuzz target cannot run without it).
std::string MakeFuzzDir(const std::string& name);

}  // namespace rl

#endif  // RL_FUZZ_FUZZ_INPUT_H_
