#include "fuzz/fuzz_input.h"

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"

namespace rl {

bool ParseFuzzInput(const uint8_t* data, size_t size,
                    google::protobuf::Message* message) {
  // Protobuf logs every string field that is not UTF-8; fuzzers make many.
  google::protobuf::LogSilencer silence_parse_errors;
  if (message->ParseFromArray(data, static_cast<int>(size))) return true;
  message->Clear();
  google::protobuf::TextFormat::Parser parser;
  // The text parser logs every syntax error; a fuzzer makes millions.
  class Silent : public google::protobuf::io::ErrorCollector {
   public:
    void AddError(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}
  } silent;
  parser.RecordErrorsTo(&silent);
  return parser.ParseFromString(
      std::string(reinterpret_cast<const char*>(data), size), message);
}

std::string MakeFuzzDir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") +
                        "/rl_fuzz_" + name + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return pattern;
}

}  // namespace rl
