#include "telemetry/client/http_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "testing/test_certificates.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// A connected client socket; reads give up after 15 s so a broken server
// fails the test instead of hanging it.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  timeval timeout{15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  return fd;
}

void SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0) << std::strerror(errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Everything the server sends until it closes the connection.
std::string ReadToEof(int fd) {
  std::string out;
  char buf[4096];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// One response: the head, then Content-Length bytes of body (none for
// HEAD); less if the server closes first. httplib keeps connections alive,
// so reading to EOF would wait for its keep-alive timeout.
std::string ReadResponse(int fd, bool head) {
  std::string out;
  char buf[4096];
  size_t want = std::string::npos;
  while (want == std::string::npos || out.size() < want) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    const size_t end = out.find("\r\n\r\n");
    if (want != std::string::npos || end == std::string::npos) continue;
    size_t length = 0;
    for (absl::string_view line :
         absl::StrSplit(absl::string_view(out).substr(0, end), "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
      }
    }
    want = end + 4 + (head ? 0 : length);
  }
  return out;
}

// Sends raw bytes as one request and returns the raw response.
std::string Exchange(int port, absl::string_view request) {
  const int fd = Connect(port);
  SendAll(fd, request);
  std::string response = ReadResponse(fd, absl::StartsWith(request, "HEAD "));
  close(fd);
  return response;
}

// Sends raw bytes and hangs up without reading.
void SendAndHangUp(int port, absl::string_view request) {
  const int fd = Connect(port);
  SendAll(fd, request);
  close(fd);
}

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

Response Parse(absl::string_view raw) {
  Response response;
  const size_t end = raw.find("\r\n\r\n");
  if (end == absl::string_view::npos) return response;
  const std::vector<absl::string_view> lines =
      absl::StrSplit(raw.substr(0, end), "\r\n");
  const std::vector<absl::string_view> status_line =
      absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || status_line[0] != "HTTP/1.1" ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return response;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    response.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  response.body = std::string(raw.substr(end + 4));
  return response;
}

Response Get(int port, absl::string_view target) {
  return Parse(Exchange(
      port,
      absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: localhost\r\n\r\n")));
}

class HttpEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.GetCounter("served_total", "Served.")->Increment(3);
    auto endpoint = HttpEndpoint::Start(
        "127.0.0.1", 0, &registry_, [this](httplib::Server* server) {
          // "path|k=v" for the query parameters, in key order.
          server->Get("/echo", [](const httplib::Request& request,
                                  httplib::Response& response) {
            std::string body = request.path;
            std::map<std::string, std::string> sorted(request.params.begin(),
                                                      request.params.end());
            for (const auto& [key, value] : sorted) {
              absl::StrAppend(&body, "|", key, "=", value);
            }
            response.set_content(body, "text/plain");
          });
          server->Get("/json", [](const httplib::Request&,
                                  httplib::Response& response) {
            response.status = 400;
            response.set_content("{\"error\":\"x\"}", "application/json");
          });
          server->Get("/throws",
                      [](const httplib::Request&, httplib::Response&) {
                        throw std::runtime_error("boom");
                      });
          server->Get(
              "/big", [](const httplib::Request&, httplib::Response& response) {
                response.set_content(std::string(8 << 20, 'x'), "text/plain");
              });
          server->Get("/count", [this](const httplib::Request& request,
                                       httplib::Response& response) {
            calls_.fetch_add(1);
            response.set_content(request.get_param_value("i"), "text/plain");
          });
        });
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = std::move(*endpoint);
    port_ = endpoint_->port();
    ASSERT_GT(port_, 0);
  }

  MetricsRegistry registry_{/*process_metrics=*/false};
  std::atomic<int> calls_{0};
  std::unique_ptr<HttpEndpoint> endpoint_;
  int port_ = 0;
};

TEST_F(HttpEndpointTest, ServesMetricsInTheTextFormat) {
  Response response = Get(port_, "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], kPrometheusContentType);
  EXPECT_EQ(response.body,
            "# HELP served_total Served.\n# TYPE served_total counter\n"
            "served_total 3\n");
  EXPECT_EQ(response.headers["content-length"],
            std::to_string(response.body.size()));
}

TEST_F(HttpEndpointTest, HeadSendsHeadersOnly) {
  const std::string raw =
      Exchange(port_, "HEAD /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  Response response = Parse(raw);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "");
  int length = 0;
  ASSERT_TRUE(absl::SimpleAtoi(response.headers["content-length"], &length));
  EXPECT_GT(length, 0);
}

TEST_F(HttpEndpointTest, DecodesPathAndQuery) {
  Response response = Get(port_, "/echo?x=1&name=hello%20world%21&empty=");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "/echo|empty=|name=hello world!|x=1");
}

TEST_F(HttpEndpointTest, ErrorBodiesOfRoutesAreKept) {
  Response response = Get(port_, "/json");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(response.headers["content-type"], "application/json");
  EXPECT_EQ(response.body, "{\"error\":\"x\"}");
}

TEST_F(HttpEndpointTest, UnknownPathIs404) {
  for (const char* path : {"/nope", "/metrics/", "/metricsx", "/echo/x"}) {
    Response response = Get(port_, path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_EQ(response.body, "not found\n") << path;
  }
}

TEST_F(HttpEndpointTest, OtherMethodsAre405WithoutReadingTheBody) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    // The declared body is never sent: the answer must not wait for it.
    Response response = Parse(
        Exchange(port_, absl::StrCat(method,
                                     " /metrics HTTP/1.1\r\nHost: localhost\r\n"
                                     "Content-Length: 1000000\r\n\r\n")));
    EXPECT_EQ(response.status, 405) << method;
    EXPECT_EQ(response.headers["allow"], "GET, HEAD") << method;
  }
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(HttpEndpointTest, MalformedRequestsAreAnsweredAndTheServerLives) {
  for (const char* raw :
       {"GARBAGE\r\n\r\n", "GET\r\n\r\n", "GET /echo\r\n\r\n",
        "GET /echo HTTP/9.9 extra\r\n\r\n", "\x01\x02\x03\r\n\r\n"}) {
    const Response response = Parse(Exchange(port_, raw));
    EXPECT_EQ(response.status, 400) << absl::CEscape(raw);
  }
  // A URI longer than httplib's 8 KiB limit.
  EXPECT_EQ(Get(port_, "/echo?x=" + std::string(10000, 'a')).status, 414);
  // Headers past httplib's limits end the connection without harm.
  SendAndHangUp(port_, absl::StrCat("GET /echo HTTP/1.1\r\nX: ",
                                    std::string(100000, 'h'), "\r\n\r\n"));
  // A half-sent request, then the client hangs up.
  SendAndHangUp(port_, "GET /echo HT");
  EXPECT_EQ(Get(port_, "/echo?ok=1").body, "/echo|ok=1");
}

TEST_F(HttpEndpointTest, HandlerExceptionIs500) {
  Response response = Get(port_, "/throws");
  EXPECT_EQ(response.status, 500);
  EXPECT_EQ(response.body, "internal error\n");
  EXPECT_EQ(Get(port_, "/echo").status, 200);
}

TEST_F(HttpEndpointTest, ClientThatLeavesEarlyDoesNotKillTheServer) {
  // Reset the connection while the server writes 8 MiB: its send fails with
  // EPIPE / ECONNRESET, which must not raise SIGPIPE (it would end this
  // test process).
  for (int i = 0; i < 3; ++i) {
    const int fd = Connect(port_);
    SendAll(fd, "GET /big HTTP/1.1\r\n\r\n");
    char buf[1024];
    ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);
    linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
  }
  Response big = Get(port_, "/big");
  EXPECT_EQ(big.status, 200);
  EXPECT_EQ(big.body.size(), 8u << 20);
}

TEST_F(HttpEndpointTest, IdleClientsBlockNeitherRequestsNorStop) {
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(Connect(port_));
  for (int i = 0; i < 20; ++i) {
    Response response = Get(port_, absl::StrCat("/count?i=", i));
    ASSERT_EQ(response.status, 200);
    EXPECT_EQ(response.body, std::to_string(i));
  }
  const absl::Time start = absl::Now();
  endpoint_->Stop();
  // Bounded by the 5 s read timeout, with room for a loaded machine.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int fd : idle) {
    EXPECT_EQ(ReadToEof(fd), "");  // Closed without a response.
    close(fd);
  }
  endpoint_->Stop();  // Idempotent.
  // The listener is closed.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

// A server on loopback answers only to loopback Host names (a page of
// another site cannot reach it through a DNS name rebound to 127.0.0.1),
// and every answer carries the security headers.
TEST_F(HttpEndpointTest, OnlyLoopbackHostsAndSecurityHeaders) {
  auto get = [&](const std::string& host) {
    return Parse(Exchange(port_, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: ",
                                              host, "\r\n\r\n")));
  };
  for (const std::string host : {"localhost", "localhost:8080", "127.0.0.1",
                                 "127.0.0.1:80", "[::1]:8080"}) {
    EXPECT_EQ(get(host).status, 200) << host;
  }
  for (const std::string host : {"evil.example", "evil.example:8080",
                                 "10.0.0.1", "localhost.evil.com"}) {
    const Response refused = get(host);
    EXPECT_EQ(refused.status, 421) << host;
    EXPECT_THAT(refused.body, HasSubstr("loopback Host")) << host;
    EXPECT_EQ(refused.headers.count("x-frame-options"), 1u) << host;
  }
  for (const std::string path : {"/metrics", "/nothing-here"}) {
    Response response = Get(port_, path);
    EXPECT_EQ(response.headers["x-content-type-options"], "nosniff") << path;
    EXPECT_EQ(response.headers["x-frame-options"], "DENY") << path;
    EXPECT_THAT(response.headers["content-security-policy"],
                HasSubstr("frame-ancestors 'none'"))
        << path;
  }
}

// Clients that never finish their headers (slowloris) each hold a
// connection; 100 of them must not keep /metrics from answering (with
// httplib's 8 threads they queued it behind ~60 s of read timeouts, past
// this client's 15 s).
TEST_F(HttpEndpointTest, SlowClientsDoNotDelayOthers) {
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    const int fd = Connect(port_);
    SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
    slow.push_back(fd);
  }
  const Response response = Get(port_, "/metrics");
  EXPECT_EQ(response.status, 200);
  for (int fd : slow) close(fd);
}

TEST_F(HttpEndpointTest, ConcurrentRequests) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 25;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const std::string id = absl::StrCat(t, "-", i);
        Response response = Get(port_, absl::StrCat("/count?i=", id));
        if (response.status == 200 && response.body == id) ok.fetch_add(1);
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(ok.load(), kThreads * kRequestsPerThread);
  EXPECT_EQ(calls_.load(), kThreads * kRequestsPerThread);
}

TEST(HttpEndpointStartTest, PortInUseIsUnavailableNamingTheAddress) {
  auto first = HttpEndpoint::Start("127.0.0.1", 0, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  // httplib's default SO_REUSEPORT would let this bind succeed.
  auto second = HttpEndpoint::Start("127.0.0.1", port, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_EQ(HttpEndpoint::Start("127.0.0.1", 70000, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HttpEndpointStartTest, NoRegistryNoMetrics) {
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(Get((*endpoint)->port(), "/metrics").status, 404);
}

TEST(HttpEndpointStartTest, StopRightAfterStartAndDestructor) {
  // Stop may come before httplib's accept loop has started.
  for (int i = 0; i < 20; ++i) {
    auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, nullptr);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    if (i % 2 == 0) (*endpoint)->Stop();
  }
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int idle = Connect((*endpoint)->port());
  endpoint->reset();
  EXPECT_EQ(ReadToEof(idle), "");
  close(idle);
}

// Off loopback: plaintext refused unless --insecure; HTTPS with tokens
// guards /metrics and /api/*, not the page.
TEST(HttpEndpointDoorsTest, OffLoopbackNeedsTlsAndTokens) {
  const std::string dir = MakeTestDir("http_doors");
  ASSERT_TRUE(MakeTestCertificates(dir).ok());
  const std::string user = "user-token-0123456789abcdef";
  const std::string worker = "worker-token-0123456789abcdef";
  std::ofstream(dir + "/tokens") << user << " user alice\n"
                                 << worker << " worker w1\n";
  const std::shared_ptr<const Security> before = Security::ProcessDefault();

  Security::SetProcessDefault(*Security::Load(SecurityOptions{}));
  auto refused = HttpEndpoint::Start("0.0.0.0", 0, nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("refusing to serve HTTP on 0.0.0.0:0"));
  SecurityOptions insecure;
  insecure.insecure = true;
  Security::SetProcessDefault(*Security::Load(insecure));
  EXPECT_TRUE(HttpEndpoint::Start("0.0.0.0", 0, nullptr).ok());

  SecurityOptions locked;
  locked.tls_cert_file = dir + "/server.pem";
  locked.tls_key_file = dir + "/server.key";
  locked.tokens_file = dir + "/tokens";
  Security::SetProcessDefault(*Security::Load(locked));
  MetricsRegistry registry;
  auto endpoint =
      HttpEndpoint::Start("0.0.0.0", 0, &registry, [](httplib::Server* server) {
        server->Get("/api/runs",
                    [](const httplib::Request&, httplib::Response& response) {
                      response.set_content("{}", "application/json");
                    });
        server->Get("/",
                    [](const httplib::Request&, httplib::Response& response) {
                      response.set_content("page", "text/html");
                    });
      });
  Security::SetProcessDefault(before);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  httplib::SSLClient client("127.0.0.1", (*endpoint)->port());
  client.set_ca_cert_path((dir + "/ca.pem").c_str());
  client.enable_server_certificate_verification(true);
  auto get = [&](const std::string& path, const std::string& token) {
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto result = client.Get(path.c_str(), headers);
    return result ? result->status : -1;
  };
  EXPECT_EQ(get("/", ""), 200);
  EXPECT_EQ(get("/metrics", ""), 401);
  EXPECT_EQ(get("/metrics", "not-a-token"), 401);
  EXPECT_EQ(get("/metrics", worker), 200);
  EXPECT_EQ(get("/api/runs", ""), 401);
  EXPECT_EQ(get("/api/runs", worker), 403);  // workers do not read the API
  EXPECT_EQ(get("/api/runs", user), 200);
  // Plaintext to the HTTPS port gets nothing.
  httplib::Client plain("127.0.0.1", (*endpoint)->port());
  auto result = plain.Get("/");
  EXPECT_TRUE(!result || result->status != 200);

  // On loopback with tokens (the embedded default): run data needs a token
  // too (the page carries it from its URL's #token=...); a local scrape of
  // /metrics does not.
  SecurityOptions local;
  local.tokens_file = dir + "/tokens";
  Security::SetProcessDefault(*Security::Load(local));
  auto loopback = HttpEndpoint::Start(
      "127.0.0.1", 0, &registry, [](httplib::Server* server) {
        server->Get("/api/runs",
                    [](const httplib::Request&, httplib::Response& response) {
                      response.set_content("{}", "application/json");
                    });
      });
  Security::SetProcessDefault(before);
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  httplib::Client local_client("127.0.0.1", (*loopback)->port());
  auto local_get = [&](const std::string& path, const std::string& token) {
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    auto response = local_client.Get(path.c_str(), headers);
    return response ? response->status : -1;
  };
  EXPECT_EQ(local_get("/metrics", ""), 200);
  EXPECT_EQ(local_get("/api/runs", ""), 401);
  EXPECT_EQ(local_get("/api/runs", user), 200);
}

}  // namespace
}  // namespace rl
