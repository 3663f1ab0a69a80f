#pragma once
// Test fixture: a test CA and a server certificate for "localhost" made with the openssl CLI,
// and the fake LLM provider (tests/tools/fake_llm_server.cpp) in its own process on a free
// loopback port. Everything is removed/stopped in the destructor.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

namespace assay::test {

class TestCa {
 public:
  TestCa() {
    dir_ = std::filesystem::temp_directory_path() / ("assay_ca_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const std::string d = dir_.string();
    const std::string cmd =
        "cd '" + d +
        "' && "
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
        "-out ca.pem -days 2 -subj '/CN=assay test CA' && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key "
        "-out server.csr -subj '/CN=localhost' && "
        "printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
        "extendedKeyUsage=serverAuth\\n' > ext.cnf && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile ext.cnf";
    if (std::system(("(" + cmd + ") > '" + d + "/openssl.log' 2>&1").c_str()) != 0)
      throw std::runtime_error("openssl could not make the test CA (see " + d + "/openssl.log)");
  }
  ~TestCa() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string caFile() const { return (dir_ / "ca.pem").string(); }
  std::string certFile() const { return (dir_ / "server.pem").string(); }
  std::string keyFile() const { return (dir_ / "server.key").string(); }

 private:
  std::filesystem::path dir_;
};

class FakeLlmServer {
 public:
  /// TLS when `ca` is given; `api_key` empty = no auth check; `extra`: more of the server's
  /// options (e.g. {"--delay-ms", "200"}).
  explicit FakeLlmServer(const TestCa* ca = nullptr, const std::string& api_key = "",
                         const std::vector<std::string>& extra = {}) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> args = {kFakeLlmServer, "--port", "0"};
    if (ca) args.insert(args.end(), {"--cert", ca->certFile(), "--key", ca->keyFile()});
    if (!api_key.empty()) args.insert(args.end(), {"--api-key", api_key});
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test (e.g. after an abort)
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::close(in[1]);
      ::close(out[0]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    FILE* f = ::fdopen(out[0], "r");
    unsigned port = 0;
    if (!f || std::fscanf(f, "LISTENING %u", &port) != 1)
      throw std::runtime_error("fake server did not start");
    std::fclose(f);
    port_ = static_cast<unsigned short>(port);
    tls_ = ca != nullptr;
  }
  ~FakeLlmServer() {
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  unsigned short port() const { return port_; }
  /// Base URL by host name (matches the test certificate).
  /// The server's process id (e.g. to read its CPU time in /proc).
  pid_t pid() const { return pid_; }
  std::string url(const std::string& path) const {
    return std::string(tls_ ? "https" : "http") + "://localhost:" + std::to_string(port_) + path;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  unsigned short port_ = 0;
  bool tls_ = false;
};

}  // namespace assay::test
