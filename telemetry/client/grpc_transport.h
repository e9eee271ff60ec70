// The emitter's transport over gRPC: one TelemetryService.Ingest stream per
// connection, and a factory for a process's emitter.
#ifndef RL_TELEMETRY_CLIENT_GRPC_TRANSPORT_H_
#define RL_TELEMETRY_CLIENT_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include "common/security.h"
#include "telemetry/client/emitter.h"

namespace rl {

// A transport streaming to the TelemetryService at `target` ("host:port"),
// with `security`'s credentials and token (null: the process default).
std::unique_ptr<MetricTransport> MakeGrpcMetricTransport(
    const std::string& target,
    std::shared_ptr<const Security> security = nullptr);

// An emitter sending to `target`; a disabled one (Emit does nothing) when
// `target` is empty.
std::unique_ptr<Emitter> MakeEmitter(
    const std::string& target, EmitterOptions options = {},
    std::shared_ptr<const Security> security = nullptr);

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_GRPC_TRANSPORT_H_
