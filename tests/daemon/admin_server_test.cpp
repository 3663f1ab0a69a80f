// The admin endpoint as a client sees it, over a real socket: /metrics and /healthz answer from
// memory while /v1/route waits (on Redis, in production), and requests too large for it are
// answered, not dropped.
#include "daemon/admin_server.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/wait.hpp"

namespace assay {
namespace {

/// Sends `request` to 127.0.0.1:`port` and returns what the server wrote until it closed the
/// connection (or 30 s passed: test::kSoon).
std::string roundTrip(unsigned short port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading it all
    sent += static_cast<std::size_t>(n);
  }
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, n);
  ::close(fd);
  return reply;
}

std::string get(unsigned short port, const std::string& target) {
  return roundTrip(port, "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

std::string statusLine(const std::string& reply) { return reply.substr(0, reply.find("\r\n")); }

/// A route handler that waits until released, as one waiting on a hung Redis does. Declared
/// after the server, so that a failed REQUIRE releases it before the server's destructor
/// waits for the route thread.
struct Gate {
  std::promise<void> promise;
  std::shared_future<void> opened = promise.get_future().share();
  bool is_open = false;
  void open() {
    if (!is_open) promise.set_value();
    is_open = true;
  }
  ~Gate() { open(); }
};

}  // namespace

TEST_CASE("a /v1/route that waits (a hung Redis) never holds /metrics or /healthz") {
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<int> routing{0};
  AdminServer::Handlers h;
  h.metrics = [] { return std::string("assay_up 1\n"); };
  h.not_ready = [] { return std::string(); };
  h.route = [&](std::string_view query) {
    ++routing;
    gate->opened.wait();
    return std::pair<int, std::string>{200, "{\"query\":\"" + std::string(query) + "\"}"};
  };
  AdminServer server("127.0.0.1:0", h);
  const auto port = server.port();
  const auto release = [gate] { gate->open(); };
  struct OpenAtExit {
    std::shared_ptr<Gate> g;
    ~OpenAtExit() { g->open(); }
  } open_at_exit{gate};

  auto waiting = std::async(std::launch::async, [&] { return get(port, "/v1/route?unit=a"); });
  REQUIRE(test::waitUntil("the route handler entered", [&] { return routing.load() == 1; }));
  // While it waits: the other endpoints answer (they waited with it on one thread).
  CHECK(statusLine(get(port, "/healthz")) == "HTTP/1.1 200 OK");
  const auto metrics = get(port, "/metrics");
  CHECK(statusLine(metrics) == "HTTP/1.1 200 OK");
  CHECK(metrics.find("assay_up 1") != std::string::npos);
  CHECK(statusLine(get(port, "/readyz")) == "HTTP/1.1 200 OK");
  release();
  const auto routed = waiting.get();
  CHECK(statusLine(routed) == "HTTP/1.1 200 OK");
  CHECK(routed.find("{\"query\":\"unit=a\"}") != std::string::npos);
  CHECK(routed.find("Content-Type: application/json") != std::string::npos);
}

TEST_CASE("too many routes waiting: 503 at once; a request too large: 431 or 413, not a hang-up") {
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<int> routing{0};
  AdminServer::Handlers h;
  h.metrics = [] { return std::string(); };
  h.not_ready = [] { return std::string(); };
  h.route = [&](std::string_view) {
    ++routing;
    gate->opened.wait();
    return std::pair<int, std::string>{200, "{}"};
  };
  AdminServer server("127.0.0.1:0", h);
  const auto port = server.port();
  const auto release = [gate] { gate->open(); };
  struct OpenAtExit {
    std::shared_ptr<Gate> g;
    ~OpenAtExit() { g->open(); }
  } open_at_exit{gate};

  // 300 at once: 256 wait (one in the handler, 255 queued behind it), the other 44 are refused
  // at once, whatever the order they arrive in.
  std::vector<std::future<std::string>> replies;
  for (int i = 0; i < 300; ++i)
    replies.push_back(std::async(std::launch::async, [&] { return get(port, "/v1/route"); }));
  const auto answered = [&] {
    int n = 0;
    for (auto& f : replies) n += f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    return n;
  };
  const bool refused44 = test::waitUntil("44 routes refused", [&] { return answered() == 44; });
  CAPTURE(answered());
  REQUIRE(refused44);
  CHECK(routing.load() == 1);
  release();
  int ok = 0, busy = 0;
  for (auto& f : replies) {
    const auto reply = f.get();
    ok += statusLine(reply) == "HTTP/1.1 200 OK";
    busy += statusLine(reply) == "HTTP/1.1 503 Service Unavailable" &&
            reply.find("too many /v1/route requests waiting") != std::string::npos;
  }
  CHECK(ok == 256);
  CHECK(busy == 44);
  CHECK(routing.load() == 256);

  // A 100 KB query: 431 (the connection was closed with no answer).
  const auto long_query = get(port, "/v1/route?unit=" + std::string(100'000, 'u'));
  CHECK(statusLine(long_query) == "HTTP/1.1 431 Request Header Fields Too Large");
  // A body announced at 1 MB: 413 as soon as the header says so (nothing of it is read; the
  // body is not sent, so that no unread byte makes the close a reset).
  const auto too_long =
      roundTrip(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
  CHECK(statusLine(too_long) == "HTTP/1.1 413 Payload Too Large");
  // A chunk extension of 1 MiB (the parser kept it whole: 300 MiB reached RSS): 413.
  const auto extension =
      roundTrip(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
                          std::string(1u << 20, 'e'));
  CHECK(statusLine(extension) == "HTTP/1.1 413 Payload Too Large");
  CHECK(statusLine(get(port, "/healthz")) == "HTTP/1.1 200 OK");  // still serving
}

TEST_CASE("a malformed request is answered 400; 1,024 idle connections never lock /metrics out") {
  AdminServer::Handlers h;
  h.metrics = [] { return std::string("m 1\n"); };
  h.not_ready = [] { return std::string(); };
  AdminServer server("127.0.0.1:0", h);
  const auto port = server.port();
  // The parser's refusals: a bad request line, a bad header, a bad chunk size. Each used to be
  // a silent hang-up.
  for (const std::string bad :
       {"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    CAPTURE(bad);
    const auto reply = roundTrip(port, bad);
    CHECK(statusLine(reply) == "HTTP/1.1 400 Bad Request");
    CHECK(reply.find("malformed HTTP request") != std::string::npos);
  }
  // 1,024 connections at most: the next one closes the least recently active of those waiting
  // for a request (the hostile trial's 1,030 idle connections locked /metrics and /healthz out
  // for as long as they stayed open). Client and server ends are in this process: 2,100
  // descriptors at least.
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 4096));
  ::setrlimit(RLIMIT_NOFILE, &files);
  REQUIRE_MESSAGE(files.rlim_cur >= 2100, "RLIMIT_NOFILE's hard limit is under 2,100");
  std::vector<int> idle;
  const auto connect = [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
  };
  for (int i = 0; i < 1100; ++i) idle.push_back(connect());
  for (int i = 0; i < 20; ++i) {
    CAPTURE(i);
    CHECK(statusLine(get(port, "/metrics")) == "HTTP/1.1 200 OK");
  }
  // The oldest idle connection was closed by the server to make room: it reads EOF.
  timeval tv{10, 0};
  ::setsockopt(idle.front(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte = 0;
  CHECK(::recv(idle.front(), &byte, 1, 0) == 0);
  for (const int fd : idle) ::close(fd);
}

}  // namespace assay
