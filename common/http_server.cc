#include "common/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/logging.h"

namespace rl {
namespace {

constexpr size_t kMaxHeaderBytes = 16 << 10;
constexpr absl::Duration kReadTimeout = absl::Seconds(5);
constexpr absl::Duration kWriteTimeout = absl::Seconds(5);
// After the response, how long to read and discard what the client still
// sends: closing with unread input makes the kernel send RST, which can
// destroy the response before the client has read it.
constexpr absl::Duration kLinger = absl::Seconds(1);
constexpr int kWorkerThreads = 4;
constexpr size_t kMaxPendingConnections = 64;
constexpr int kListenBacklog = 128;

std::string Errno(int err) { return std::strerror(err); }

int RemainingMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  // Round up, so a wait never ends just short of the deadline and spins.
  return static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
}

enum class WaitResult { kReady, kTimeout, kStopped, kError };

// Waits until `fd` has `events`, the deadline passes or `wake_fd` fires.
WaitResult WaitFor(int fd, short events, int wake_fd, absl::Time deadline) {
  while (true) {
    const int timeout_ms = RemainingMs(deadline);
    if (timeout_ms == 0) return WaitResult::kTimeout;
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = poll(fds, 2, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return WaitResult::kError;
    }
    if (fds[1].revents != 0) return WaitResult::kStopped;
    if (fds[0].revents != 0) return WaitResult::kReady;
  }
}

// Sends all of `data` on the non-blocking socket `fd`. False if the client
// went away, was too slow or the server is stopping.
bool SendAll(int fd, absl::string_view data, int wake_fd, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (WaitFor(fd, POLLOUT, wake_fd, deadline) != WaitResult::kReady) {
        return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

HttpResponse ErrorResponse(int status) {
  HttpResponse response;
  response.status = status;
  response.body = absl::StrCat(status, " ", ReasonPhrase(status), "\n");
  return response;
}

// The bytes on the wire for `response`; the body is left out for HEAD.
// `extra_headers` are complete "Name: value\r\n" lines.
std::string SerializeResponse(const HttpResponse& response, bool head,
                              absl::string_view extra_headers = "") {
  // 204 and 304 carry no body, and RFC 9110 forbids Content-Length on 204.
  const bool bodiless = response.status == 204 || response.status == 304;
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                 ReasonPhrase(response.status), "\r\n");
  if (!bodiless) {
    absl::StrAppend(&out, "Content-Type: ", response.content_type, "\r\n",
                    "Content-Length: ", response.body.size(), "\r\n");
  }
  absl::StrAppend(&out, extra_headers, "Connection: close\r\n\r\n");
  if (!head && !bodiless) out += response.body;
  return out;
}

bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (and '+' as a space when `plus_is_space`). False on a
// malformed escape.
bool PercentDecode(absl::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]);
      const int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// The parsed request, or the status of the error response to send.
struct ParsedRequest {
  int error_status = 0;
  HttpRequest request;
};

ParsedRequest ParseError(int status) {
  ParsedRequest parsed;
  parsed.error_status = status;
  return parsed;
}

// Parses the request line and headers (`head`, without the blank line).
ParsedRequest ParseRequestHead(absl::string_view head) {
  if (head.find('\0') != absl::string_view::npos) return ParseError(400);
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  for (absl::string_view& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  // RFC 9112 2.2: ignore empty lines before the request line.
  size_t first = 0;
  while (first < lines.size() && lines[first].empty()) ++first;
  if (first == lines.size()) return ParseError(400);

  const std::vector<absl::string_view> parts =
      absl::StrSplit(lines[first], ' ');
  if (parts.size() != 3) return ParseError(400);
  const absl::string_view method = parts[0];
  absl::string_view target = parts[1];
  const absl::string_view version = parts[2];
  if (!IsToken(method) || target.empty()) return ParseError(400);
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return ParseError(400);
    }
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    const bool well_formed =
        version.size() == 8 && absl::StartsWith(version, "HTTP/") &&
        absl::ascii_isdigit(version[5]) && version[6] == '.' &&
        absl::ascii_isdigit(version[7]);
    return ParseError(well_formed ? 505 : 400);
  }
  for (size_t i = first + 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.empty()) break;  // The blank line that ends the head.
    // Obsolete line folding (a line starting with whitespace) is rejected,
    // as RFC 9112 5.2 allows.
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return ParseError(400);
    if (!IsToken(line.substr(0, colon))) return ParseError(400);
  }

  if (method != "GET" && method != "HEAD") return ParseError(405);

  // Absolute form ("http://host/path?q") is accepted, as RFC 9112 3.2.2
  // asks of servers; the authority is ignored.
  if (target.front() != '/') {
    const size_t scheme_end = target.find("://");
    if (scheme_end == absl::string_view::npos ||
        !(absl::EqualsIgnoreCase(target.substr(0, scheme_end), "http") ||
          absl::EqualsIgnoreCase(target.substr(0, scheme_end), "https"))) {
      return ParseError(400);
    }
    const size_t path_start = target.find_first_of("/?#", scheme_end + 3);
    target = path_start == absl::string_view::npos ? absl::string_view("/")
                                                   : target.substr(path_start);
  }
  const size_t fragment = target.find('#');
  if (fragment != absl::string_view::npos) target = target.substr(0, fragment);
  absl::string_view raw_path = target;
  absl::string_view raw_query;
  const size_t question = target.find('?');
  if (question != absl::string_view::npos) {
    raw_path = target.substr(0, question);
    raw_query = target.substr(question + 1);
  }
  if (raw_path.empty()) raw_path = "/";

  ParsedRequest parsed;
  parsed.request.method = std::string(method);
  if (!PercentDecode(raw_path, /*plus_is_space=*/false, &parsed.request.path) ||
      parsed.request.path.find('\0') != std::string::npos) {
    return ParseError(400);
  }
  for (absl::string_view pair : absl::StrSplit(raw_query, '&')) {
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!PercentDecode(pair.substr(0, eq), /*plus_is_space=*/true, &key)) {
      return ParseError(400);
    }
    if (eq != absl::string_view::npos &&
        !PercentDecode(pair.substr(eq + 1), /*plus_is_space=*/true, &value)) {
      return ParseError(400);
    }
    parsed.request.query[std::move(key)] = std::move(value);
  }
  return parsed;
}

// Where the request head ends (just past the blank line), or npos. The
// search starts at `from`; empty lines before the request line, which RFC
// 9112 2.2 says to ignore, do not count as the end.
size_t FindHeadEnd(absl::string_view data, size_t from) {
  const size_t start = data.find_first_not_of("\r\n");
  if (start == absl::string_view::npos) return absl::string_view::npos;
  size_t pos = std::max(from, start);
  while (true) {
    const size_t nl = data.find('\n', pos);
    if (nl == absl::string_view::npos) return absl::string_view::npos;
    if (nl + 1 < data.size() && data[nl + 1] == '\n') return nl + 2;
    if (nl + 2 < data.size() && data[nl + 1] == '\r' && data[nl + 2] == '\n') {
      return nl + 3;
    }
    pos = nl + 1;
  }
}

void NameThisThread(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

std::string FormatAddress(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(int listen_fd, int wake_fd, int port,
       std::map<std::string, HttpHandler> routes)
      : listen_fd_(listen_fd),
        wake_fd_(wake_fd),
        port_(port),
        routes_(std::move(routes)) {}

  ~Impl() { Stop(); }

  void StartThreads() {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    for (int i = 0; i < kWorkerThreads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  int port() const { return port_; }

  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_, mu_) {
    absl::MutexLock stop_lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    // The eventfd is never read, so from now on every poll that includes
    // it returns at once: the accept loop and any connection wait end.
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (accept_thread_.joinable()) accept_thread_.join();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    for (int fd : pending_) close(fd);
    pending_.clear();
    close(listen_fd_);
    close(wake_fd_);
  }

 private:
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !pending_.empty();
  }

  void AcceptLoop() {
    NameThisThread("http-accept");
    while (true) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        RL_LOG_ERROR("http server: poll: {}", Errno(errno));
        return;
      }
      if (fds[1].revents != 0) return;
      const int fd =
          accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (err == EINTR || err == EAGAIN || err == EWOULDBLOCK ||
            err == ECONNABORTED) {
          continue;
        }
        // Out of descriptors and the like: the listener stays readable, so
        // back off instead of spinning.
        RL_LOG_WARNING("http server: accept: {}", Errno(err));
        pollfd wake = {wake_fd_, POLLIN, 0};
        if (poll(&wake, 1, 100) > 0) return;
        continue;
      }
      bool queued = false;
      {
        absl::MutexLock lock(&mu_);
        if (pending_.size() < kMaxPendingConnections) {
          pending_.push_back(fd);
          queued = true;
        }
      }
      if (!queued) {
        // Best effort, never blocking the accept loop.
        const std::string busy = SerializeResponse(ErrorResponse(503), false);
        (void)send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
      }
    }
  }

  void WorkerLoop() {
    NameThisThread("http-worker");
    while (true) {
      int fd;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Impl::HasWorkOrStopping));
        if (stopping_) return;
        fd = pending_.front();
        pending_.pop_front();
      }
      Serve(fd);
      close(fd);
    }
  }

  // Reads one request from `fd`, answers it and shuts the connection down.
  void Serve(int fd) {
    const absl::Time read_deadline = absl::Now() + kReadTimeout;
    std::string data;
    size_t head_end = std::string::npos;
    char chunk[4096];
    while (head_end == std::string::npos) {
      if (data.size() >= kMaxHeaderBytes) {
        Respond(fd, ErrorResponse(431), false);
        return;
      }
      const size_t want =
          std::min(sizeof(chunk), kMaxHeaderBytes - data.size());
      const ssize_t n = recv(fd, chunk, want, 0);
      if (n > 0) {
        const size_t old_size = data.size();
        data.append(chunk, static_cast<size_t>(n));
        // Resume the search a little before the new bytes: the blank line
        // may straddle two reads.
        const size_t from = old_size > 3 ? old_size - 3 : 0;
        head_end = FindHeadEnd(data, from);
        continue;
      }
      if (n == 0) {
        // The client closed (or half-closed) before a whole request head.
        // Nothing sent means nothing to answer (a port probe).
        if (!data.empty()) Respond(fd, ErrorResponse(400), false);
        return;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return;
      switch (WaitFor(fd, POLLIN, wake_fd_, read_deadline)) {
        case WaitResult::kReady:
          continue;
        case WaitResult::kTimeout:
          Respond(fd, ErrorResponse(408), false);
          return;
        case WaitResult::kStopped:
        case WaitResult::kError:
          return;
      }
    }

    const ParsedRequest parsed =
        ParseRequestHead(absl::string_view(data).substr(0, head_end));
    if (parsed.error_status != 0) {
      Respond(fd, ErrorResponse(parsed.error_status), false,
              parsed.error_status == 405 ? "Allow: GET, HEAD\r\n" : "");
      return;
    }
    const HttpRequest& request = parsed.request;
    const bool head = request.method == "HEAD";
    const auto route = routes_.find(request.path);
    if (route == routes_.end()) {
      Respond(fd, ErrorResponse(404), head);
      return;
    }
    HttpResponse response;
    try {
      response = route->second(request);
    } catch (const std::exception& e) {
      RL_LOG_ERROR("http server: handler for {} threw: {}", request.path,
                   e.what());
      response = ErrorResponse(500);
    } catch (...) {
      RL_LOG_ERROR("http server: handler for {} threw", request.path);
      response = ErrorResponse(500);
    }
    if (response.status < 200 || response.status > 599 ||
        response.content_type.find_first_of("\r\n") != std::string::npos) {
      RL_LOG_ERROR("http server: handler for {} returned an invalid response",
                   request.path);
      response = ErrorResponse(500);
    }
    Respond(fd, response, head);
  }

  void Respond(int fd, const HttpResponse& response, bool head,
               absl::string_view extra_headers = "") {
    const std::string bytes = SerializeResponse(response, head, extra_headers);
    if (!SendAll(fd, bytes, wake_fd_, absl::Now() + kWriteTimeout)) return;
    // Tell the client we are done, then discard what it still sends until
    // it closes, so the close below does not turn into a RST.
    shutdown(fd, SHUT_WR);
    const absl::Time linger_deadline = absl::Now() + kLinger;
    char sink[4096];
    while (true) {
      const ssize_t n = recv(fd, sink, sizeof(sink), 0);
      if (n == 0) return;
      if (n > 0) continue;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return;
      if (WaitFor(fd, POLLIN, wake_fd_, linger_deadline) !=
          WaitResult::kReady) {
        return;
      }
    }
  }

  const int listen_fd_;
  const int wake_fd_;
  const int port_;
  const std::map<std::string, HttpHandler> routes_;

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;

  absl::Mutex mu_;
  // Accepted connections waiting for a worker.
  std::deque<int> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread accept_thread_;
  std::vector<std::thread> workers_;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& host, int port,
    std::map<std::string, HttpHandler> routes) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http server: port out of range: ", port));
  }
  std::string bind_host = host;
  if (bind_host.size() >= 2 && bind_host.front() == '[' &&
      bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);
  }
  const std::string address = FormatAddress(bind_host, port);

  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  // "" means every IPv4 address, like "0.0.0.0".
  hints.ai_family = bind_host.empty() ? AF_INET : AF_UNSPEC;
  addrinfo* addresses = nullptr;
  const std::string service = std::to_string(port);
  const int gai = getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(),
                              service.c_str(), &hints, &addresses);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat(
        "http server: cannot resolve ", address, ": ", gai_strerror(gai)));
  }
  int listen_fd = -1;
  std::string last_error = "no address";
  for (addrinfo* ai = addresses; ai != nullptr; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               ai->ai_protocol);
    if (fd < 0) {
      last_error = Errno(errno);
      continue;
    }
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, kListenBacklog) != 0) {
      last_error = Errno(errno);
      close(fd);
      continue;
    }
    listen_fd = fd;
    break;
  }
  freeaddrinfo(addresses);
  if (listen_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("http server: cannot bind ", address, ": ", last_error));
  }

  sockaddr_storage bound;
  socklen_t bound_len = sizeof(bound);
  if (getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) !=
      0) {
    const std::string error = Errno(errno);
    close(listen_fd);
    return absl::UnavailableError(
        absl::StrCat("http server: getsockname for ", address, ": ", error));
  }
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const std::string error = Errno(errno);
    close(listen_fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("http server: eventfd: ", error));
  }
  auto impl =
      std::make_unique<Impl>(listen_fd, wake_fd, bound_port, std::move(routes));
  impl->StartThreads();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port(); }

void HttpServer::Stop() { impl_->Stop(); }

}  // namespace rl
