#include "judges/llm/http_client.hpp"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
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
#include <mutex>
#include <optional>
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
/// and inject the rest as headers of its own). The head is written into `h`.
bool requestHead(const HttpRequest& r, const Url& u, std::string& h, std::string_view& bad) {
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
      return false;
    }
    size += k.size() + v.size() + 4;
  }
  h.clear();  // the caller's buffer: its capacity kept from request to request
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
  return true;
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

/// One request submitted, from submit() to its `done`.
struct Job {
  std::shared_ptr<const HttpRequest> request;
  std::function<void(HttpResponse)> done;
  Steady::time_point start, deadline;
  bool second_try = false;  // its first connection, a pooled one, failed before any response
};

/// One keep-alive connection. Its coroutine (serve) owns it from its first request to its
/// close, and waits on `wake` while it is idle in the pool: the next request is handed to it
/// there (`job`), with its head already written into `head`. The buffers are reused from
/// request to request.
struct Conn {
  std::unique_ptr<beast::tcp_stream> tcp;                     // plain HTTP
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;  // HTTPS
  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
  std::string origin;  // the pool's key
  std::string head;    // the request's head (requestHead)
  // Bounded: the parser moves body bytes out as they come, but keeps a header or a chunk's
  // header line (its extensions) whole until its end; Beast 1.74 bounds the first only.
  beast::flat_buffer buffer{kMaxReadBuffer};
  std::optional<asio::steady_timer> wake;  // idle: cancelled to hand it a job or close it
  std::optional<Job> job;                  // handed to it while idle
  bool closing = false;                    // taken out of the pool for good: its loop ends
};

/// The one block a posted drain of the submitted requests needs (at most one is posted at a
/// time: Impl::drain_posted), reused: a request's hand-off to the client thread allocates
/// nothing. A larger block than it holds comes from operator new.
struct DrainSlot {
  alignas(std::max_align_t) unsigned char bytes[256];
  bool used = false;  // guarded as drain_posted is (set under submit_mu, cleared before drain)
};

template <class T>
struct DrainAllocator {
  using value_type = T;
  DrainSlot* slot;
  explicit DrainAllocator(DrainSlot* s) : slot(s) {}
  template <class U>
  explicit DrainAllocator(const DrainAllocator<U>& o) : slot(o.slot) {}
  T* allocate(std::size_t n) {
    if (!slot->used && n * sizeof(T) <= sizeof slot->bytes) {
      slot->used = true;
      return reinterpret_cast<T*>(slot->bytes);  // NOLINT: raw storage for the op
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    if (reinterpret_cast<unsigned char*>(p) == slot->bytes) {  // NOLINT
      slot->used = false;
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const DrainAllocator<U>& o) const {
    return slot == o.slot;
  }
};

}  // namespace

struct HttpClient::Impl {
  DrainSlot drain_slot;  // first: outlives `io`, which may still hold a drain when destroyed
  HttpClientOptions options;
  std::atomic<std::size_t> max_idle{0};  // options.max_idle_per_host, raised by keepIdle()
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
  ssl::context ssl_ctx{ssl::context::tls_client};
  template <typename V>
  using ByOrigin = StringMap<V>;  // keyed by origin, looked up by string_view without a copy
  // io thread only: the idle connections by origin, each waiting in its serve() loop.
  ByOrigin<std::deque<Conn*>> idle;
  // io thread only: hosts that sent a response to no request (kNoReuseAfterStray), and the
  // reply bytes being read by every call (kMaxReadingBytes).
  ByOrigin<Steady::time_point> no_reuse_until;
  std::size_t reading_bytes = 0;
  std::string head_scratch;  // io thread only: the next request's head, then swapped into its Conn
  // Requests submitted from any thread, started on the client thread by one posted drain.
  std::mutex submit_mu;
  std::vector<Job> submitted;  // guarded by submit_mu
  std::vector<Job> draining;   // io thread only: swapped with `submitted` (capacities kept)
  bool drain_posted = false;   // guarded by submit_mu
  std::thread thread;

  /// Posted by submit() when no drain is pending: starts every request submitted since.
  struct Drain {
    Impl* impl;
    void operator()() const { impl->drain(); }
    using allocator_type = DrainAllocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(&impl->drain_slot); }
  };

  void submit(Job job) {
    bool post = false;
    {
      std::lock_guard lock(submit_mu);
      submitted.push_back(std::move(job));
      post = !drain_posted;
      drain_posted = true;
      // Posted under the lock: the drain slot is free (the last drain's op released it before
      // that drain cleared drain_posted).
      if (post) asio::post(io, Drain{this});
    }
  }

  void drain() {
    {
      std::lock_guard lock(submit_mu);
      draining.swap(submitted);
      drain_posted = false;
    }
    for (Job& job : draining) dispatch(std::move(job));
    draining.clear();
  }

  static void complete(Job& job, HttpResponse res) {
    res.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - job.start);
    auto done = std::move(job.done);
    job.request.reset();  // an idle connection holds no request (a batch's upload: megabytes)
    done(std::move(res));
  }

  std::deque<Conn*>& poolOf(std::string_view origin) {
    auto it = idle.find(origin);
    if (it == idle.end()) it = idle.try_emplace(std::string(origin)).first;
    return it->second;
  }

  /// Takes `conn` out of the pool for good: its loop ends.
  static void close(Conn* conn) {
    conn->closing = true;
    conn->wake->cancel();
  }

  /// A host sent a response to no request: its connections are not reused for a while.
  void stray(std::string_view origin) {
    const auto it = no_reuse_until.find(origin);
    (it != no_reuse_until.end() ? it->second : no_reuse_until[std::string(origin)]) =
        Steady::now() + kNoReuseAfterStray;
    auto& pool = poolOf(origin);
    for (Conn* c : pool) close(c);
    pool.clear();
  }

  /// Starts `job` (client thread): on an idle connection to its origin, or a new one.
  void dispatch(Job job) {
    const HttpRequest& request = *job.request;
    HttpResponse res;
    Url u;
    if (!parseUrl(request.url, u)) {
      res.error = "invalid URL '" + safeUrl(request.url) + "'";
      return complete(job, std::move(res));
    }
    if (std::any_of(u.target.begin(), u.target.end(), refusedInUrl)) {
      res.error = "URL '" + safeUrl(request.url) +
                  "' holds a space, a control character or '#' in its path: not sent";
      return complete(job, std::move(res));
    }
    std::string_view bad;
    if (!requestHead(request, u, head_scratch, bad)) {
      // An API key variable with a pasted newline: refused, never sent.
      res.error =
          "header '" + logText(std::string(bad), 40) + "' holds a CR, LF or NUL byte: not sent";
      return complete(job, std::move(res));
    }
    auto& pool = poolOf(u.origin);
    // A second try (its pooled connection was closed by the server) goes on a fresh one: the
    // other idle connections were most likely closed with it.
    while (!pool.empty() && !job.second_try) {
      Conn* conn = pool.back();
      pool.pop_back();
      if (!nothingPending(*conn)) {  // bytes came while idle: never a reply
        close(conn);
        // Plain HTTP: a response to no request, the host's other connections are suspect
        // (kStray). TLS: most likely the server's close_notify alert as it closes an idle
        // connection (tested); that connection alone goes, unread.
        if (!conn->tls) {
          stray(u.origin);
          break;
        }
        continue;
      }
      conn->head.swap(head_scratch);
      conn->job.emplace(std::move(job));
      conn->wake->cancel();  // its loop takes the job
      return;
    }
    auto conn = std::make_unique<Conn>();
    conn->origin.assign(u.origin);
    conn->head.swap(head_scratch);
    asio::co_spawn(io, open(std::move(conn), std::move(job)), [](const std::exception_ptr& e) {
      if (e) std::rethrow_exception(e);  // a `done` that threw: out of the client thread
    });
  }

  asio::awaitable<void> open(std::unique_ptr<Conn> conn, Job job) {
    HttpResponse res;
    try {
      Url u;
      parseUrl(job.request->url, u);  // checked by dispatch()
      co_await connect(*conn, u, job.deadline);
    } catch (const boost::system::system_error& e) {
      res.timed_out = e.code() == beast::error::timeout ||
                      (e.code() == asio::error::operation_aborted && Steady::now() >= job.deadline);
      res.error = e.what();
      co_return complete(job, std::move(res));
    } catch (const std::exception& e) {
      res.error = e.what();
      co_return complete(job, std::move(res));
    }
    conn->wake.emplace(io);
    if (conn->tls) {
      auto& stream = *conn->tls;
      co_await serve(std::move(conn), stream, std::move(job), false);
    } else {
      auto& stream = *conn->tcp;
      co_await serve(std::move(conn), stream, std::move(job), false);
    }
  }

  asio::awaitable<void> connect(Conn& conn, const Url& u, Steady::time_point deadline) {
    tcp::resolver resolver(io);
    asio::steady_timer resolve_timer(io, deadline);
    resolve_timer.async_wait([&resolver](const boost::system::error_code& ec) {
      if (!ec) resolver.cancel();  // a DNS lookup must not outlive the deadline
    });
    auto endpoints = co_await resolver.async_resolve(u.host, u.port, asio::use_awaitable);
    const std::string host(u.host);
    resolve_timer.cancel();
    if (!u.tls) {
      conn.tcp = std::make_unique<beast::tcp_stream>(io);
      conn.tcp->expires_at(deadline);
      co_await conn.tcp->async_connect(endpoints, asio::use_awaitable);
      co_return;
    }
    conn.tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, ssl_ctx);
    // SNI, so virtual-hosted endpoints present the right certificate.
    if (!SSL_set_tlsext_host_name(conn.tls->native_handle(), host.c_str()))
      throw boost::system::system_error(boost::system::error_code(
          static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
    if (options.verify_peer) {
      conn.tls->set_verify_mode(ssl::verify_peer);
      conn.tls->set_verify_callback(ssl::host_name_verification(host));
    } else {
      conn.tls->set_verify_mode(ssl::verify_none);
    }
    beast::get_lowest_layer(*conn.tls).expires_at(deadline);
    co_await beast::get_lowest_layer(*conn.tls).async_connect(endpoints, asio::use_awaitable);
    co_await conn.tls->async_handshake(ssl::stream_base::client, asio::use_awaitable);
  }

  /// The connection's life: writes each request handed to it and reads its final response
  /// (interim 1xx responses, 100 Continue, 102 Processing, 103 Early Hints: RFC 9110, section
  /// 15.2, are skipped, at most kMaxInterim; 101 is an error: no upgrade was asked for), then
  /// waits in the pool for the next one. The response is read step by step, so that the body
  /// cap holds whatever the framing (Content-Length, chunked, until the end of the
  /// connection). The connection carries the next request only when the server keeps it
  /// alive and nothing follows the response, in the read buffer, in TLS's buffer or in the
  /// socket; a byte there is a response to no request (kStray), which the next call would read
  /// as its own. One coroutine for all of it: a request costs no coroutine frame of its own.
  template <typename Stream>
  asio::awaitable<void> serve(std::unique_ptr<Conn> conn, Stream& stream, Job job, bool reused) {
    for (;;) {
      HttpResponse res;
      bool responded = false;  // a byte of a response came on this connection
      After after = After::kClose;
      try {
        conn->lowest().expires_at(job.deadline);
        // The body is read where the caller keeps it. Plain TCP: the head and the body in one
        // gathered write, first at once (a request fits the socket's send buffer: no
        // asynchronous operation to allocate and complete), then what is left asynchronously.
        // TLS: one write each (Beast 1.74's ssl_stream, given both as one sequence past 16 KiB,
        // left the body's end unsent: a request that timed out, tested).
        const std::string& body = job.request->body;
        if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
          const std::array<asio::const_buffer, 2> request{asio::buffer(conn->head),
                                                          asio::buffer(body)};
          auto& socket = stream.socket();
          boost::system::error_code ec;
          if (!socket.non_blocking()) socket.non_blocking(true, ec);  // never waits here
          const std::size_t sent = ec ? 0 : socket.write_some(request, ec);
          if (ec && ec != asio::error::would_block) throw boost::system::system_error(ec);
          if (sent < conn->head.size() + body.size()) {
            beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(request);
            rest.consume(sent);
            co_await asio::async_write(stream, rest, asio::use_awaitable);
          }
        } else {
          co_await asio::async_write(stream, asio::buffer(conn->head), asio::use_awaitable);
          co_await asio::async_write(stream, asio::buffer(body), asio::use_awaitable);
        }
        const auto written = Steady::now();
        beast::flat_buffer& buffer = conn->buffer;
        for (int interim = 0;; ++interim) {
          http::response_parser<http::string_body> parser;
          parser.body_limit(kMaxReplyBytes);
          struct Counted {  // this call's share of reading_bytes, given back however it ends
            std::size_t& total;
            std::size_t mine = 0;
            ~Counted() { total -= mine; }
          } counted{reading_bytes};
          while (!parser.is_done()) {
            boost::system::error_code ec;
            co_await http::async_read_some(stream, buffer, parser,
                                           asio::redirect_error(asio::use_awaitable, ec));
            responded = responded || parser.got_some() || buffer.size() != 0;
            if (ec) throw boost::system::system_error(ec);
            if (!parser.is_header_done()) continue;
            const std::size_t size = parser.get().body().size();
            if (size > kMaxReplyBytes) throw boost::system::system_error(http::error::body_limit);
            reading_bytes += size - counted.mine;
            counted.mine = size;
            if (reading_bytes > kMaxReadingBytes)
              throw boost::system::system_error(http::error::body_limit,
                                                "the replies being read hold 64 MiB");
          }
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
          keepHeaders(msg, res);
          after = buffer.size() != 0 || !nothingPending(*conn) ? After::kStray
                  : msg.keep_alive()                           ? After::kReuse
                                                               : After::kClose;
          break;
        }
      } catch (const boost::system::system_error& e) {
        res.timed_out =
            e.code() == beast::error::timeout ||
            (e.code() == asio::error::operation_aborted && Steady::now() >= job.deadline);
        res.error = e.what();  // the code's message, after what a step added ("101 without…")
        res.status = 0;
        res.reused_connection = reused;
        // A pooled connection the server closed meanwhile fails at once: try another. Not once
        // a byte of a response came: the provider answered (and may have billed) this
        // request, so the attempt's failure goes to the caller, whose retries count.
        if (reused && !responded && !res.timed_out && Steady::now() < job.deadline &&
            !job.second_try) {
          job.second_try = true;
          dispatch(std::move(job));
        } else {
          complete(job, std::move(res));
        }
        co_return;  // the connection is dropped
      } catch (const std::exception& e) {
        res.status = 0;
        res.error = e.what();
        complete(job, std::move(res));
        co_return;
      }
      if (!finishExchange(*conn, job, std::move(res), after, reused)) co_return;
      conn->wake->expires_at(Steady::time_point::max());
      while (!conn->job && !conn->closing) {
        boost::system::error_code ec;
        co_await conn->wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      if (conn->closing) co_return;
      job = std::move(*conn->job);
      conn->job.reset();
      reused = true;
    }
  }

  /// The response headers options.kept_headers names (all when empty), names lower-cased.
  void keepHeaders(const http::response<http::string_body>& msg, HttpResponse& res) const {
    const auto& kept = options.kept_headers;
    for (const auto& f : msg) {
      if (!kept.empty() && std::none_of(kept.begin(), kept.end(), [&f](const std::string& k) {
            return beast::iequals(k, f.name_string());
          }))
        continue;
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      res.headers[name] = std::string(f.value());
    }
  }

  /// An exchange that got its response: ends `job` with it, and says whether `conn` is put
  /// in the idle pool (it is then there, its deadline off) or dropped. A stray byte after the
  /// reply (kStray) bans the host's reuse and, on a reused connection, fails the call.
  bool finishExchange(Conn& conn, Job& job, HttpResponse res, After after, bool reused) {
    res.reused_connection = reused;
    const std::string& key = conn.origin;
    if (after == After::kStray) {
      stray(key);
      if (reused) {
        // Two responses where one was asked for: the first may be an earlier request's,
        // sent late. Which one answers this request is unknown, so neither is taken.
        res = HttpResponse{};
        res.reused_connection = true;
        res.error =
            "a second response followed the reply on a reused connection (the server sent a "
            "response to no request): the reply is not taken; this host's connections are "
            "not reused for 10 minutes";
      }
      complete(job, std::move(res));  // a fresh connection's first response answers it
      return false;
    }
    const auto banned = no_reuse_until.find(key);
    if (banned != no_reuse_until.end() && Steady::now() >= banned->second)
      no_reuse_until.erase(banned);
    const bool reusable = after == After::kReuse && !no_reuse_until.contains(key);
    complete(job, std::move(res));
    auto& pool = poolOf(key);
    if (!reusable || pool.size() >= max_idle.load(std::memory_order_relaxed)) return false;
    // Idle: in the pool until dispatch() hands it a request, or it is closed. A read buffer a
    // long header grew (up to kMaxReadBuffer) is not kept while idle.
    if (conn.buffer.capacity() > (64u << 10)) conn.buffer.shrink_to_fit();
    conn.lowest().expires_never();
    pool.push_back(&conn);
    return true;
  }

  /// True when no byte waits on `conn` (the socket, and OpenSSL's decrypted buffer).
  static bool nothingPending(Conn& conn) {
    boost::system::error_code ec;
    const auto in_socket = conn.lowest().socket().available(ec);
    return !ec && in_socket == 0 && (!conn.tls || SSL_pending(conn.tls->native_handle()) == 0);
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
  Job job;
  job.start = Steady::now();
  job.deadline = job.start + request->timeout;
  job.request = std::move(request);
  job.done = std::move(done);
  impl_->submit(std::move(job));
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
