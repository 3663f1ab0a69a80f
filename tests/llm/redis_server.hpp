#pragma once
// Test fixture: a real redis-server on a free loopback port (the budget and A/B store tests).
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace assay::test {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// A real redis-server for the tests.

/// A loopback port nothing listens on (bound to port 0, then closed).
inline int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  REQUIRE(ok);
  return ntohs(addr.sin_port);
}

/// Sends inline commands ("PING", "SELECT 3") on one loopback connection; returns the first line
/// of the last reply ("+PONG", ":1"), or "" if the server does not answer.
inline std::string rawCommands(int port, const std::vector<std::string>& commands) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string line;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    for (const std::string& c : commands) {
      const std::string wire = c + "\r\n";
      if (::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(wire.size())) {
        line.clear();
        break;
      }
      line.clear();
      char ch = 0;
      while (::recv(fd, &ch, 1, 0) == 1 && ch != '\n') {
        if (ch != '\r') line.push_back(ch);
      }
      // Bulk replies ("$5"): read the payload line too, so the next reply starts clean.
      if (line.size() > 1 && line[0] == '$' && line != "$-1") {
        std::string payload;
        while (::recv(fd, &ch, 1, 0) == 1 && ch != '\n') {
          if (ch != '\r') payload.push_back(ch);
        }
        line = payload;
      }
    }
  }
  ::close(fd);
  return line;
}

/// One redis-server process in a temporary directory, on a loopback port, persisting nothing.
/// A missing binary FAILS the test that asked for the server (it does not skip).
class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";

  explicit RedisServer(std::vector<std::string> extra_args = {})
      : extra_args_(std::move(extra_args)) {
    std::signal(SIGPIPE, SIG_IGN);  // as assayd does: a closed connection is an error, not death
    if (::access(kBinary, X_OK) != 0) {
      FAIL("redis-server not found at " << kBinary
                                        << ": install the Debian package redis-server (run "
                                           "scripts/setup); the budget tests need a real Redis");
    }
    char dir[] = "/tmp/assay-budget-redis-XXXXXX";
    REQUIRE_MESSAGE(::mkdtemp(dir) != nullptr, "mkdtemp: " << std::strerror(errno));
    dir_ = dir;
    port_ = freePort();
    start();
  }
  ~RedisServer() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Sends `sig` to the server (SIGSTOP: a hung Redis; SIGCONT: back).
  void signal(int sig) {
    REQUIRE(pid_ != 0);
    ::kill(pid_, sig);
  }

  /// Starts the server on port() and waits until it answers PING (10 s at most).
  void start() {
    REQUIRE(pid_ == 0);
    std::vector<std::string> args = {kBinary,  "--port",       std::to_string(port_),
                                     "--bind", "127.0.0.1",    "--save",
                                     "",       "--appendonly", "no",
                                     "--dir",  dir_.string(),  "--logfile",
                                     log(),    "--daemonize",  "no"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    REQUIRE_MESSAGE(pid >= 0, "fork: " << std::strerror(errno));
    if (pid == 0) {
      // Dies with the test binary even if it crashes before stop().
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execv(kBinary, argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    // With --requirepass, PING answers -NOAUTH: the server is up all the same.
    for (std::string pong;
         (pong = rawCommands(port_, {"PING"})) != "+PONG" && !pong.starts_with("-NOAUTH");) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        FAIL("redis-server exited at start-up (status " << status << "); log:\n" << logText());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        FAIL("redis-server did not answer PING on port " << port_ << " within 10 s; log:\n"
                                                         << logText());
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  /// SIGTERM, then SIGKILL after 5 s; reaps the process.
  void stop() {
    if (pid_ == 0) return;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    pid_ = 0;
  }

  int port() const { return port_; }
  std::string url(int db = 0) const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
  }
  bool flushAll() { return rawCommands(port_, {"FLUSHALL"}) == "+OK"; }

 private:
  std::string log() const { return (dir_ / "redis.log").string(); }
  std::string logText() const {
    std::ifstream in(log());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::vector<std::string> extra_args_;
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace assay::test
