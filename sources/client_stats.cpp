#include "sources/client_stats.hpp"

#include <librdkafka/rdkafka.h>
#include <rapidjson/document.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/clock.hpp"

namespace assay {
namespace {

prometheus::Gauge& gauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

ProcessStats::ProcessStats(prometheus::Registry& r)
    : cpu_(prometheus::BuildCounter()
               .Name("process_cpu_seconds_total")
               .Help("Total user and system CPU time spent in seconds")
               .Register(r)
               .Add({})),
      resident_(gauge(r, "process_resident_memory_bytes", "Resident memory size in bytes")),
      virtual_(gauge(r, "process_virtual_memory_bytes", "Virtual memory size in bytes")),
      open_fds_(gauge(r, "process_open_fds", "Number of open file descriptors")),
      max_fds_(gauge(r, "process_max_fds", "Maximum number of open file descriptors")) {
  // Started now, for Prometheus' purposes: the daemon builds its registry first thing. (The
  // kernel's start time needs /proc/stat's boot time, which ProcSubset=pid hides.)
  gauge(r, "process_start_time_seconds", "Start time of the process since unix epoch in seconds")
      .Set(epochSeconds());
  refresh();
}

void ProcessStats::refresh() {
  // /proc/self/stat (proc(5)): the command is in parentheses and may hold spaces; fields after
  // it: 3 state ... 14 utime, 15 stime (clock ticks), 23 vsize (bytes), 24 rss (pages).
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    if (f.size() >= 22) {  // f[0] is field 3
      const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      if (cpu > cpu_seen_s_) cpu_.Increment(cpu - cpu_seen_s_);
      cpu_seen_s_ = std::max(cpu_seen_s_, cpu);
      virtual_.Set(std::stod(f[20]));
      resident_.Set(std::stod(f[21]) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
    }
  }
  std::error_code ec;
  std::size_t fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++fds;
  if (!ec) open_fds_.Set(static_cast<double>(fds > 0 ? fds - 1 : 0));  // minus the iterator's
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0)
    max_fds_.Set(rl.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(rl.rlim_cur));
}

KafkaClientStats::KafkaClientStats(prometheus::Registry& r)
    : broker_up_(prometheus::BuildGauge()
                     .Name("assay_kafka_broker_up")
                     .Help("1 while librdkafka's connection to the broker is UP (statistics)")
                     .Register(r)),
      rtt_(prometheus::BuildGauge()
               .Name("assay_kafka_broker_rtt_seconds")
               .Help("Average request round trip to the broker over the last statistics "
                     "interval")
               .Register(r)),
      fetch_queue_(prometheus::BuildGauge()
                       .Name("assay_kafka_fetch_queue_messages")
                       .Help("Messages fetched from the topic and not yet consumed")
                       .Register(r)),
      producer_queue_(gauge(r, "assay_kafka_producer_queue_messages",
                            "Messages produced (results, dead letters) and not yet acknowledged")) {
}

bool KafkaClientStats::update(std::string_view json, const std::string& client) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
  if (d.HasParseError() || !d.IsObject()) return false;
  std::lock_guard lock(mu_);
  if (const auto b = d.FindMember("brokers"); b != d.MemberEnd() && b->value.IsObject()) {
    int n = 0;
    for (const auto& [name, broker] : b->value.GetObject()) {
      if (++n > 64 || !broker.IsObject()) break;
      // Only the cluster's brokers ("learned", or "configured" bootstrap servers): not the
      // "logical" GroupCoordinator entry nor librdkafka's "internal" one.
      const auto source = broker.FindMember("source");
      if (source == broker.MemberEnd() || !source->value.IsString() ||
          (std::string_view(source->value.GetString()) != "learned" &&
           std::string_view(source->value.GetString()) != "configured"))
        continue;
      const auto nodeid = broker.FindMember("nodeid");
      if (nodeid == broker.MemberEnd() || !nodeid->value.IsInt() || nodeid->value.GetInt() < 0)
        continue;  // a bootstrap entry not yet resolved to a broker id
      const prometheus::Labels labels{{"client", client}, {"broker", name.GetString()}};
      const auto state = broker.FindMember("state");
      auto& up = broker_up_.Add(labels);
      up_gauges_.insert(&up);
      up.Set(state != broker.MemberEnd() && state->value.IsString() &&
                     std::string_view(state->value.GetString()) == "UP"
                 ? 1.0
                 : 0.0);
      const auto rtt = broker.FindMember("rtt");
      if (rtt != broker.MemberEnd() && rtt->value.IsObject()) {
        const auto avg = rtt->value.FindMember("avg");
        if (avg != rtt->value.MemberEnd() && avg->value.IsNumber())
          rtt_.Add(labels).Set(avg->value.GetDouble() / 1e6);  // microseconds
      }
    }
  }
  if (client == "producer") {
    const auto msgs = d.FindMember("msg_cnt");
    if (msgs != d.MemberEnd() && msgs->value.IsNumber())
      producer_queue_.Set(msgs->value.GetDouble());
    return true;
  }
  if (const auto t = d.FindMember("topics"); t != d.MemberEnd() && t->value.IsObject()) {
    for (const auto& [name, topic] : t->value.GetObject()) {
      if (!topic.IsObject()) continue;
      const auto parts = topic.FindMember("partitions");
      if (parts == topic.MemberEnd() || !parts->value.IsObject()) continue;
      double queued = 0;
      for (const auto& [id, p] : parts->value.GetObject()) {
        if (!p.IsObject()) continue;
        const auto q = p.FindMember("fetchq_cnt");
        if (q != p.MemberEnd() && q->value.IsNumber()) queued += q->value.GetDouble();
      }
      fetch_queue_.Add({{"topic", name.GetString()}}).Set(queued);
    }
  }
  return true;
}

void KafkaClientStats::allBrokersDown() {
  std::lock_guard lock(mu_);
  for (auto* g : up_gauges_) g->Set(0);
}

int KafkaClientStats::statsCallback(rd_kafka_t* rk, char* json, std::size_t len, void* opaque) {
  if (opaque)
    static_cast<KafkaClientStats*>(opaque)->update(
        std::string_view(json, len),
        rd_kafka_type(rk) == RD_KAFKA_PRODUCER ? "producer" : "consumer");
  return 0;  // librdkafka frees the JSON
}

}  // namespace assay
