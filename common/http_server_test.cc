#include "common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
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
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

// Sends raw bytes as one request and returns the raw response.
std::string Exchange(int port, absl::string_view request) {
  const int fd = Connect(port);
  SendAll(fd, request);
  std::string response = ReadToEof(fd);
  close(fd);
  return response;
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
      port, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: test\r\n\r\n")));
}

// "path|k=v|k=v" for every query parameter, in key order.
HttpResponse Echo(const HttpRequest& request) {
  HttpResponse response;
  response.body = request.path;
  for (const auto& [key, value] : request.query) {
    absl::StrAppend(&response.body, "|", key, "=", value);
  }
  return response;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, HttpHandler> routes;
    routes["/echo"] = Echo;
    routes["/a b/ü"] = Echo;
    routes["/json"] = [](const HttpRequest&) {
      return HttpResponse{200, "application/json", "{\"ok\":true}"};
    };
    routes["/throws"] = [](const HttpRequest&) -> HttpResponse {
      throw std::runtime_error("boom");
    };
    routes["/bad_content_type"] = [](const HttpRequest&) {
      return HttpResponse{200, "text/plain\r\nX-Injected: 1", "x"};
    };
    routes["/big"] = [](const HttpRequest&) {
      return HttpResponse{200, "text/plain", std::string(8 << 20, 'x')};
    };
    routes["/count"] = [this](const HttpRequest& request) {
      calls_.fetch_add(1);
      return HttpResponse{200, "text/plain", request.query.at("i")};
    };
    auto server = HttpServer::Start("127.0.0.1", 0, std::move(routes));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  std::atomic<int> calls_{0};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, GetDecodesPathAndQuery) {
  Response response = Get(
      port_,
      "/a%20b/%C3%BC?x=1&name=hello+world%21&empty=&flag&&x=2&k%3D=v%26w#frag");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "/a b/ü|empty=|flag=|k==v&w|name=hello world!|x=2");
  EXPECT_EQ(response.headers["content-type"], "text/plain; charset=utf-8");
  EXPECT_EQ(response.headers["content-length"],
            std::to_string(response.body.size()));
  EXPECT_EQ(response.headers["connection"], "close");
}

TEST_F(HttpServerTest, ContentTypeFromHandler) {
  Response response = Get(port_, "/json");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers["content-type"], "application/json");
  EXPECT_EQ(response.body, "{\"ok\":true}");
}

TEST_F(HttpServerTest, AcceptsAbsoluteFormAndHttp10AndBareNewlines) {
  EXPECT_EQ(Get(port_, "http://example.com:9/echo?a=b").body, "/echo|a=b");
  EXPECT_EQ(Get(port_, "http://example.com").status, 404);  // path "/"
  Response http10 = Parse(Exchange(port_, "GET /echo HTTP/1.0\n\n"));
  EXPECT_EQ(http10.status, 200);
  EXPECT_EQ(http10.body, "/echo");
  // Empty lines before the request line are ignored (RFC 9112 2.2).
  EXPECT_EQ(Parse(Exchange(port_, "\r\nGET /echo HTTP/1.1\r\n\r\n")).status,
            200);
}

TEST_F(HttpServerTest, UnknownPathIs404) {
  Response response = Get(port_, "/nope");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(response.headers["content-length"],
            std::to_string(response.body.size()));
  // Exact match only.
  EXPECT_EQ(Get(port_, "/echo/").status, 404);
  EXPECT_EQ(Get(port_, "/ECHO").status, 404);
}

TEST_F(HttpServerTest, OtherMethodsAre405) {
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "PATCH"}) {
    Response response = Parse(Exchange(
        port_, absl::StrCat(method,
                            " /echo HTTP/1.1\r\nHost: t\r\nContent-Length: "
                            "5\r\n\r\nhello")));
    EXPECT_EQ(response.status, 405) << method;
    EXPECT_EQ(response.headers["allow"], "GET, HEAD") << method;
  }
  EXPECT_EQ(Get(port_, "/echo").status, 200);
}

TEST_F(HttpServerTest, MalformedRequestsAre400) {
  const std::vector<std::string> bad = {
      "garbage\r\n\r\n",
      "GET /echo\r\n\r\n",
      "GET  /echo HTTP/1.1\r\n\r\n",
      "GET /echo HTTP/1.1 extra\r\n\r\n",
      "GET /echo FTP/1.1\r\n\r\n",
      "GET echo HTTP/1.1\r\n\r\n",
      "GET * HTTP/1.1\r\n\r\n",
      "G(T /echo HTTP/1.1\r\n\r\n",
      "GET /echo HTTP/1.1\r\nno colon here\r\n\r\n",
      "GET /echo HTTP/1.1\r\nBad Name: x\r\n\r\n",
      "GET /echo HTTP/1.1\r\n: empty name\r\n\r\n",
      "GET /echo HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
      "GET /%zz HTTP/1.1\r\n\r\n",
      "GET /echo%2 HTTP/1.1\r\n\r\n",
      "GET /echo%00 HTTP/1.1\r\n\r\n",
      "GET /echo?a=%G1 HTTP/1.1\r\n\r\n",
      [] {
        const char kWithNul[] = "GET /echo HTTP/1.1\r\nX: a\0b\r\n\r\n";
        return std::string(kWithNul, sizeof(kWithNul) - 1);
      }(),
      "\x16\x03\x01\x02\xfc\x03\x03\r\n\r\n",  // TLS-ish
  };
  for (const std::string& request : bad) {
    EXPECT_EQ(Parse(Exchange(port_, request)).status, 400)
        << absl::CEscape(request);
  }
  EXPECT_EQ(Parse(Exchange(port_, "GET /echo HTTP/2.0\r\n\r\n")).status, 505);
  // The server is still fine.
  EXPECT_EQ(Get(port_, "/echo").status, 200);
}

TEST_F(HttpServerTest, HalfSentRequestThenHalfCloseIs400) {
  const int fd = Connect(port_);
  SendAll(fd, "GET /echo HT");
  shutdown(fd, SHUT_WR);
  EXPECT_EQ(Parse(ReadToEof(fd)).status, 400);
  close(fd);
}

TEST_F(HttpServerTest, ConnectAndCloseGetsNoResponse) {
  const int fd = Connect(port_);
  shutdown(fd, SHUT_WR);
  EXPECT_EQ(ReadToEof(fd), "");
  close(fd);
}

TEST_F(HttpServerTest, HeadSendsHeadersOnly) {
  Response get = Get(port_, "/json");
  const std::string raw =
      Exchange(port_, "HEAD /json HTTP/1.1\r\nHost: t\r\n\r\n");
  Response head = Parse(raw);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_TRUE(absl::EndsWith(raw, "\r\n\r\n"));
  EXPECT_EQ(head.headers["content-length"], std::to_string(get.body.size()));
  EXPECT_EQ(head.headers["content-type"], "application/json");
  Response missing = Parse(Exchange(port_, "HEAD /nope HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "");
}

TEST_F(HttpServerTest, OversizedHeadIs431) {
  const std::string request = absl::StrCat(
      "GET /echo HTTP/1.1\r\nX-Big: ", std::string(20 << 10, 'a'), "\r\n\r\n");
  EXPECT_EQ(Parse(Exchange(port_, request)).status, 431);
  // Just under the limit is fine.
  const std::string fits = absl::StrCat(
      "GET /echo HTTP/1.1\r\nX-Big: ", std::string((16 << 10) - 40, 'a'),
      "\r\n\r\n");
  ASSERT_LE(fits.size(), 16u << 10);
  EXPECT_EQ(Parse(Exchange(port_, fits)).status, 200);
  EXPECT_EQ(Get(port_, "/echo").status, 200);
}

TEST_F(HttpServerTest, HandlerExceptionIs500) {
  EXPECT_EQ(Get(port_, "/throws").status, 500);
  Response injected = Get(port_, "/bad_content_type");
  EXPECT_EQ(injected.status, 500);
  EXPECT_EQ(injected.headers.count("x-injected"), 0u);
  EXPECT_EQ(Get(port_, "/echo").status, 200);
}

TEST_F(HttpServerTest, RequestSplitAcrossWrites) {
  const int fd = Connect(port_);
  for (const char* part :
       {"GET /ec", "ho?a=1 HTTP/1.1\r", "\nHost: t\r\n\r", "\n"}) {
    SendAll(fd, part);
    // Let each part arrive as its own segment where the kernel allows.
    std::this_thread::yield();
  }
  EXPECT_EQ(Parse(ReadToEof(fd)).body, "/echo|a=1");
  close(fd);
}

TEST_F(HttpServerTest, ClientThatLeavesEarlyDoesNotKillTheServer) {
  // Reset the connection while the server writes 8 MiB: its send fails with
  // EPIPE / ECONNRESET, which must not raise SIGPIPE.
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

TEST_F(HttpServerTest, IdleClientsBlockNeitherRequestsNorStop) {
  // Three of the four workers hold a silent client each.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(Connect(port_));
  for (int i = 0; i < 20; ++i) {
    Response response = Get(port_, absl::StrCat("/count?i=", i));
    ASSERT_EQ(response.status, 200);
    EXPECT_EQ(response.body, std::to_string(i));
  }
  const absl::Time start = absl::Now();
  server_->Stop();
  // Well inside the 5 s read timeout: Stop did not wait for the clients.
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  for (int fd : idle) {
    EXPECT_EQ(ReadToEof(fd), "");  // Closed without a response.
    close(fd);
  }
  server_->Stop();  // Idempotent.
  // The listener is closed.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
}

TEST_F(HttpServerTest, StalledClientTimesOutWith408) {
  const int fd = Connect(port_);
  SendAll(fd, "GET /echo HTTP/1.1\r\nHost:");
  // The server gives up after its 5 s read timeout; ReadToEof would give up
  // after 15 s.
  EXPECT_EQ(Parse(ReadToEof(fd)).status, 408);
  close(fd);
}

TEST_F(HttpServerTest, ConcurrentRequests) {
  constexpr int kThreads = 16;
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

TEST(HttpServerStartTest, PortInUseIsUnavailableNamingTheAddress) {
  auto first = HttpServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = HttpServer::Start("127.0.0.1", port, {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("127.0.0.1:", port)));
}

TEST(HttpServerStartTest, BadHostOrPort) {
  auto bad_host = HttpServer::Start("no.such.host.invalid", 0, {});
  ASSERT_FALSE(bad_host.ok());
  EXPECT_EQ(bad_host.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(bad_host.status().message(), HasSubstr("no.such.host.invalid"));
  EXPECT_EQ(HttpServer::Start("127.0.0.1", 70000, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerStartTest, DestructorStopsServer) {
  auto server = HttpServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(server.ok()) << server.status();
  const int idle = Connect((*server)->port());
  server->reset();
  EXPECT_EQ(ReadToEof(idle), "");
  close(idle);
}

}  // namespace
}  // namespace rl
