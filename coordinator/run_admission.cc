#include "coordinator/run_admission.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runspec/run_spec.h"

namespace rl {

absl::StatusOr<RunSpec> AdmitRunSpec(const SubmitRunRequest& request,
                                     const FootprintLimits& limits) {
  const bool from_file =
      !request.run_file().empty() || !request.run_file_name().empty();
  if (from_file && request.has_spec()) {
    return absl::InvalidArgumentError(
        "spec, run_file: give a run file or a spec, not both");
  }
  if (request.run_file_name().size() > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_file_name: at most 4096 bytes (got ",
                     request.run_file_name().size(), ")"));
  }
  // Errors start with what the user knows the run by: the file's name, or
  // "spec" for a RunSpec built by a program.
  const std::string source = !from_file ? "spec"
                             : request.run_file_name().empty()
                                 ? "run_file"
                                 : request.run_file_name();
  RunSpec spec;
  absl::Status valid;
  if (from_file) {
    absl::StatusOr<RunSpec> loaded = LoadRunSpec(
        request.run_file(), absl::EndsWith(request.run_file_name(), ".json")
                                ? RunFileFormat::kJson
                                : RunFileFormat::kYaml);
    if (loaded.ok()) spec = *std::move(loaded);
    valid = loaded.status();
  } else {
    spec = request.spec();
    valid = ResolveRunSpec(&spec);
  }
  if (valid.ok()) {
    valid = CheckRunFootprint(spec, EstimateRunFootprint(spec), limits);
  }
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", valid.message()));
  }
  return spec;
}

}  // namespace rl
