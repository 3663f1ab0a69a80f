// A Kafka broker in its own process for the integration tests: librdkafka's mock cluster
// (a real Kafka protocol endpoint on loopback TCP). Prints the bootstrap address on stdout,
// creates the topics given as TOPIC:PARTITIONS arguments, and runs until SIGTERM/SIGINT or
// until its standard input closes. Lines on standard input: "down" takes the broker down
// (connections refused and closed, as a dead broker), "up" brings it back.
//   usage: assay_mock_broker [TOPIC:PARTITIONS ...]

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
volatile std::sig_atomic_t g_stop = 0;
void onSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!rk) {
    std::fprintf(stderr, "mock_broker: %s\n", err);
    return 1;
  }
  rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(rk, 1);
  if (!mc) {
    std::fprintf(stderr, "mock_broker: cannot create the mock cluster\n");
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const auto colon = arg.rfind(':');
    const std::string topic = arg.substr(0, colon);
    const int parts = colon == std::string::npos ? 1 : std::atoi(arg.c_str() + colon + 1);
    if (rd_kafka_mock_topic_create(mc, topic.c_str(), parts > 0 ? parts : 1, 1)) {
      std::fprintf(stderr, "mock_broker: cannot create topic %s\n", topic.c_str());
      return 1;
    }
  }
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  std::printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
  std::fflush(stdout);
  std::string line;
  while (!g_stop) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      char buf[64];
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n <= 0) break;  // parent went away
      line.append(buf, static_cast<std::size_t>(n));
      for (auto nl = line.find('\n'); nl != std::string::npos; nl = line.find('\n')) {
        const std::string cmd = line.substr(0, nl);
        line.erase(0, nl + 1);
        if (cmd == "down" || cmd == "up") {
          if (cmd == "down")
            rd_kafka_mock_broker_set_down(mc, 1);
          else
            rd_kafka_mock_broker_set_up(mc, 1);
          std::fprintf(stderr, "mock_broker: broker %s\n", cmd.c_str());
        }
      }
    }
  }
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
