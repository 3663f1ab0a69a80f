#include "judges/llm/http_client.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>  // before boost/asio: asio::awaitable needs it on g++ 12

#include "core/log_text.hpp"
#include "core/string_map.hpp"

namespace assay::llm {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;

namespace {

/// An http(s) URL's parts, as views into the URL's text.
struct Url {
  bool tls = false;
  std::string_view host, port, target;
  std::string_view origin;  // scheme://authority: the connection pool's key
};

bool parseUrl(std::string_view url, Url& u) {
  std::string_view rest = url;
  if (rest.rfind("https://", 0) == 0) {
    u.tls = true;
    rest.remove_prefix(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest.remove_prefix(7);
  } else {
    return false;
  }
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  u.origin = url.substr(0, url.size() - rest.size() + authority.size());
  u.target = slash == std::string_view::npos ? std::string_view("/") : rest.substr(slash);
  if (authority.empty()) return false;
  if (authority.front() == '[') {  // [::1]:8080
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return false;
    u.host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
    u.port = authority.rfind(':', 0) == 0 ? authority.substr(1) : std::string_view();
  } else {
    const auto colon = authority.rfind(':');
    u.host = authority.substr(0, colon);
    u.port = colon == std::string_view::npos ? std::string_view() : authority.substr(colon + 1);
  }
  if (u.port.empty()) u.port = u.tls ? "443" : "80";
  return !u.host.empty();
}

bool equalsNoCase(std::string_view a, std::string_view b) {  // HTTP field names: ASCII
  return beast::iequals({a.data(), a.size()}, {b.data(), b.size()});
}

/// The request's head (RFC 9112, sections 3 and 5): the request line, Host, User-Agent and
/// Content-Type (each left out when the caller gives one of the same name), the caller's
/// headers (a later one replacing an earlier one of the same name, as Beast's set() did),
/// Content-Length for a body or a POST, PUT or PATCH (a caller's Content-Length or
/// Transfer-Encoding is not sent), and the blank line. Returns the first header holding a CR,
/// LF or NUL byte in `bad` (then the head is not sent: a line break would end the header there
/// and inject the rest as headers of its own).
std::string requestHead(const HttpRequest& r, const Url& u, std::string_view& bad) {
  const auto given = [&r](std::string_view name, std::size_t from) {
    for (std::size_t i = from; i < r.headers.size(); ++i)
      if (equalsNoCase(r.headers[i].first, name)) return true;
    return false;
  };
  std::size_t size = r.method.size() + u.target.size() + u.host.size() + u.port.size() + 128;
  for (const auto& [k, v] : r.headers) {
    constexpr std::string_view kBreaks("\r\n\0", 3);
    if (k.find_first_of(kBreaks) != std::string::npos ||
        v.find_first_of(kBreaks) != std::string::npos) {
      bad = k;
      return {};
    }
    size += k.size() + v.size() + 4;
  }
  std::string h;
  h.reserve(size);
  h.append(r.method).append(" ").append(u.target).append(" HTTP/1.1\r\n");
  if (!given("host", 0)) {
    const bool v6 = u.host.find(':') != std::string_view::npos;
    h.append("Host: ").append(v6 ? "[" : "").append(u.host).append(v6 ? "]" : "");
    const bool default_port = u.port == (u.tls ? "443" : "80");
    if (!default_port) h.append(":").append(u.port);
    h.append("\r\n");
  }
  if (!given("user-agent", 0)) h.append("User-Agent: assayd\r\n");
  if (!given("content-type", 0)) h.append("Content-Type: application/json\r\n");
  for (std::size_t i = 0; i < r.headers.size(); ++i) {
    const auto& [k, v] = r.headers[i];
    if (equalsNoCase(k, "content-length") || equalsNoCase(k, "transfer-encoding") ||
        given(k, i + 1))
      continue;
    h.append(k).append(": ").append(v).append("\r\n");
  }
  if (!r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH") {
    char digits[24];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, r.body.size());
    h.append("Content-Length: ").append(digits, end).append("\r\n");
  }
  h.append("\r\n");
  return h;
}

/// Largest reply body read (16 MiB): a provider's reply is a few KiB, a batch's results file
/// is read in parts of this size at most.
constexpr std::uint64_t kMaxReplyBytes = 16u << 20;
/// Unparsed bytes held at once while reading a reply (http::error::buffer_overflow beyond).
constexpr std::size_t kMaxReadBuffer = 1u << 20;
/// Interim 1xx responses skipped before one final response; more is an error.
constexpr int kMaxInterim = 16;
/// Reply bodies being read, all calls together (64 calls at the 16 MiB cap would hold 1 GiB,
/// past the unit's MemoryMax): a call whose bytes would go past it fails.
constexpr std::size_t kMaxReadingBytes = 64u << 20;
/// After a host sent a response to no request, its connections are not reused for this long:
/// each call opens its own, so that no reply can be taken for another's.
constexpr std::chrono::minutes kNoReuseAfterStray{10};

/// What may follow an exchange on its connection.
enum class After {
  kReuse,  // the server keeps it alive and nothing follows the reply
  kClose,  // the server closes it (or asked to)
  kStray,  // bytes follow the reply: a response to no request
};

struct Conn {
  std::unique_ptr<beast::tcp_stream> tcp;                     // plain HTTP
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;  // HTTPS
  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
};

}  // namespace

struct HttpClient::Impl {
  HttpClientOptions options;
  std::atomic<std::size_t> max_idle{0};  // options.max_idle_per_host, raised by keepIdle()
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  ssl::context ssl_ctx{ssl::context::tls_client};
  template <typename V>
  using ByOrigin = StringMap<V>;  // keyed by origin, looked up by string_view without a copy
  ByOrigin<std::deque<std::unique_ptr<Conn>>> idle;  // io thread only
  // io thread only: hosts that sent a response to no request (kNoReuseAfterStray), and the
  // reply bytes being read by every call (kMaxReadingBytes).
  ByOrigin<Steady::time_point> no_reuse_until;
  std::size_t reading_bytes = 0;
  std::thread thread;

  asio::awaitable<std::unique_ptr<Conn>> connect(const Url& u, Steady::time_point deadline) {
    tcp::resolver resolver(io);
    asio::steady_timer resolve_timer(io, deadline);
    resolve_timer.async_wait([&resolver](const boost::system::error_code& ec) {
      if (!ec) resolver.cancel();  // a DNS lookup must not outlive the deadline
    });
    auto endpoints = co_await resolver.async_resolve(u.host, u.port, asio::use_awaitable);
    const std::string host(u.host);
    resolve_timer.cancel();
    auto conn = std::make_unique<Conn>();
    if (!u.tls) {
      conn->tcp = std::make_unique<beast::tcp_stream>(io);
      conn->tcp->expires_at(deadline);
      co_await conn->tcp->async_connect(endpoints, asio::use_awaitable);
      co_return conn;
    }
    conn->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, ssl_ctx);
    // SNI, so virtual-hosted endpoints present the right certificate.
    if (!SSL_set_tlsext_host_name(conn->tls->native_handle(), host.c_str()))
      throw boost::system::system_error(boost::system::error_code(
          static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
    if (options.verify_peer) {
      conn->tls->set_verify_mode(ssl::verify_peer);
      conn->tls->set_verify_callback(ssl::host_name_verification(host));
    } else {
      conn->tls->set_verify_mode(ssl::verify_none);
    }
    beast::get_lowest_layer(*conn->tls).expires_at(deadline);
    co_await beast::get_lowest_layer(*conn->tls).async_connect(endpoints, asio::use_awaitable);
    co_await conn->tls->async_handshake(ssl::stream_base::client, asio::use_awaitable);
    co_return conn;
  }

  /// Reads one response into `parser`, step by step, so that the body cap holds whatever the
  /// framing (Content-Length, chunked, until the end of the connection): counted here as well
  /// as by the parser's own body_limit.
  template <typename Stream>
  asio::awaitable<void> readCapped(Stream& stream, beast::flat_buffer& buffer,
                                   http::response_parser<http::string_body>& parser,
                                   bool& responded) {
    parser.body_limit(kMaxReplyBytes);
    struct Counted {  // this call's share of reading_bytes, given back however the read ends
      std::size_t& total;
      std::size_t mine = 0;
      ~Counted() { total -= mine; }
    } counted{reading_bytes};
    while (!parser.is_done()) {
      try {
        co_await http::async_read_some(stream, buffer, parser, asio::use_awaitable);
      } catch (const boost::system::system_error&) {
        responded = responded || parser.got_some() || buffer.size() != 0;
        throw;
      }
      responded = responded || parser.got_some() || buffer.size() != 0;
      if (!parser.is_header_done()) continue;
      const std::size_t size = parser.get().body().size();
      if (size > kMaxReplyBytes) throw boost::system::system_error(http::error::body_limit);
      reading_bytes += size - counted.mine;
      counted.mine = size;
      if (reading_bytes > kMaxReadingBytes)
        throw boost::system::system_error(http::error::body_limit,
                                          "the replies being read hold 64 MiB");
    }
  }

  /// Writes `req` and reads its final response into `res`. Interim 1xx responses (100
  /// Continue, 102 Processing, 103 Early Hints: RFC 9110, section 15.2) are skipped, at most
  /// kMaxInterim; 101 is an error (no upgrade was asked for). Says whether the connection may
  /// carry the next request: the server keeps it alive and nothing follows the response, in
  /// the read buffer, in TLS's buffer or in the socket; a byte there is a response to no
  /// request (kStray), which the next call would read as its own.
  template <typename Stream>
  asio::awaitable<After> exchange(Stream& stream, Conn& conn, const std::string& head,
                                  const std::string& body, HttpResponse& res,
                                  Steady::time_point deadline, bool& responded) {
    conn.lowest().expires_at(deadline);
    // The body is read where the caller keeps it. Plain TCP: the head and the body in one
    // gathered write. TLS: one write each (Beast 1.74's ssl_stream, given both as one sequence
    // past 16 KiB, left the body's end unsent: a request that timed out, tested).
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      const std::array<asio::const_buffer, 2> request{asio::buffer(head), asio::buffer(body)};
      co_await asio::async_write(stream, request, asio::use_awaitable);
    } else {
      co_await asio::async_write(stream, asio::buffer(head), asio::use_awaitable);
      co_await asio::async_write(stream, asio::buffer(body), asio::use_awaitable);
    }
    const auto written = Steady::now();
    // Bounded: the parser moves body bytes out as they come, but keeps a header or a chunk's
    // header line (its extensions) whole until its end; Beast 1.74 bounds the first only.
    beast::flat_buffer buffer(kMaxReadBuffer);
    for (int interim = 0;; ++interim) {
      http::response_parser<http::string_body> parser;
      co_await readCapped(stream, buffer, parser, responded);
      auto& msg = parser.get();
      const int status = static_cast<int>(msg.result_int());
      if (status == 101)
        throw boost::system::system_error(http::error::bad_status, "101 without an upgrade");
      if (status >= 100 && status < 200) {
        if (interim == kMaxInterim)
          throw boost::system::system_error(http::error::bad_status,
                                            "more than 16 interim 1xx responses");
        continue;
      }
      res.status = status;
      res.on_wire = Steady::now() - written;
      res.body = std::move(msg.body());
      for (const auto& f : msg) {
        const auto& kept = options.kept_headers;
        if (!kept.empty() && std::none_of(kept.begin(), kept.end(), [&f](const std::string& k) {
              return beast::iequals(k, f.name_string());
            }))
          continue;
        std::string name(f.name_string());
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        res.headers[name] = std::string(f.value());
      }
      if (buffer.size() != 0 || !nothingPending(conn)) co_return After::kStray;
      co_return msg.keep_alive() ? After::kReuse : After::kClose;
    }
  }

  /// True when no byte waits on `conn` (the socket, and OpenSSL's decrypted buffer).
  static bool nothingPending(Conn& conn) {
    boost::system::error_code ec;
    const auto in_socket = conn.lowest().socket().available(ec);
    return !ec && in_socket == 0 && (!conn.tls || SSL_pending(conn.tls->native_handle()) == 0);
  }

  asio::awaitable<HttpResponse> run(std::shared_ptr<const HttpRequest> request) {
    const auto start = Steady::now();
    const auto deadline = start + request->timeout;
    HttpResponse res;
    Url u;
    if (!parseUrl(request->url, u)) {
      res.error = "invalid URL '" + safeUrl(request->url) + "'";
      co_return res;
    }
    if (std::any_of(u.target.begin(), u.target.end(), refusedInUrl)) {
      res.error = "URL '" + safeUrl(request->url) +
                  "' holds a space, a control character or '#' in its path: not sent";
      co_return res;
    }
    std::string_view bad;
    const std::string head = requestHead(*request, u, bad);
    if (head.empty()) {  // an API key variable with a pasted newline: refused, never sent
      res.error =
          "header '" + logText(std::string(bad), 40) + "' holds a CR, LF or NUL byte: not sent";
      co_return res;
    }
    const std::string_view key = u.origin;

    const auto pool_of = [this](std::string_view origin) -> auto& {
      auto it = idle.find(origin);
      if (it == idle.end()) it = idle.try_emplace(std::string(origin)).first;
      return it->second;
    };
    const auto stray = [&] {
      const auto it = no_reuse_until.find(key);
      (it != no_reuse_until.end() ? it->second : no_reuse_until[std::string(key)]) =
          Steady::now() + kNoReuseAfterStray;
      pool_of(key).clear();
    };
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::unique_ptr<Conn> conn;
      auto& pool = pool_of(key);
      while (!pool.empty() && !conn) {
        conn = std::move(pool.back());
        pool.pop_back();
        if (!nothingPending(*conn)) {  // bytes came while idle: never a reply
          conn.reset();
          stray();
        }
      }
      const bool reused = conn != nullptr;
      bool responded = false;  // a byte of a response came on this connection
      try {
        if (!conn) conn = co_await connect(u, deadline);
        const After after = conn->tls ? co_await exchange(*conn->tls, *conn, head, request->body,
                                                          res, deadline, responded)
                                      : co_await exchange(*conn->tcp, *conn, head, request->body,
                                                          res, deadline, responded);
        res.reused_connection = reused;
        res.error.clear();
        if (after == After::kStray) {
          stray();
          if (reused) {
            // Two responses where one was asked for: the first may be an earlier request's,
            // sent late. Which one answers this request is unknown, so neither is taken.
            res = HttpResponse{};
            res.reused_connection = true;
            res.error =
                "a second response followed the reply on a reused connection (the server sent "
                "a response to no request): the reply is not taken; this host's connections "
                "are not reused for 10 minutes";
          }
          break;  // a fresh connection's first response answers its request
        }
        const auto banned = no_reuse_until.find(key);
        if (banned != no_reuse_until.end() && Steady::now() >= banned->second)
          no_reuse_until.erase(banned);
        const bool reusable = after == After::kReuse && !no_reuse_until.contains(key);
        if (auto& idle_here = pool_of(key);
            reusable && idle_here.size() < max_idle.load(std::memory_order_relaxed)) {
          conn->lowest().expires_never();
          idle_here.push_back(std::move(conn));
        }
        break;
      } catch (const boost::system::system_error& e) {
        res.timed_out = e.code() == beast::error::timeout ||
                        (e.code() == asio::error::operation_aborted && Steady::now() >= deadline);
        res.error = e.what();  // the code's message, after what a step added ("101 without…")
        res.status = 0;
        res.reused_connection = reused;
        // A pooled connection the server closed meanwhile fails at once: try a fresh one. Not
        // once a byte of a response came: the provider answered (and may have billed) this
        // request, so the attempt's failure goes to the caller, whose retries count.
        if (reused && !responded && !res.timed_out && Steady::now() < deadline) continue;
        break;
      }
    }
    res.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
    co_return res;
  }
};

bool refusedInUrl(char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '#'; }

bool sameOrigin(std::string_view a, std::string_view b) {
  const auto origin = [](std::string_view u) {
    const auto scheme = u.find("://");
    if (scheme == std::string_view::npos) return std::string_view();
    return u.substr(0, u.find_first_of("/?#", scheme + 3));
  };
  return !origin(a).empty() && origin(a) == origin(b);
}

std::string caFileProblem(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    return "cannot read '" + path + "': " + std::strerror(errno);
  }
  ssl::context ctx(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx.load_verify_file(path, ec);  // as the client does: PEM certificates, at least one
  return ec ? "'" + path + "' is not a PEM certificate bundle: " + ec.message() : "";
}

HttpClient::HttpClient(HttpClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->max_idle = impl_->options.max_idle_per_host;
  if (!impl_->options.ca_file.empty()) {
    boost::system::error_code ec;
    impl_->ssl_ctx.load_verify_file(impl_->options.ca_file, ec);
    if (ec) throw std::runtime_error("ca_file '" + impl_->options.ca_file + "': " + ec.message());
  } else {
    impl_->ssl_ctx.set_default_verify_paths();
  }
  impl_->ssl_ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                             ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                             ssl::context::no_tlsv1_1);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

HttpClient::~HttpClient() { stop(); }

void HttpClient::keepIdle(std::size_t n) {
  auto cur = impl_->max_idle.load();
  while (cur < n && !impl_->max_idle.compare_exchange_weak(cur, n)) {
  }
}

void HttpClient::stop() {
  impl_->guard.reset();
  impl_->io.stop();  // in-flight requests are abandoned: their callbacks do not run
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id())
    impl_->thread.join();
}

void HttpClient::submit(HttpRequest request, std::function<void(HttpResponse)> done) {
  submit(std::make_shared<const HttpRequest>(std::move(request)), std::move(done));
}

void HttpClient::submit(std::shared_ptr<const HttpRequest> request,
                        std::function<void(HttpResponse)> done) {
  asio::co_spawn(impl_->io, impl_->run(std::move(request)),
                 [done = std::move(done)](std::exception_ptr e, HttpResponse r) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       r.error = ex.what();
                     }
                   }
                   done(std::move(r));
                 });
}

void HttpClient::schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(impl_->io, delay);
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
}

HttpResponse HttpClient::send(HttpRequest request) {
  std::promise<HttpResponse> p;
  auto f = p.get_future();
  submit(std::move(request), [&p](HttpResponse r) { p.set_value(std::move(r)); });
  return f.get();
}

}  // namespace assay::llm
