#include "telemetry/client/http_endpoint.h"

#include <sys/socket.h>

#include <exception>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/json_quote.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/security.h"

namespace rl {
namespace {

constexpr char kTextType[] = "text/plain; charset=utf-8";

// httplib's default sets SO_REUSEPORT, which would let a second process
// bind the same port and silently share its connections; SO_REUSEADDR only
// allows a restarted server to bind while old connections linger.
void ReuseAddressOnly(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "not found";
    case 405:
      return "method not allowed";
    case 413:
      return "payload too large";
    case 414:
      return "URI too long";
    default:
      return "error";
  }
}

// Threads that serve connections. httplib gives each connection a thread
// for as long as it is open, so a client that never finishes its headers
// holds one until the read timeout; with httplib's default (8 threads) 8 such
// sockets delayed every scrape by seconds. Waiting threads cost no CPU.
constexpr size_t kServerThreads = 128;

// Headers on every answer: no content sniffing, no framing (clickjacking),
// nothing loaded from elsewhere, and no inline script (the page's script is
// a file of this server, /index.js, so markup injected into the page cannot
// run; its style is inline; its data comes from this server's /api).
constexpr std::pair<const char*, const char*> kSecurityHeaders[] = {
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src "
     "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
     "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}};

// Whether a server bound to loopback may answer a request for `host` (its
// Host header): only loopback names, so a page on another site cannot
// reach it through a DNS name rebound to 127.0.0.1. No Host (HTTP/1.0
// tools) is served.
// Refusals are logged a few a minute per client address.
LogLimiter& RefusalLogs() {
  static LogLimiter* const limiter = new LogLimiter();
  return *limiter;
}

bool LoopbackHostAllowed(absl::string_view host) {
  if (host.empty()) return true;
  // "[::1]:8080", "localhost:8080", "127.0.0.1".
  if (absl::ConsumePrefix(&host, "[")) {
    host = host.substr(0, host.find(']'));
  } else if (const size_t colon = host.rfind(':');
             colon != absl::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  return IsLoopbackAddress(host);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, const MetricsRegistry* registry,
    const AddRoutes& add_routes, std::shared_ptr<const Security> security) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP port ", port, " is outside [0, 65535]"));
  }
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  // "" means every IPv4 address, as for the gRPC servers.
  const std::string bind_host = host.empty() ? "0.0.0.0" : host;
  if (security == nullptr) security = Security::ProcessDefault();
  const bool open = IsLoopbackAddress(bind_host) || security->insecure();
  if (open) {
    endpoint->server_ = std::make_unique<httplib::Server>();
  } else if (security->tls()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        security->options().tls_cert_file.c_str(),
        security->options().tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "HTTPS on ", bind_host, ":", port, ": cannot load --tls_cert ",
          security->options().tls_cert_file, " and --tls_key"));
    }
    endpoint->server_ = std::move(ssl);
  } else {
    // A bad flag (exit 2), as for the gRPC servers.
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve HTTP on ", bind_host, ":", port,
        " without TLS: give --tls_cert and --tls_key, listen on loopback, or "
        "pass --insecure on a trusted network"));
  }
  // With tokens, the JSON API (run data) needs one everywhere, loopback
  // included (the page carries it); /metrics needs one off loopback, so a
  // local Prometheus scrapes without.
  const bool api_tokens = security->tokens_required() && !security->insecure();
  const bool metrics_tokens = !open && security->tokens_required();
  const bool check_host = IsLoopbackAddress(bind_host);
  httplib::Server& server = *endpoint->server_;
  server.new_task_queue = [] {
    return new httplib::ThreadPool(kServerThreads);
  };
  server.set_post_routing_handler(
      [](const httplib::Request&, httplib::Response& response) {
        for (const auto& [name, value] : kSecurityHeaders) {
          response.set_header(name, value);
        }
      });
  server.set_socket_options(ReuseAddressOnly);
  server.set_read_timeout(5);
  server.set_write_timeout(5);
  // An idle keep-alive connection holds one of httplib's threads, and Stop
  // waits for it: short, since scrapes come seconds apart anyway.
  server.set_keep_alive_timeout(2);
  // Requests carry no bodies; refusing early keeps a client from making the
  // server buffer one.
  server.set_payload_max_length(64 << 10);
  server.set_pre_routing_handler([api_tokens, metrics_tokens, check_host,
                                  security](const httplib::Request& request,
                                            httplib::Response& response) {
    if (check_host && !LoopbackHostAllowed(request.get_header_value("Host"))) {
      std::string left_out;
      if (RefusalLogs().Allow(request.remote_addr, &left_out)) {
        RL_LOG_WARNING("http: refused {} {} for Host {} from {}{}",
                       request.method, QuoteForError(request.path),
                       QuoteForError(request.get_header_value("Host")),
                       request.remote_addr, left_out);
      }
      response.status = 421;
      response.set_content(
          "this server answers only to a loopback Host (localhost, "
          "127.0.0.1, [::1])\n",
          kTextType);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (request.method == "GET" || request.method == "HEAD") {
      const absl::string_view path = request.path;
      std::string method;
      if (path == "/metrics") {
        if (!metrics_tokens) return httplib::Server::HandlerResponse::Unhandled;
        method = "GET /metrics";
      } else if (absl::StartsWith(path, "/api")) {
        if (!api_tokens) return httplib::Server::HandlerResponse::Unhandled;
        method = "GET /api";
      } else {
        // The page itself (HTML, scripts) holds no data.
        return httplib::Server::HandlerResponse::Unhandled;
      }
      // get_header_value returns a copy: keep it alive while `token` looks.
      const std::string header = request.get_header_value("Authorization");
      absl::string_view token = header;
      if (!absl::ConsumePrefix(&token, "Bearer ")) token = "";
      const absl::StatusOr<Identity> identity =
          security->Authorize(method, token);
      if (identity.ok()) return httplib::Server::HandlerResponse::Unhandled;
      std::string left_out;
      if (RefusalLogs().Allow(request.remote_addr, &left_out)) {
        RL_LOG_WARNING("http: refused {} {} from {}: {}{}", request.method,
                       QuoteForError(request.path), request.remote_addr,
                       std::string(identity.status().message()), left_out);
      }
      response.status =
          identity.status().code() == absl::StatusCode::kUnauthenticated ? 401
                                                                         : 403;
      if (response.status == 401) {
        response.set_header("WWW-Authenticate", "Bearer");
      }
      response.set_content(absl::StrCat(identity.status().message(), "\n"),
                           kTextType);
      return httplib::Server::HandlerResponse::Handled;
    }
    response.status = 405;
    response.set_header("Allow", "GET, HEAD");
    response.set_content("method not allowed\n", kTextType);
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& response) {
        // Routes that answer an error with a body of their own keep it.
        if (!response.body.empty()) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        response.set_content(absl::StrCat(Reason(response.status), "\n"),
                             kTextType);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler([](const httplib::Request& request,
                                  httplib::Response& response,
                                  std::exception_ptr error) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    RL_LOG_ERROR("http: {} {} failed: {}", request.method, request.path, what);
    response.status = 500;
    response.set_content("internal error\n", kTextType);
  });
  if (registry != nullptr) {
    server.Get("/metrics", [registry](const httplib::Request&,
                                      httplib::Response& response) {
      response.set_content(registry->RenderText(), kPrometheusContentType);
    });
  }
  if (add_routes) add_routes(&server);

  const int bound = port == 0 ? server.bind_to_any_port(bind_host)
                    : server.bind_to_port(bind_host, port) ? port
                                                           : -1;
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", host, ":", port));
  }
  endpoint->port_ = bound;
  // The socket listens from here on: connections wait in its backlog until
  // the accept loop takes them.
  endpoint->thread_ = StartThread("http", [e = endpoint.get()] {
    e->server_->listen_after_bind();
    e->stopped_.Notify();
  });
  return endpoint;
}

void HttpEndpoint::Stop() {
  if (!thread_.joinable()) return;
  // httplib's stop() does nothing before the accept loop has started, and
  // asserts if called twice while it runs: call it once, when it counts.
  bool stop_sent = false;
  while (!stopped_.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
    if (!stop_sent && server_->is_running()) {
      server_->stop();
      stop_sent = true;
    }
  }
  thread_.join();
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

}  // namespace rl
