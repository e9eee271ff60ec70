// A small HTTP/1.1 server on POSIX sockets, for /metrics, a status page and a
// JSON API; no gRPC, no TLS, no request bodies.
//
// Data flow: accept thread -> bounded queue of accepted sockets -> a fixed
// pool of worker threads, each reading one request, calling the route's
// handler and writing one response (`Connection: close`, so no keep-alive).
//
// Limits, so a bad or slow client costs little: the request line and headers
// must fit in 16 KiB (else 431) and arrive within 5 s (else 408); a response
// must be taken by the client within 5 s. When the queue of waiting
// connections is full, new ones get 503 at once. Only GET and HEAD are
// served (else 405); paths are matched exactly after percent-decoding (else
// 404); a request that does not parse gets 400; a handler that throws gets
// 500. Writes use MSG_NOSIGNAL, so a client that goes away never raises
// SIGPIPE.
#ifndef RL_COMMON_HTTP_SERVER_H_
#define RL_COMMON_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rl {

struct HttpRequest {
  std::string method;  // "GET", "HEAD"
  // Without the query string, percent-decoded ("/a%20b" -> "/a b").
  std::string path;
  // Decoded query parameters ('+' is a space); for a repeated key the last
  // value wins; a key without '=' maps to "".
  std::map<std::string, std::string> query;
};

struct HttpResponse {
  int status = 200;
  // Must not contain CR or LF (such a response is replaced by a 500).
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called on a worker thread; may run concurrently with itself.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  // Binds host:port (port 0 = ephemeral; host "" or "0.0.0.0" = every IPv4
  // address, "::" = every address) and serves in background threads.
  // `routes`: exact path -> handler. UNAVAILABLE naming the address if it
  // cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& host, int port,
      std::map<std::string, HttpHandler> routes);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the ephemeral one when started with port 0).
  int port() const;

  // Idempotent; closes the listener and waits for threads. Idle and
  // half-sent connections are dropped at once; a handler already running is
  // waited for. Must not be called from a handler.
  void Stop();

  ~HttpServer();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace rl

#endif  // RL_COMMON_HTTP_SERVER_H_
