#include "sinks/registry.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sinks/jsonl_sink.hpp"

namespace assay {
namespace {

// The sink table: a new sink is one file set and one row here (docs/adding-a-sink.md).
const SinkRow kSinks[] = {
    {"jsonl", [](const SinksOptions& o, const SinkContext&) { return o.jsonl_enabled; },
     [](const SinksOptions& o, const SinkContext& c) -> std::unique_ptr<Sink> {
       return std::make_unique<JsonlSink>(o.jsonl, *c.stats);
     },
     [](const SinksOptions& o, const std::string& file, std::vector<ConfigError>& errors) {
       if (!o.jsonl_enabled || o.jsonl.path.empty()) return;
       if (const auto why = jsonlPathProblem(o.jsonl.path); !why.empty())
         errors.push_back({file, o.jsonl.path_line, o.jsonl.path_column, "sinks.jsonl.path", why});
     }},
    {"kafka",
     [](const SinksOptions&, const SinkContext& c) {
       return c.producer != nullptr && !c.results_topic.empty();
     },
     [](const SinksOptions&, const SinkContext& c) -> std::unique_ptr<Sink> {
       return std::make_unique<KafkaResultsSink>(c.producer, c.results_topic, *c.stats);
     },
     nullptr},  // kafka.results_topic: the Kafka clients' check (--check-config) covers it
};

}  // namespace

std::span<const SinkRow> sinkTable() { return kSinks; }

std::vector<ConfigError> checkSinks(const SinksOptions& options, const std::string& file) {
  std::vector<ConfigError> errors;
  for (const auto& row : kSinks)
    if (row.check) row.check(options, file, errors);
  return errors;
}

std::vector<std::unique_ptr<Sink>> createSinks(const SinksOptions& options,
                                               const SinkContext& ctx) {
  std::vector<std::unique_ptr<Sink>> out;
  for (const auto& e : kSinks)
    if (e.enabled(options, ctx)) out.push_back(e.create(options, ctx));
  return out;
}

Sinks::Sinks(const SinksOptions& options, const SinkContext& ctx)
    : Sinks(createSinks(options, ctx), options, *ctx.stats) {}

Sinks::Sinks(std::vector<std::unique_ptr<Sink>> sinks, const SinksOptions& options,
             SinkStats& stats)
    : stats_(stats) {
  for (auto& sink : sinks)
    sinks_.push_back(std::make_unique<QueuedSink>(std::move(sink), options, stats_));
}

void Sinks::deliver(const Judgment& j, const DeliveryToken& token) {
  if (!sinks_.empty()) {
    const auto record = std::make_shared<const SinkRecord>(SinkRecord{j, toJson(j)});
    for (auto& sink : sinks_) sink->write(record, token);
  }
  stats_.judged.Increment();
}

void Sinks::drain() {
  for (auto& sink : sinks_) sink->drain();
}

std::size_t Sinks::flush(std::chrono::milliseconds timeout) {
  std::size_t left = 0;
  for (auto& sink : sinks_)
    if (const std::size_t n = sink->flush(timeout); n > 0) {
      left += n;
      spdlog::error(
          "sink '{}': {} judgment(s) not written within {} s (a write that does not return: a "
          "FIFO without reader, a hung network file system?); their offsets are not committed, "
          "so they are judged again after a restart",
          sink->name(), n, std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
    }
  return left;
}

std::string Sinks::stuck(double after_s) const {
  std::string out;
  for (const auto& sink : sinks_)
    if (const auto [waiting, silent_s] = sink->behind(); waiting > 0 && silent_s >= after_s)
      out += fmt::format("{}sink '{}' has written nothing for {:.0f} s with {} judgment(s) waiting",
                         out.empty() ? "" : "; ", sink->name(), silent_s, waiting);
  return out;
}

void Sinks::reopen() {
  for (auto& sink : sinks_) sink->reopen();
}

bool Sinks::saturated() const {
  for (const auto& sink : sinks_)
    if (sink->saturated()) return true;
  return false;
}

}  // namespace assay
