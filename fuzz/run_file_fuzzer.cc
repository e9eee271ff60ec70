// Run files (YAML and JSON) -> RunSpec: the parser with its limits, then
// defaults, validation and the environment registry (LoadRunSpec), as the
// coordinator does for a submitted run file and rl_local for a local one.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "runspec/run_footprint.h"
#include "runspec/run_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (rl::RunFileFormat format :
       {rl::RunFileFormat::kYaml, rl::RunFileFormat::kJson}) {
    auto spec = rl::LoadRunSpec(text, format);
    if (!spec.ok()) continue;
    // A spec that loads is one the coordinator sizes up at submit.
    rl::EstimateRunFootprint(*spec);
  }
  return 0;
}
