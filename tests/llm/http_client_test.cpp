#include "judges/llm/http_client.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_server.hpp"
#include "tests/wait.hpp"

using namespace assay::llm;
using assay::test::FakeLlmServer;
using assay::test::TestCa;
using namespace std::chrono_literals;

namespace {
HttpRequest chat(
    const std::string& url,
    std::string body = R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]})") {
  HttpRequest r;
  r.url = url;
  r.body = std::move(body);
  r.timeout = 5s;
  return r;
}
}  // namespace

TEST_CASE("HTTPS with a private CA: verified, kept alive, reused") {
  TestCa ca;
  FakeLlmServer server(&ca);
  HttpClient client(HttpClientOptions{ca.caFile(), true, 4, {}});
  const auto a = client.send(chat(server.url("/v1/chat/completions")));
  INFO(a.error);
  REQUIRE(a.status == 200);
  CHECK(a.body.find("\"finish_reason\":\"stop\"") != std::string::npos);
  CHECK(a.headers.at("content-type") == "application/json");
  CHECK_FALSE(a.reused_connection);
  const auto b = client.send(chat(server.url("/v1/chat/completions")));
  CHECK(b.status == 200);
  CHECK(b.reused_connection);  // keep-alive pool
}

TEST_CASE("certificate and host-name verification are on by default") {
  TestCa ca;
  FakeLlmServer server(&ca);
  {
    HttpClient system_store;  // the test CA is not trusted by the system
    const auto r = system_store.send(chat(server.url("/v1/chat/completions")));
    CHECK(r.status == 0);
    CHECK_FALSE(r.error.empty());
    MESSAGE("untrusted CA: " << r.error);
  }
  {
    // The certificate names "localhost"; connecting by IP must fail host-name verification.
    HttpClient client(HttpClientOptions{ca.caFile(), true, 4, {}});
    const auto r = client.send(
        chat("https://127.0.0.1:" + std::to_string(server.port()) + "/v1/chat/completions"));
    CHECK(r.status == 0);
    CHECK_FALSE(r.error.empty());
    MESSAGE("wrong host name: " << r.error);
  }
}

TEST_CASE("plain HTTP, error statuses and Retry-After reach the caller") {
  FakeLlmServer server;
  HttpClient client;
  const auto r = client.send(chat(
      server.url("/v1/chat/completions"),
      R"({"model":"m","messages":[{"role":"user","content":"[[fake-status:429]] [[fake-retry-after:45]]"}]})"));
  CHECK(r.status == 429);
  CHECK(r.headers.at("retry-after") == "45");
  CHECK(r.body.find("rate_limit_exceeded") != std::string::npos);
  const auto nf = client.send(chat(server.url("/nope")));
  CHECK(nf.status == 404);
}

TEST_CASE("a slow reply times out within the deadline; a closed port fails fast") {
  FakeLlmServer server;
  HttpClient client;
  auto req =
      chat(server.url("/v1/chat/completions"),
           R"({"model":"m","messages":[{"role":"user","content":"[[fake-delay-ms:3000]]"}]})");
  req.timeout = 300ms;
  const auto r = client.send(req);
  CHECK(r.status == 0);
  CHECK(r.timed_out);
  CHECK(r.elapsed >= 300ms);
  // Separates the 300 ms timeout from the reply 3 s later: the timer fires well within the gap
  // on a loaded machine (docs/testing.md, "Timing").
  MESSAGE("the 300 ms timeout ended the call after ",
          std::chrono::duration_cast<std::chrono::milliseconds>(r.elapsed).count(), " ms");
  CHECK(r.elapsed < 2000ms);
  // After a timeout the client still works (the timed-out connection is not pooled).
  CHECK(client.send(chat(server.url("/v1/chat/completions"))).status == 200);

  const auto refused = client.send(chat("http://127.0.0.1:1/v1/chat/completions"));
  CHECK(refused.status == 0);
  CHECK_FALSE(refused.timed_out);
  CHECK_FALSE(refused.error.empty());
  CHECK(client.send(chat("ftp://x/y")).error.find("invalid URL") == 0);
}

TEST_CASE("many concurrent requests on one client") {
  FakeLlmServer server;
  HttpClient client(HttpClientOptions{"", true, 8, {}});
  std::atomic<int> ok{0}, done{0};
  for (int i = 0; i < 64; ++i) {
    client.submit(chat(server.url("/v1/chat/completions")), [&](HttpResponse r) {
      if (r.status == 200) ++ok;
      ++done;
    });
  }
  CHECK(assay::test::waitUntil("64 replies", [&] { return done == 64; }));
  CHECK(ok == 64);
}

// ---- HTTP/1.1 as a hostile or broken server speaks it (issue 28, item 3): a scripted server on
// ---- a raw socket writes exactly the bytes each case needs.

namespace {

/// Listens on a loopback port; for the n-th request it reads (whatever the connection), writes
/// replies[n] (the last one again when there are fewer), then `after(n, fd)` may write more.
/// Counts connections and requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies,
                          std::function<void(int, int)> after = nullptr)
      : replies_(std::move(replies)), after_(std::move(after)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    {
      std::lock_guard lock(mu_);
      for (const int c : open_) ::shutdown(c, SHUT_RDWR);  // a client may still keep one open
    }
    for (auto& t : conns_) t.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/x"; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  /// Bytes written in all, including the replies cut short by the client.
  std::size_t written() const { return written_.load(); }
  /// Each request's head (request line to blank line) and body, as received.
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }

  /// Writes all of `bytes` to `fd` (false once the client is gone).
  bool write(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      written_ += static_cast<std::size_t>(n);
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0 || stop_) {
        if (c >= 0) ::close(c);
        return;
      }
      ++connections_;
      {
        std::lock_guard lock(mu_);
        open_.push_back(c);
      }
      conns_.emplace_back([this, c] { connection(c); });
    }
  }
  void connection(int c) {
    std::string in;
    char buf[4096];
    for (;;) {
      std::size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) return (void)::close(c);
        in.append(buf, static_cast<std::size_t>(n));
      }
      std::size_t length = 0;
      if (const auto at = in.find("Content-Length: "); at != std::string::npos && at < end)
        length = std::stoul(in.substr(at + 16));
      while (in.size() < end + 4 + length) {
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) return (void)::close(c);
        in.append(buf, static_cast<std::size_t>(n));
      }
      {
        std::lock_guard lock(mu_);
        heads_.push_back(in.substr(0, end + 4));
        bodies_.push_back(in.substr(end + 4, length));
      }
      in.erase(0, end + 4 + length);
      const int k = requests_++;
      const auto& reply = replies_[std::min<std::size_t>(k, replies_.size() - 1)];
      if (!write(c, reply)) return (void)::close(c);
      if (after_) after_(k, c);
    }
  }

  std::vector<std::string> replies_;
  std::function<void(int, int)> after_;
  int fd_ = -1;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0}, requests_{0};
  std::atomic<std::size_t> written_{0};
  std::thread thread_;
  std::vector<std::thread> conns_;
  std::mutex mu_;
  std::vector<int> open_;  // accepted sockets (closed by their thread, shut down at the end)
  std::vector<std::string> heads_, bodies_;
};

std::string ok(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

TEST_CASE("interim 1xx replies are skipped: each call gets its own final reply") {
  // A 100 Continue (and a 103 Early Hints with headers) before the real reply was taken as the
  // reply, and the connection reused: the next call read the previous call's 200.
  ScriptedServer server({"HTTP/1.1 100 Continue\r\n\r\n" + ok("first"),
                         "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
                         "HTTP/1.1 102 Processing\r\n\r\n" +
                             ok("second"),
                         ok("third")});
  HttpClient client;
  const auto a = client.send(chat(server.url()));
  const auto b = client.send(chat(server.url()));
  const auto c = client.send(chat(server.url()));
  CHECK(a.status == 200);
  CHECK(a.body == "first");
  CHECK(b.status == 200);
  CHECK(b.body == "second");
  CHECK(b.headers.count("link") == 0);  // an interim reply's headers are not the reply's
  CHECK(c.body == "third");
  CHECK(server.connections() == 1);  // a clean exchange keeps the connection
  // Endless interim replies: an error once 16 have come, never a hang until the deadline.
  std::string flood;
  for (int i = 0; i < 40; ++i) flood += "HTTP/1.1 102 Processing\r\n\r\n";
  ScriptedServer flooding({flood + ok("late")});
  const auto f = client.send(chat(flooding.url()));
  CHECK(f.status == 0);
  CHECK(f.error.find("interim") != std::string::npos);
  // 101 Switching Protocols to a request that asked for no upgrade: an error.
  ScriptedServer switching({"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"});
  const auto s = client.send(chat(switching.url()));
  CHECK(s.status == 0);
  CHECK_FALSE(s.error.empty());
}

TEST_CASE("a reply followed by bytes nobody asked for: the connection is closed, never reused") {
  // The extra reply in the same segment as the first (it sat in the read buffer)…
  ScriptedServer same({ok("first") + ok("EXTRA"), ok("second")});
  HttpClient client;
  CHECK(client.send(chat(same.url())).body == "first");
  const auto b = client.send(chat(same.url()));
  CHECK(b.body == "second");
  CHECK_FALSE(b.reused_connection);
  CHECK(same.connections() == 2);
  // …and written after it, once the call is over (it waited in the socket for the next call).
  std::atomic<bool> extra_sent{false};
  ScriptedServer* late_ptr = nullptr;
  ScriptedServer late({ok("first"), ok("second")}, [&](int k, int fd) {
    if (k == 0) {
      late_ptr->write(fd, ok("EXTRA"));  // on loopback, in the client's socket once written
      extra_sent = true;
    }
  });
  late_ptr = &late;
  CHECK(client.send(chat(late.url())).body == "first");
  REQUIRE(assay::test::waitUntil("the extra reply written", [&] { return extra_sent.load(); }));
  const auto d = client.send(chat(late.url()));
  CHECK(d.body == "second");
  CHECK_FALSE(d.reused_connection);
  CHECK(late.connections() == 2);
}

TEST_CASE("a second response on a reused connection fails the call; the host's connections go") {
  // The second request's connection carries a stale response (an earlier request's, sent late)
  // and then the real one: which answers the request is unknown, so neither is taken.
  ScriptedServer server({ok("first"), ok("STALE") + ok("second"), ok("third")});
  HttpClient client;
  CHECK(client.send(chat(server.url())).body == "first");
  const auto b = client.send(chat(server.url()));
  CHECK(b.status == 0);
  CHECK(b.body.empty());
  CHECK(b.reused_connection);
  CHECK(b.error.find("a second response followed the reply") != std::string::npos);
  // From then on each call has a connection of its own: no reply can be another call's.
  const auto c = client.send(chat(server.url()));
  CHECK(c.body == "third");
  CHECK_FALSE(c.reused_connection);
  const auto d = client.send(chat(server.url()));
  CHECK(d.body == "third");
  CHECK_FALSE(d.reused_connection);
  CHECK(server.connections() == 3);
}

TEST_CASE("reply bodies being read hold at most 64 MiB, all calls together") {
  // Eight replies of 15 MiB (each under the 16 MiB cap), every one held one byte short of its
  // end until the test lets them finish: 120 MiB would be held at once without the cap.
  constexpr std::size_t kBody = 15u << 20;
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBody) +
                           "\r\n\r\n" + std::string(kBody - 1, 'b');
  std::atomic<bool> release{false};
  ScriptedServer* server_ptr = nullptr;
  ScriptedServer server({head}, [&](int, int fd) {
    (void)assay::test::waitUntil("the test's release", [&] { return release.load(); });
    server_ptr->write(fd, "z");
  });
  server_ptr = &server;
  HttpClient client;
  std::atomic<int> done{0}, failed{0}, whole{0};
  std::mutex mu;
  std::string error;
  for (int i = 0; i < 8; ++i)
    client.submit(chat(server.url()), [&](HttpResponse r) {
      if (r.status == 200 && r.body.size() == kBody) ++whole;
      if (r.status == 0) {
        std::lock_guard lock(mu);
        error = r.error;
        ++failed;
      }
      ++done;
    });
  // While none may finish, calls fail until the rest fit: 64 MiB hold four bodies of 15 MiB.
  CHECK(
      assay::test::waitUntil("four calls refused by the cap", [&] { return failed.load() >= 4; }));
  release = true;
  REQUIRE(assay::test::waitUntil("every call ended", [&] { return done.load() == 8; }));
  CHECK(whole.load() >= 1);
  CHECK(whole.load() + failed.load() == 8);
  {
    std::lock_guard lock(mu);
    CHECK(error.find("64 MiB") != std::string::npos);
  }
  // What the finished and failed calls held is given back: one more reply is read whole.
  const auto again = client.send(chat(server.url()));
  CHECK(again.status == 200);
  CHECK(again.body.size() == kBody);
}

TEST_CASE("the 16 MiB reply cap holds whatever the framing") {
  HttpClient client;
  const std::string mib(1 << 20, 'x');
  // Announced: refused at the header.
  ScriptedServer announced({"HTTP/1.1 200 OK\r\nContent-Length: 400000000\r\n\r\n"});
  const auto a = client.send(chat(announced.url()));
  CHECK(a.status == 0);
  CHECK(a.error.find("body limit") != std::string::npos);
  // Chunked, 1 MiB a chunk, 40 chunks; and until the end of the connection, 40 MiB.
  std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string to_eof = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < 40; ++i) {
    chunked += "100000\r\n" + mib + "\r\n";
    to_eof += mib;
  }
  for (const auto& framing : {std::pair{"chunked", chunked}, std::pair{"to EOF", to_eof}}) {
    CAPTURE(framing.first);  // not a structured binding: CAPTURE is a lambda (clang)
    ScriptedServer big({framing.second});
    const auto r = client.send(chat(big.url()));
    CHECK(r.status == 0);
    CHECK(r.error.find("body limit") != std::string::npos);
    CHECK(r.body.empty());
  }
  // Bytes that are not body: a chunk extension of 40 MiB (the parser buffers a chunk's header
  // line whole), and a header over the parser's 8 KiB limit.
  {
    ScriptedServer ext({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=" +
                        std::string(40u << 20, 'e') + "\r\nz\r\n0\r\n\r\n"});
    const auto r = client.send(chat(ext.url()));
    CHECK(r.status == 0);
    CHECK_FALSE(r.error.empty());
    CHECK(ext.written() < (20u << 20));  // given up long before the end
    ScriptedServer header({"HTTP/1.1 200 OK\r\nX-Big: " + std::string(1 << 20, 'h') +
                           "\r\nContent-Length: 0\r\n\r\n"});
    const auto h = client.send(chat(header.url()));
    CHECK(h.status == 0);
    CHECK(h.error.find("header limit") != std::string::npos);
  }
  // 16 MiB exactly is a reply.
  ScriptedServer at_cap({ok(std::string(16u << 20, 'y'))});
  const auto c = client.send(chat(at_cap.url()));
  CHECK(c.status == 200);
  CHECK(c.body.size() == (16u << 20));
}

TEST_CASE("a header value with CR or LF is never sent (no header injection)") {
  ScriptedServer server({ok("fine")});
  HttpClient client;
  auto r = chat(server.url());
  r.headers.push_back({"Authorization", "Bearer sk-x\r\nX-Injected: 1"});
  const auto res = client.send(r);
  CHECK(res.status == 0);
  CHECK(res.error == "header 'Authorization' holds a CR, LF or NUL byte: not sent");
  CHECK(server.requests() == 0);
  // The URL's credentials never reach an error text.
  auto bad = chat("ftp://user:hunter2@h/v1?api-key=k3y");
  const auto e = client.send(bad);
  CHECK(e.error == "invalid URL 'ftp://***@h/v1?api-key=***'");
}

TEST_CASE("the request head: defaults, the caller's headers replacing them, Content-Length") {
  ScriptedServer server({ok("one"), ok("two"), ok("three")});
  HttpClient client;
  auto r = chat(server.url(), "{\"x\":1}");
  r.headers = {{"Authorization", "Bearer sk-1"},
               {"x-a", "first"},
               {"content-type", "text/plain"},
               {"X-A", "second"},           // a later one replaces an earlier one
               {"Content-Length", "999"}};  // computed, never taken from the caller
  CHECK(client.send(r).body == "one");
  auto get = chat(server.url(), "");
  get.method = "GET";
  CHECK(client.send(get).body == "two");
  const auto shared = std::make_shared<const HttpRequest>(chat(server.url(), "[1,2]"));
  std::promise<HttpResponse> p;
  client.submit(shared, [&p](HttpResponse res) { p.set_value(std::move(res)); });
  CHECK(p.get_future().get().body == "three");
  CHECK(shared->body == "[1,2]");  // read where it is, not moved from
  const auto heads = server.heads();
  REQUIRE(heads.size() == 3);
  const std::string port = server.url().substr(17, server.url().find('/', 17) - 17);
  CHECK(heads[0] == "POST /v1/x HTTP/1.1\r\nHost: 127.0.0.1:" + port +
                        "\r\nUser-Agent: assayd\r\nAuthorization: Bearer sk-1\r\n"
                        "content-type: text/plain\r\nX-A: second\r\nContent-Length: 7\r\n\r\n");
  CHECK(heads[1] == "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1:" + port +
                        "\r\nUser-Agent: assayd\r\nContent-Type: application/json\r\n\r\n");
  CHECK(heads[2].find("Content-Length: 5\r\n") != std::string::npos);
  CHECK(server.bodies() == std::vector<std::string>{"{\"x\":1}", "", "[1,2]"});
}

TEST_CASE("kept_headers: only the response headers named are kept") {
  const std::string reply =
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nX-Request-Id: abc\r\n"
      "Content-Length: 2\r\n\r\n{}";
  ScriptedServer server({reply});
  HttpClientOptions o;
  o.kept_headers = {"retry-after"};
  HttpClient kept(o);
  const auto a = kept.send(chat(server.url()));
  CHECK(a.status == 429);
  CHECK(a.headers == std::map<std::string, std::string>{{"retry-after", "7"}});
  HttpClient all;
  const auto b = all.send(chat(server.url()));
  CHECK(b.headers.size() == 3);
  CHECK(b.headers.at("x-request-id") == "abc");
}

TEST_CASE("request bodies from 100 bytes to 1 MiB, over HTTPS and plain HTTP, reused") {
  // Past 16 KiB a head and body written as one sequence over TLS lost the body's end: the
  // provider waited for it and the call timed out.
  TestCa ca;
  for (const bool tls : {true, false}) {
    CAPTURE(tls);
    FakeLlmServer server(tls ? &ca : nullptr);
    HttpClient client(HttpClientOptions{ca.caFile(), true, 4, {"retry-after"}});
    int reused = 0;
    for (const std::size_t size : {100u, 16'000u, 16'400u, 40'000u, 70'000u, 1u << 20}) {
      CAPTURE(size);
      auto r = chat(server.url("/v1/chat/completions"),
                    R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":")" +
                        std::string(size, 'a') + "\"}]}");
      const auto a = client.send(r);
      INFO(a.error);
      CHECK(a.status == 200);
      reused += a.reused_connection ? 1 : 0;
    }
    CHECK(reused == 5);
  }
}

TEST_CASE("a URL whose path holds a space, a control character or '#' is never sent") {
  ScriptedServer server({ok("fine")});
  HttpClient client;
  const std::string base = server.url();  // http://127.0.0.1:PORT/v1/x
  for (const std::string& tail :
       {std::string(" HTTP/1.1\r\nX-Evil: 1\r\nX: "), std::string("/my path"), std::string("#frag"),
        std::string("\t"), std::string(1, '\x7f')}) {
    CAPTURE(tail);
    const auto r = client.send(chat(base + tail));
    CHECK(r.status == 0);
    CHECK(r.error.find("holds a space, a control character or '#' in its path: not sent") !=
          std::string::npos);
  }
  CHECK(server.requests() == 0);
  CHECK(client.send(chat(base + "?q=a%20b")).status == 200);  // percent-encoded: sent
}

TEST_CASE("a reused connection that breaks after a response began: the failure is the caller's") {
  // The provider answered the second request (and may bill it) before the connection broke: a
  // silent second send on a fresh connection would be billed twice and charged once.
  ScriptedServer server(
      {ok("first"), "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", ok("third")},
      [](int k, int fd) {
        if (k == 1) ::shutdown(fd, SHUT_RDWR);
      });
  HttpClient client;
  CHECK(client.send(chat(server.url())).body == "first");
  const auto broken = client.send(chat(server.url()));
  CHECK(broken.reused_connection);
  CHECK(broken.status == 0);
  CHECK_FALSE(broken.error.empty());
  CHECK(server.requests() == 2);  // not sent again
  CHECK(client.send(chat(server.url())).body == "third");
}

TEST_CASE("the server closed its idle connections: the one retry goes on a fresh connection") {
  // Each of the first four replies is followed by the server closing that connection, as a
  // provider's load balancer closes idle keep-alive connections; the client only learns it
  // when it writes on one. A retry on another pooled connection would meet the same end.
  ScriptedServer server({ok("x")}, [](int k, int fd) {
    if (k < 4) ::shutdown(fd, SHUT_RDWR);
  });
  HttpClient client;
  std::vector<std::future<HttpResponse>> first;
  std::vector<std::shared_ptr<std::promise<HttpResponse>>> promises;
  for (int i = 0; i < 4; ++i) {  // at once: four connections, idle in the pool afterwards
    auto p = std::make_shared<std::promise<HttpResponse>>();
    first.push_back(p->get_future());
    client.submit(chat(server.url()), [p](HttpResponse r) { p->set_value(std::move(r)); });
  }
  for (auto& f : first) CHECK(f.get().status == 200);
  // Each connection is dead once its reply is written: the server never reads on it again.
  const int opened = server.connections();
  CHECK(opened >= 2);  // submitted together: most find no idle connection
  for (int i = 0; i < 4; ++i) {
    const auto r = client.send(chat(server.url()));
    INFO("request " << i << ": " << r.error);
    CHECK(r.status == 200);
  }
  CHECK(server.connections() == opened + 1);  // one fresh connection, reused after
}

TEST_CASE("an idle connection keeps no request: the caller's is released when done runs") {
  ScriptedServer server({ok("x")});
  HttpClient client;
  auto request = std::make_shared<HttpRequest>(chat(server.url()));
  request->body.assign(1u << 20, 'b');  // as a batch's upload would be
  std::promise<long> held;
  client.submit(std::shared_ptr<const HttpRequest>(request), [&held, &request](HttpResponse r) {
    held.set_value(r.status == 200 ? request.use_count() : -1);
  });
  CHECK(held.get_future().get() == 1);  // the client let go before done ran
  CHECK(request.use_count() == 1);
}

TEST_CASE("sameOrigin: a URL from a provider's reply is followed on the endpoint's origin only") {
  const std::string endpoint = "https://api.anthropic.com/v1";
  CHECK(sameOrigin("https://api.anthropic.com/v1/messages/batches/b1/results", endpoint));
  CHECK(sameOrigin("https://api.anthropic.com?x=1", endpoint));
  CHECK_FALSE(sameOrigin("http://api.anthropic.com/v1/messages/batches/b1/results", endpoint));
  CHECK_FALSE(sameOrigin("https://api.anthropic.com.evil.example/v1", endpoint));
  CHECK_FALSE(sameOrigin("https://api.anthropic.com:8443/v1", endpoint));
  CHECK_FALSE(sameOrigin("https://evil.example/?https://api.anthropic.com", endpoint));
  CHECK_FALSE(sameOrigin("/v1/messages", endpoint));
  CHECK_FALSE(sameOrigin("", ""));
}
