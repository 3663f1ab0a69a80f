// A Kafka cluster in its own process for the integration tests: librdkafka's mock cluster
// (real Kafka protocol endpoints on loopback TCP). Prints the bootstrap addresses on stdout,
// creates the topics given as TOPIC:PARTITIONS[@BROKER] arguments (@BROKER: every partition's
// leader is that broker id, 1-based), and runs until SIGTERM/SIGINT or until its standard
// input closes. Lines on standard input: "down [ID]" takes broker ID (default 1) down
// (connections refused and closed, as a dead broker), "up [ID]" brings it back.
//   usage: assay_mock_broker [--brokers N] [--coordinator GROUP@BROKER] [TOPIC:PARTITIONS[@B] ...]
// --brokers N: a cluster of N brokers (default 1). --coordinator: the consumer group GROUP's
// coordinator is broker B (so that taking another broker down leaves the group alone).

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
  int brokers = 1;
  std::vector<std::string> topics, coordinators;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--brokers" && i + 1 < argc)
      brokers = std::atoi(argv[++i]);
    else if (arg == "--coordinator" && i + 1 < argc)
      coordinators.emplace_back(argv[++i]);
    else
      topics.push_back(arg);
  }
  rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(rk, brokers > 0 ? brokers : 1);
  if (!mc) {
    std::fprintf(stderr, "mock_broker: cannot create the mock cluster\n");
    return 1;
  }
  for (const auto& spec : topics) {
    std::string arg = spec;
    int leader = 0;
    if (const auto at = arg.rfind('@'); at != std::string::npos) {
      leader = std::atoi(arg.c_str() + at + 1);
      arg.resize(at);
    }
    const auto colon = arg.rfind(':');
    const std::string topic = arg.substr(0, colon);
    int parts = colon == std::string::npos ? 1 : std::atoi(arg.c_str() + colon + 1);
    if (parts < 1) parts = 1;
    if (rd_kafka_mock_topic_create(mc, topic.c_str(), parts, 1)) {
      std::fprintf(stderr, "mock_broker: cannot create topic %s\n", topic.c_str());
      return 1;
    }
    for (int p = 0; leader > 0 && p < parts; ++p) {
      if (rd_kafka_mock_partition_set_leader(mc, topic.c_str(), p, leader)) {
        std::fprintf(stderr, "mock_broker: cannot make broker %d lead %s\n", leader, spec.c_str());
        return 1;
      }
    }
  }
  for (const auto& spec : coordinators) {
    const auto at = spec.rfind('@');
    if (at == std::string::npos ||
        rd_kafka_mock_coordinator_set(mc, "group", spec.substr(0, at).c_str(),
                                      std::atoi(spec.c_str() + at + 1))) {
      std::fprintf(stderr, "mock_broker: bad --coordinator %s\n", spec.c_str());
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
        const std::string verb = cmd.substr(0, cmd.find(' '));
        const int id = cmd.size() > verb.size() ? std::atoi(cmd.c_str() + verb.size() + 1) : 1;
        if (verb == "down" || verb == "up") {
          if (verb == "down")
            rd_kafka_mock_broker_set_down(mc, id);
          else
            rd_kafka_mock_broker_set_up(mc, id);
          std::fprintf(stderr, "mock_broker: broker %d %s\n", id, verb.c_str());
        }
      }
    }
  }
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
