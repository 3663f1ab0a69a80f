#pragma once
/// Assembles RAG events from OpenTelemetry spans (kafka.format otlp_json | otlp_proto;
/// docs/events.md, "OpenTelemetry traces"). One Kafka message holds spans of many traces and
/// the spans of one trace may arrive over several messages, in any order. Spans wait, per
/// partition, in a map keyed by trace id:
///  - a trace is **complete** once its root span, a retrieval span and an LLM span are in
///    (checked after each message is merged whole): it becomes an event at once (id = the
///    trace id in lower-case hex, question and contexts from the retrieval span, answer and
///    model from the LLM span; of several spans of a role that arrived by then, the one that
///    ended last);
///  - otherwise it waits `otlp.join_timeout_s` after its last span, then: with an answer and
///    a question, it is judged with what it has (`incomplete: judge`, the default: no
///    retrieval span → no contexts, and the judges say `no_context`) or counted
///    (`incomplete: count`); without an answer or a question it is counted;
///  - at most `otlp.max_traces` traces and `otlp.max_bytes` bytes of text wait: beyond, the
///    one whose last span is oldest is evicted (counted);
///  - spans of a trace that finished a moment ago (the last 10,000 per partition) are late:
///    dropped and counted, never a second event.
/// A trace whose id the sampler rejects is dropped span by span, never kept.
///
/// Offsets: each message is finished once every trace it contributed spans to is finished
/// (its event judged and written, or counted). MessageRefs counts them, so that an offset is
/// stored only then and a restart re-reads every message of an unfinished trace.
///
/// The join runs on the poll thread; MessageRefs is thread-safe (workers and delivery
/// reports release).

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/event.hpp"
#include "sources/offset_tracker.hpp"
#include "sources/otlp_decode.hpp"
#include "sources/trace_mapping.hpp"

namespace assay {

/// How many unfinished traces each message still feeds. Thread-safe.
class MessageRefs {
 public:
  /// The message feeds `traces` (> 0) traces.
  void hold(MessageRef m, std::size_t traces);
  /// One of its traces finished; true when it was the last (the message is finished).
  bool release(MessageRef m);
  /// Forgets partitions (revoked): later releases for them return false.
  void forget(const std::vector<std::int32_t>& partitions);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::int32_t, std::int64_t>, std::size_t> counts_;
};

struct TraceJoinOptions {
  TraceMapping mapping;
  std::chrono::milliseconds timeout{30'000};
  std::chrono::milliseconds max_age{300'000};  ///< after the first span, whatever arrives
  std::size_t max_traces = 10'000;
  std::size_t max_bytes = 64u << 20;
  bool judge_incomplete = true;
};

/// A trace that left the join.
struct FinishedTrace {
  enum class How {
    kComplete,    ///< root, retrieval and LLM spans: an event
    kIncomplete,  ///< timed out; `event` set when judged with what it has
    kEvicted,     ///< over max_traces / max_bytes: no event
  };
  How how = How::kComplete;
  std::optional<Event> event;  ///< set for kComplete, and for kIncomplete when judged
  /// kIncomplete: what was missing, a label value: no_answer, no_question, no_retrieval
  /// (counted without an event under `incomplete: count`), or the same with an event.
  const char* missing = "";
  std::vector<MessageRef> messages;  ///< every message that held one of its spans
  double wait_s = 0;                 ///< first span → leaving the join, seconds
  bool any_role = false;             ///< some span was a retrieval or LLM span under the mapping
  std::string trace_id;              ///< lower-case hex (for logs)
  bool aged_out = false;             ///< kIncomplete because max_age passed while spans kept coming
};

class TraceJoin {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TraceJoin(TraceJoinOptions o);

  struct Added {
    std::size_t spans = 0;        ///< spans in the message
    std::size_t sampled_out = 0;  ///< of them, of traces the sampler rejects: not kept
    std::size_t late = 0;         ///< of them, of traces already finished: dropped
    std::size_t traces = 0;       ///< distinct waiting traces the message now feeds
    /// Traces new in this message's partition whose id waits, or just finished, in another
    /// partition: one trace split across partitions (a Collector's Kafka exporter without
    /// partition_traces_by_id), judged in halves.
    std::size_t split = 0;
  };
  /// Adds the spans of the message at (partition, offset). `keep(trace_id_hex)` is the
  /// sampler's screen. Traces that completed are appended to `done`, so are the ones evicted
  /// to make room. Added::traces == 0 means the message is finished already; otherwise the
  /// caller holds it in MessageRefs for that many traces (before handling `done`).
  Added add(const otlp::Batch& batch, MessageRef at,
            const std::function<bool(const std::string&)>& keep, std::vector<FinishedTrace>& done,
            Clock::time_point now = Clock::now());
  /// Traces whose last span is older than the timeout leave (incomplete), oldest first; so do
  /// traces whose first span is older than max_age, however recent their last (aged_out).
  void expire(std::vector<FinishedTrace>& done, Clock::time_point now = Clock::now());
  /// Drops the waiting traces of revoked partitions (their messages are read again by the
  /// partition's next owner).
  void forget(const std::vector<std::int32_t>& partitions);

  std::size_t traces() const { return lru_.size(); }
  std::size_t bytes() const { return bytes_; }
  /// The oldest waiting trace's last span, if any (for --exit-when-idle and tests).
  std::optional<Clock::time_point> oldest() const;

 private:
  struct Key {
    std::int32_t partition = 0;
    std::array<std::uint8_t, 16> trace_id{};
    bool operator==(const Key& o) const {
      return partition == o.partition && trace_id == o.trace_id;
    }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Pending {
    Key key;
    bool root = false, retrieval = false, generation = false;
    bool any_role = false;  // a span had a retrieval or LLM role
    std::uint64_t retrieval_end = 0, generation_end = 0;
    std::string root_question, retrieval_question, generation_question;
    std::vector<Context> contexts;
    std::string answer, model;
    std::string tenant, app, variant;
    std::optional<std::string> reference;
    std::vector<MessageRef> messages;
    std::size_t bytes = 0;
    Clock::time_point first, last;
    std::list<std::list<Pending>::iterator>::iterator born;  // its place in born_
  };
  using List = std::list<Pending>;

  void merge(Pending& p, const otlp::Span& s, SpanParts&& parts);
  FinishedTrace finish(List::iterator it, FinishedTrace::How how, Clock::time_point now);
  void remember(const Key& k);

  TraceJoinOptions o_;
  List lru_;  // least recently updated first
  std::unordered_map<Key, List::iterator, KeyHash> index_;
  /// The waiting traces in the order they came in (by first span): what max_age looks at.
  std::list<List::iterator> born_;
  std::size_t bytes_ = 0;
  std::vector<List::iterator> touched_;  // add(): the traces the message fed, in order
  // Recently finished traces per partition, to drop their late spans (bounded FIFO).
  struct Recent {
    std::unordered_set<Key, KeyHash> set;
    std::deque<Key> order;
  };
  std::unordered_map<std::int32_t, Recent> recent_;
  std::set<std::int32_t> partitions_;  // partitions that have had a trace (split detection)
};

}  // namespace assay
