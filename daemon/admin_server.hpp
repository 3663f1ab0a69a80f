#pragma once
/// The admin HTTP endpoint (HTTP/1.1 on `admin.listen`): `GET /metrics` (Prometheus text format
/// 0.0.4), `GET /healthz` (200 while the process runs and `unhealthy()` says nothing, else 503),
/// `GET /readyz` (200 once `not_ready()` says so, else 503), `GET /v1/route` (the A/B router,
/// when experiments are configured). Runs on its own thread with Boost.Beast; the interface
/// keeps Beast out of every other translation unit.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace assay {

class AdminServer {
 public:
  struct Handlers {
    std::function<std::string()> metrics;  ///< body of /metrics
    /// Why the daemon is not ready ("" = ready): /readyz answers 503 with it, else 200.
    std::function<std::string()> not_ready;
    /// Why the daemon is not healthy ("" = healthy, also when empty): /healthz answers 503 with
    /// it, else 200. Answered from memory: never waits on a broker, Redis or a provider.
    std::function<std::string()> unhealthy;
    /// `GET /v1/route?QUERY` (the A/B router, daemon/ab/ab.hpp): (HTTP status, JSON body) from
    /// the query string; empty = 404 like any unknown path.
    std::function<std::pair<int, std::string>(std::string_view query)> route;
    /// Called on the admin thread with the number of /v1/route requests waiting each time it
    /// changes (a gauge); may be empty.
    std::function<void(int waiting)> routes_waiting;
  };
  /// Binds `listen` ("host:port", port 0 = any free port) and starts serving.
  /// Throws std::runtime_error naming the address when it cannot bind (start-up only).
  AdminServer(const std::string& listen, Handlers handlers);
  ~AdminServer();  ///< stops the thread
  /// The bound port (useful with port 0).
  unsigned short port() const;
  /// /v1/route requests received and not yet answered (0 to 256; beyond, 503): those waiting
  /// on the route thread, e.g. on a Redis that does not answer. Any thread.
  int routesWaiting() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace assay
