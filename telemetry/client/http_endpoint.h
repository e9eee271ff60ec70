// A process's one HTTP server (cpp-httplib, Debian's libcpp-httplib-dev):
// GET /metrics from a MetricsRegistry, plus the routes a component adds (the
// telemetry service's web page and JSON API).
//
// Data flow: httplib's accept thread -> its thread pool -> one handler call
// per request; handlers may run concurrently.
//
// Rules on top of httplib's, the same for every route: only GET and HEAD are
// served (anything else: 405 with "Allow: GET, HEAD", answered before a body
// is read); an unknown path is 404; a handler that throws is 500; error
// statuses without a body get a one-line text body. httplib answers a
// request it cannot parse with 400 (414 for an over-long URI), drops a
// client that sends nothing for 5 s, and never raises SIGPIPE.
//
// Doors (common/security.h, the process default): on loopback, open. Off
// loopback, HTTPS with --tls_cert/--tls_key, and with --tokens, /metrics and
// /api/* need "Authorization: Bearer <token>" of a role AllowedRoles grants
// ("GET /metrics", "GET /api"): 401 without one, 403 for the wrong role.
// Plaintext off loopback only with --insecure.
#ifndef RL_TELEMETRY_CLIENT_HTTP_ENDPOINT_H_
#define RL_TELEMETRY_CLIENT_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/security.h"
#include "common/thread.h"
#include "httplib.h"
#include "telemetry/client/metrics_registry.h"

namespace rl {

class HttpEndpoint {
 public:
  // Registers more GET routes on the server before it starts.
  using AddRoutes = std::function<void(httplib::Server*)>;

  // Binds host:port (port 0: a free one) and serves in background threads:
  // GET /metrics from `registry` (none when null; it must outlive the
  // endpoint) and whatever `add_routes` registers. UNAVAILABLE naming the
  // address if it cannot bind; INVALID_ARGUMENT for a port outside
  // [0, 65535]; FAILED_PRECONDITION for plaintext off loopback without
  // --insecure, or a certificate httplib cannot load.
  // Doors by `security` (null: Security::ProcessDefault()).
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, const MetricsRegistry* registry,
      const AddRoutes& add_routes = nullptr,
      std::shared_ptr<const Security> security = nullptr);

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Stops accepting, waits for the connections in flight (idle keep-alive
  // ones up to 2 s, requests up to the 5 s read and write timeouts).
  // Idempotent; must not be called from a handler.
  void Stop();
  ~HttpEndpoint();

  // The bound port (the free one when started with port 0).
  int port() const { return port_; }

 private:
  HttpEndpoint() = default;

  std::unique_ptr<httplib::Server> server_;  // an SSLServer for HTTPS
  int port_ = 0;
  // Notified when httplib's accept loop has returned.
  absl::Notification stopped_;
  NamedThread thread_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_CLIENT_HTTP_ENDPOINT_H_
