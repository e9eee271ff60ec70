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
#ifndef RL_TELEMETRY_HTTP_ENDPOINT_H_
#define RL_TELEMETRY_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "httplib.h"
#include "telemetry/metrics_registry.h"

namespace rl {

class HttpEndpoint {
 public:
  // Registers more GET routes on the server before it starts.
  using AddRoutes = std::function<void(httplib::Server*)>;

  // Binds host:port (port 0: a free one) and serves in background threads:
  // GET /metrics from `registry` (none when null; it must outlive the
  // endpoint) and whatever `add_routes` registers. UNAVAILABLE naming the
  // address if it cannot bind; INVALID_ARGUMENT for a port outside
  // [0, 65535].
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, const MetricsRegistry* registry,
      const AddRoutes& add_routes = nullptr);

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

  httplib::Server server_;
  int port_ = 0;
  // Notified when httplib's accept loop has returned.
  absl::Notification stopped_;
  std::thread thread_;
};

}  // namespace rl

#endif  // RL_TELEMETRY_HTTP_ENDPOINT_H_
