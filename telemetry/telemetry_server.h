// The telemetry process without its flags: the core (store, TensorBoard
// files), TelemetryService on gRPC, and one HTTP endpoint serving the web
// page, the JSON API and /metrics; run states polled from the coordinator
// for the web page.
//
// Create brings everything up and writes the port files, the gRPC one last,
// so once it exists the service is ready. Destruction stops the servers
// and stores what is queued.
#ifndef RL_TELEMETRY_TELEMETRY_SERVER_H_
#define RL_TELEMETRY_TELEMETRY_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/security.h"
#include "telemetry/telemetry_core.h"
#include "telemetry/telemetry_service.h"

namespace rl {

struct TelemetryServerOptions {
  // TLS, tokens and roles of its gRPC and HTTP doors and of its calls to
  // the coordinator (the main's, from its flags; null:
  // Security::ProcessDefault()).
  std::shared_ptr<const Security> security;
  std::string host = "127.0.0.1";
  // gRPC (TelemetryService); 0 picks a free port.
  int port = 50052;
  // The bound gRPC port is written here if set.
  std::string port_file;
  // Web page, JSON API and /metrics; 0 picks a free port, -1: off.
  int http_port = 8080;
  // The bound HTTP port is written here if set.
  std::string http_port_file;
  // Coordinator HOST:PORT whose run states the web page shows; "" = none.
  std::string coordinator;
  // The store (its directory is created if missing), TensorBoard files,
  // retention, the limits on ingest, watchers, runs and open files.
  TelemetryCoreOptions core;
  // The Watch streams' backlog bound.
  TelemetryServiceOptions service;
};

class TelemetryServer {
 public:
  static absl::StatusOr<std::unique_ptr<TelemetryServer>> Create(
      const TelemetryServerOptions& options);
  // Stops gRPC (streams get 2 s to wind down) and HTTP, then stores what is
  // queued. Not bounded by itself: a caller that must exit in time sets its
  // own deadline.
  ~TelemetryServer();

  TelemetryServer(const TelemetryServer&) = delete;
  TelemetryServer& operator=(const TelemetryServer&) = delete;

  int port() const;
  // 0 when HTTP is off.
  int http_port() const;

 private:
  struct Impl;
  explicit TelemetryServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_TELEMETRY_SERVER_H_
