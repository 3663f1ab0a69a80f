#pragma once
/// HTTP/1.1 client for LLM providers: HTTPS (OpenSSL) with certificate and host-name
/// verification on by default, SNI, a keep-alive connection pool per host, and a deadline on
/// every step (resolve, connect, TLS handshake, write, read). Requests run on one io_context
/// thread owned by the client, each keep-alive connection as one C++20 coroutine that writes
/// the requests handed to it and reads their responses; `submit` never blocks the caller (it
/// queues the request, and one posted drain hands the queued ones to idle connections or new
/// ones). Boost.Beast stays inside http_client.cpp.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assay::llm {

struct HttpRequest {
  std::string url;  ///< http://host[:port]/path or https://host[:port]/path
  std::string method = "POST";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{30'000};  ///< the whole exchange, every step included
};

struct HttpResponse {
  int status = 0;  ///< 0: no response (see error / timed_out)
  std::string body;
  std::map<std::string, std::string> headers;  ///< names lower-cased
  bool timed_out = false;
  std::string error;  ///< connection/TLS/protocol error, empty on success
  std::chrono::milliseconds elapsed{0};
  /// From the request's last byte written to the response's last byte read, on the client's
  /// clock: the provider's handling and the network round trip, none of assay's own time
  /// (0 when no response came). The dispatch benchmark subtracts it.
  std::chrono::nanoseconds on_wire{0};
  bool reused_connection = false;
};

struct HttpClientOptions {
  std::string ca_file;      ///< PEM bundle to trust instead of the system store ("" = system)
  bool verify_peer = true;  ///< certificate chain and host name; off only for local tests
  /// Idle keep-alive connections kept per host (raised by keepIdle()).
  std::size_t max_idle_per_host = 8;
  /// The response headers HttpResponse::headers keeps (lower-case names); empty: all of them.
  /// A provider's reply carries twenty or more (rate limits, request ids, proxies'): the LLM
  /// judges keep only those they read.
  std::vector<std::string> kept_headers;
};

class HttpClient {
 public:
  /// Throws std::runtime_error when `ca_file` cannot be loaded (start-up only).
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();  ///< stop()
  /// Stops the thread: requests in flight and timers are abandoned (their callbacks never run);
  /// later submit() and schedule() calls are accepted and never run either. Idempotent.
  void stop();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Starts `request`; `done` runs on the client's thread with the response or the failure.
  void submit(HttpRequest request, std::function<void(HttpResponse)> done);
  /// The same, the request read where the caller keeps it (no copy of its body): it must not
  /// change until `done` runs.
  void submit(std::shared_ptr<const HttpRequest> request, std::function<void(HttpResponse)> done);
  /// Blocking form of submit, for tools and tests (never after stop()).
  HttpResponse send(HttpRequest request);
  /// Runs `fn` on the client's thread after `delay` (retry backoff, rate-limit waits), without
  /// blocking any thread meanwhile. Abandoned, like requests, when the client is destroyed.
  void schedule(std::chrono::milliseconds delay, std::function<void()> fn);
  /// Keeps at least `n` idle connections per host from now on (a judge with max_in_flight n:
  /// a wave of n calls then reuses its connections instead of opening n again, and a TLS
  /// handshake costs a round trip and about a millisecond of CPU). Any thread.
  void keepIdle(std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A byte never sent in a URL's path or query: a space or a control character would end the
/// request line early or start a header of its own (RFC 9112, section 3), and a fragment ('#')
/// is never sent. The client refuses such a URL; the config check refuses such an endpoint.
bool refusedInUrl(char c);

/// Whether two URLs have the same scheme and authority (host and port, as written; lower and
/// upper case differ): a URL a provider's reply names is followed only on the endpoint's origin.
/// False when either has no "scheme://".
bool sameOrigin(std::string_view a, std::string_view b);

/// Why `path` cannot serve as a client's `ca_file` ("" when it can): it cannot be read, or
/// OpenSSL finds no PEM certificate in it. Loads it as HttpClient does.
std::string caFileProblem(const std::string& path);

}  // namespace assay::llm
