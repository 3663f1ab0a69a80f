#include "daemon/admin_server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>
#include <optional>
#include <thread>
#include <utility>  // before boost/asio: asio::awaitable needs it on g++ 12

// g++ 12 reports -Wmismatched-new-delete on the coroutine frame of session() (Asio's
// awaitable_frame_base, whose operator new and operator delete are a matching pair): a false
// positive of its inliner, which clang-14 (the sanitizer build) does not report.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace assay {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

/// Request line and headers: a longer one is answered 431 (a 100 KB /v1/route query used to
/// get its connection closed with no answer).
constexpr std::uint32_t kMaxHeaderBytes = 16 * 1024;
/// A request body (none of the endpoints reads one): a longer one is answered 413.
constexpr std::uint64_t kMaxBodyBytes = std::uint64_t{64} * 1024;
/// /v1/route requests waiting for the route thread at once; more are answered 503 at once.
constexpr int kMaxRoutesWaiting = 256;
/// Unparsed bytes held per connection.
constexpr std::size_t kMaxConnectionBuffer = std::size_t{128} * 1024;
/// Connections served at once; one more is closed at once (a scraper or a health check needs
/// one each; thousands are a leak or an attack, and each holds a buffer and a descriptor).
constexpr int kMaxSessions = 1024;

using Routed = std::pair<int, std::string>;

bool isRoute(const http::request<http::string_body>& req) {
  const std::string_view target(req.target().data(), req.target().size());
  return target.substr(0, target.find('?')) == "/v1/route" &&
         (req.method() == http::verb::get || req.method() == http::verb::head);
}

struct AdminServer::Impl {
  Handlers handlers;
  // Before io: the sessions' coroutine frames, destroyed with io, still use them.
  int sessions = 0;  // connections being served (io thread only)
  /// The connections, least recently active first (io thread only): at kMaxSessions the
  /// oldest one waiting for a request is closed to make room, so that idle connections never
  /// lock /metrics and /healthz out.
  struct Slot {
    beast::tcp_stream* stream = nullptr;
    bool waiting = true;  // reading a request (none yet, or part of one)
  };
  std::list<Slot> slots;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  /// /v1/route's handler may wait on Redis (the shared A/B tables): it runs here, never on the
  /// thread that answers /metrics, /healthz and /readyz from memory.
  asio::thread_pool route_pool{1};
  std::atomic<int> routes_waiting{0};  // changed on the io thread only

  asio::awaitable<Routed> callRoute(std::string query) { co_return handlers.route(query); }

  /// The reply to a /v1/route request, computed on route_pool. 503 when kMaxRoutesWaiting are
  /// already waiting (Redis hangs), 500 when the handler throws.
  asio::awaitable<Routed> route(std::string query) {
    if (routes_waiting >= kMaxRoutesWaiting)
      co_return Routed{503, R"({"error":"busy: too many /v1/route requests waiting"})"};
    const int waiting = ++routes_waiting;
    if (handlers.routes_waiting) handlers.routes_waiting(waiting);
    Routed out;
    try {
      out = co_await asio::co_spawn(route_pool, callRoute(std::move(query)), asio::use_awaitable);
    } catch (const std::exception& e) {
      out = {500, R"({"error":"internal error"})"};
      spdlog::error("admin: /v1/route failed: {}", e.what());
    }
    const int left = --routes_waiting;
    if (handlers.routes_waiting) handlers.routes_waiting(left);
    co_return out;
  }

  /// The reply to `req`; `routed` is the route handler's answer when `req` is for /v1/route.
  http::response<http::string_body> respond(const http::request<http::string_body>& req,
                                            Routed* routed = nullptr) {
    http::response<http::string_body> res;
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    res.set(http::field::server, "assayd");
    const std::string_view target(req.target().data(), req.target().size());
    const auto path = target.substr(0, target.find('?'));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.body() = "method not allowed\n";
    } else if (path == "/metrics") {
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = handlers.metrics();
    } else if (path == "/healthz") {
      const std::string why = handlers.unhealthy ? handlers.unhealthy() : std::string();
      res.result(why.empty() ? http::status::ok : http::status::service_unavailable);
      res.body() = why.empty() ? "ok\n" : "unhealthy: " + why + "\n";
    } else if (path == "/readyz") {
      const std::string why = handlers.not_ready();
      res.result(why.empty() ? http::status::ok : http::status::service_unavailable);
      res.body() = why.empty() ? "ready\n" : "not ready: " + why + "\n";
    } else if (path == "/v1/route" && routed) {
      auto& [status, body] = *routed;
      res.result(static_cast<unsigned>(status));
      res.set(http::field::content_type, "application/json");
      res.set(http::field::cache_control, "no-store");
      res.body() = std::move(body);
    } else {
      res.result(http::status::not_found);
      res.body() = "not found; try /metrics, /healthz, /readyz or /v1/route\n";
    }
    if (res.find(http::field::content_type) == res.end())
      res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (req.method() == http::verb::head) {
      res.content_length(res.body().size());
      res.body().clear();
    } else {
      res.prepare_payload();
    }
    return res;
  }

  /// Serves one connection until the client closes it, times out (30 s per read or write) or
  /// sends garbage. Errors are codes, not exceptions: nothing is reported per connection, and
  /// nothing needs memory or descriptors when the process is out of them.
  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    // Bounded: the parser keeps a chunk's header line (its extensions) whole, which Beast 1.74
    // does not count against either limit (300 MiB of extension was buffered).
    // 128 KiB: the 16 KiB of header and the 64 KiB of body with room; a longer chunk line is
    // answered 413. With kMaxSessions connections, 128 MiB at most.
    beast::flat_buffer buffer(kMaxConnectionBuffer);
    beast::error_code ec;
    const auto slot = slots.insert(slots.end(), Slot{&stream});
    struct Release {
      std::list<Slot>& list;
      std::list<Slot>::iterator it;
      ~Release() { list.erase(it); }
    } release{slots, slot};
    for (;;) {
      slot->waiting = true;
      stream.expires_after(std::chrono::seconds(30));
      http::request_parser<http::string_body> parser;
      parser.header_limit(kMaxHeaderBytes);
      parser.body_limit(kMaxBodyBytes);
      co_await http::async_read(stream, buffer, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::buffer_overflow) ec = http::error::body_limit;
      // A request the parser refuses (a bad method, target, version, header or chunk) is
      // answered 400; a client that closed mid-request is not answered.
      const bool malformed =
          ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message &&
          ec != http::error::header_limit && ec != http::error::body_limit;
      if (ec == http::error::header_limit || ec == http::error::body_limit || malformed) {
        const bool header = ec == http::error::header_limit;
        http::response<http::string_body> res{malformed ? http::status::bad_request
                                              : header
                                                  ? http::status::request_header_fields_too_large
                                                  : http::status::payload_too_large,
                                              11};
        res.set(http::field::server, "assayd");
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        res.keep_alive(false);
        res.body() = malformed ? "malformed HTTP request: " + ec.message() + "\n"
                     : header  ? "request line and headers over 16 KiB\n"
                               : "body over 64 KiB\n";
        res.prepare_payload();
        stream.expires_after(std::chrono::seconds(30));
        co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
        // A lingering close: what the client is still sending is read and dropped (at most
        // 1 MiB, 2 s) so that closing with unread bytes does not reset the connection before
        // the client has read the answer.
        stream.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream.expires_after(std::chrono::seconds(2));
        std::array<char, 16 * 1024> scratch;
        for (std::size_t dropped = 0; !ec && dropped < (1u << 20);)
          dropped += co_await stream.async_read_some(asio::buffer(scratch),
                                                     asio::redirect_error(asio::use_awaitable, ec));
        co_return;
      }
      if (ec) break;
      slot->waiting = false;
      slots.splice(slots.end(), slots, slot);  // the most recently active
      http::request<http::string_body> req = parser.release();
      std::optional<Routed> routed;
      if (handlers.route && isRoute(req)) {
        const std::string_view target(req.target().data(), req.target().size());
        const auto q = target.find('?');
        routed = co_await route(
            std::string(q == std::string_view::npos ? std::string_view() : target.substr(q + 1)));
      }
      http::response<http::string_body> res;
      try {
        res = respond(req, routed ? &*routed : nullptr);
      } catch (const std::exception& e) {  // a handler failed (out of memory…): say so
        res = {http::status::internal_server_error, req.version()};
        res.body() = std::string("internal error: ") + e.what() + "\n";
        res.prepare_payload();
      }
      stream.expires_after(std::chrono::seconds(30));
      co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !req.keep_alive()) break;
    }
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  /// Accepts for as long as the server lives. An accept error (EMFILE when the process is out
  /// of file descriptors, ENOBUFS…) is logged at most once a minute and retried after a growing
  /// pause (10 ms to 1 s): the endpoint never stops answering for good.
  asio::awaitable<void> accept() {
    auto pause = std::chrono::milliseconds(10);
    auto last_log = std::chrono::steady_clock::time_point{};
    long failures = 0;
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket =
          co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) {
        pause = std::chrono::milliseconds(10);
        if (sessions >= kMaxSessions) {
          // Room is made by closing the least recently active connection that waits for a
          // request; with none (every one busy), the new one is closed unanswered.
          const auto idle =
              std::find_if(slots.begin(), slots.end(), [](const Slot& s) { return s.waiting; });
          if (idle == slots.end()) {
            socket.close(ec);
            continue;
          }
          idle->waiting = false;
          idle->stream->socket().close(ec);  // its read ends: the session unwinds
        }
        ++sessions;
        asio::co_spawn(io, session(std::move(socket)), [this](std::exception_ptr) { --sessions; });
        continue;
      }
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      ++failures;
      if (std::chrono::steady_clock::now() - last_log > std::chrono::minutes(1)) {
        last_log = std::chrono::steady_clock::now();
        spdlog::warn("admin: accept failed ({} time(s) so far): {}; retrying", failures,
                     ec.message());
      }
      asio::steady_timer timer(io, pause);
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
  }
};

AdminServer::AdminServer(const std::string& listen, Handlers handlers)
    : impl_(std::make_unique<Impl>()) {
  impl_->handlers = std::move(handlers);
  const auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  const std::string port = listen.substr(colon + 1);
  try {
    tcp::resolver resolver(impl_->io);
    const auto results = resolver.resolve(host, port, tcp::resolver::passive);
    const tcp::endpoint ep = *results.begin();
    impl_->acceptor.open(ep.protocol());
    impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
    impl_->acceptor.bind(ep);
    impl_->acceptor.listen();
  } catch (const std::exception& e) {
    throw std::runtime_error("admin.listen: cannot listen on '" + listen + "': " + e.what());
  }
  asio::co_spawn(impl_->io, impl_->accept(), asio::detached);
  impl_->thread = std::thread([this] {
    try {
      impl_->io.run();
    } catch (const std::exception& e) {
      spdlog::error("admin server stopped: {}", e.what());
    }
  });
}

AdminServer::~AdminServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->route_pool.join();  // a route under way finishes (bounded by the Redis timeout)
}

unsigned short AdminServer::port() const { return impl_->acceptor.local_endpoint().port(); }

int AdminServer::routesWaiting() const { return impl_->routes_waiting.load(); }

}  // namespace assay
