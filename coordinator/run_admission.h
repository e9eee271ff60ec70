// What SubmitRun admits: the request's run file parsed by the loader
// rl_local uses (runspec/run_spec.h), or its RunSpec resolved, within the
// deployment's footprint limits (no gRPC, no store).
#ifndef RL_COORDINATOR_RUN_ADMISSION_H_
#define RL_COORDINATOR_RUN_ADMISSION_H_

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"
#include "runspec/run_footprint.h"

namespace rl {

// The resolved spec, or INVALID_ARGUMENT starting with the run file's name
// (or "spec" for a RunSpec built by a program) and naming the line and
// column, the field or the limit.
absl::StatusOr<RunSpec> AdmitRunSpec(const SubmitRunRequest& request,
                                     const FootprintLimits& limits);

}  // namespace rl

#endif  // RL_COORDINATOR_RUN_ADMISSION_H_
