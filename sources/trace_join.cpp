#include "sources/trace_join.hpp"

#include <xxhash.h>

#include <algorithm>

namespace assay {

// ---- MessageRefs ------------------------------------------------------------------------------

void MessageRefs::hold(MessageRef m, std::size_t traces) {
  std::lock_guard lock(mu_);
  counts_[{m.partition, m.offset}] += traces;
}

bool MessageRefs::release(MessageRef m) {
  std::lock_guard lock(mu_);
  const auto it = counts_.find({m.partition, m.offset});
  if (it == counts_.end()) return false;  // its partition was revoked meanwhile
  if (--it->second > 0) return false;
  counts_.erase(it);
  return true;
}

void MessageRefs::forget(const std::vector<std::int32_t>& partitions) {
  std::lock_guard lock(mu_);
  for (auto it = counts_.begin(); it != counts_.end();) {
    if (std::find(partitions.begin(), partitions.end(), it->first.first) != partitions.end())
      it = counts_.erase(it);
    else
      ++it;
  }
}

std::size_t MessageRefs::size() const {
  std::lock_guard lock(mu_);
  return counts_.size();
}

// ---- TraceJoin --------------------------------------------------------------------------------

namespace {

constexpr std::size_t kRecentPerPartition = 10'000;

std::size_t textBytes(const std::vector<Context>& contexts) {
  std::size_t n = 0;
  for (const auto& c : contexts)
    n += sizeof(Context) + c.id.size() + c.text.size() + c.source.size();
  return n;
}

}  // namespace

std::size_t TraceJoin::KeyHash::operator()(const Key& k) const {
  return static_cast<std::size_t>(XXH3_64bits_withSeed(k.trace_id.data(), k.trace_id.size(),
                                                       static_cast<std::uint64_t>(k.partition)));
}

TraceJoin::TraceJoin(TraceJoinOptions o) : o_(std::move(o)) {}

void TraceJoin::merge(Pending& p, const otlp::Span& s, SpanParts&& parts) {
  if (s.root) {
    p.root = true;
    if (!parts.question.empty()) p.root_question = std::move(parts.question);
  }
  if (parts.role == SpanParts::Role::kRetrieval && (!p.retrieval || s.end_ns >= p.retrieval_end)) {
    p.retrieval = true;
    p.retrieval_end = s.end_ns;
    p.contexts = std::move(parts.contexts);
    p.retrieval_question = std::move(parts.question);
  } else if (parts.role == SpanParts::Role::kGeneration &&
             (!p.generation || s.end_ns >= p.generation_end)) {
    p.generation = true;
    p.generation_end = s.end_ns;
    p.answer = std::move(parts.answer);
    p.model = std::move(parts.model);
    p.generation_question = std::move(parts.question);
  }
  // Tenant, app, variant: the root span's win; another span's fill what is still empty.
  for (auto [from, to] : {std::pair{&parts.tenant, &p.tenant}, std::pair{&parts.app, &p.app},
                          std::pair{&parts.variant, &p.variant}})
    if (!from->empty() && (s.root || to->empty())) *to = std::move(*from);
  if (parts.reference && (s.root || !p.reference)) p.reference = std::move(parts.reference);
  bytes_ -= p.bytes;
  p.bytes = sizeof(Pending) + p.root_question.size() + p.retrieval_question.size() +
            p.generation_question.size() + textBytes(p.contexts) + p.answer.size() +
            p.model.size() + p.tenant.size() + p.app.size() + p.variant.size() +
            (p.reference ? p.reference->size() : 0) + p.messages.capacity() * sizeof(MessageRef);
  bytes_ += p.bytes;
}

void TraceJoin::remember(const Key& k) {
  auto& r = recent_[k.partition];
  if (!r.set.insert(k).second) return;
  r.order.push_back(k);
  if (r.order.size() > kRecentPerPartition) {
    r.set.erase(r.order.front());
    r.order.pop_front();
  }
}

FinishedTrace TraceJoin::finish(List::iterator it, FinishedTrace::How how, Clock::time_point now) {
  Pending& p = *it;
  FinishedTrace f;
  f.how = how;
  f.messages = std::move(p.messages);
  f.wait_s = std::chrono::duration<double>(now - p.first).count();
  f.any_role = p.any_role;
  f.trace_id = otlp::hex(p.key.trace_id.data(), p.key.trace_id.size());
  if (how != FinishedTrace::How::kEvicted) {
    std::string& question = !p.retrieval_question.empty() ? p.retrieval_question
                            : !p.root_question.empty()    ? p.root_question
                                                          : p.generation_question;
    f.missing = !p.generation || p.answer.empty() ? "no_answer"
                : question.empty()                ? "no_question"
                : !p.retrieval                    ? "no_retrieval"
                                                  : "";
    const bool judged = f.missing[0] == '\0' ||
                        (o_.judge_incomplete && std::string_view(f.missing) == "no_retrieval");
    if (f.missing[0] == '\0') f.how = FinishedTrace::How::kComplete;  // only the root never came
    if (judged) {
      Event e;
      e.id = f.trace_id;
      e.question = std::move(question);
      e.contexts = std::move(p.contexts);
      e.answer = std::move(p.answer);
      e.model = std::move(p.model);
      e.tenant = std::move(p.tenant);
      e.app = std::move(p.app);
      e.variant = std::move(p.variant);
      e.reference = std::move(p.reference);
      f.event = std::move(e);
    }
  }
  remember(p.key);
  bytes_ -= p.bytes;
  index_.erase(p.key);
  born_.erase(p.born);
  lru_.erase(it);
  return f;
}

TraceJoin::Added TraceJoin::add(const otlp::Batch& batch, MessageRef at,
                                const std::function<bool(const std::string&)>& keep,
                                std::vector<FinishedTrace>& done, Clock::time_point now) {
  Added r;
  r.spans = batch.spans.size();
  std::string id;
  std::array<std::uint8_t, 16> last_rejected{};
  bool any_rejected = false;
  for (const auto& span : batch.spans) {
    const Key key{at.partition, span.trace_id};
    if (any_rejected && span.trace_id == last_rejected) {  // consecutive spans of one trace
      ++r.sampled_out;
      continue;
    }
    if (const auto rec = recent_.find(at.partition);
        rec != recent_.end() && rec->second.set.count(key)) {
      ++r.late;
      continue;
    }
    auto found = index_.find(key);
    if (found == index_.end()) {
      id = otlp::hex(span.trace_id.data(), span.trace_id.size());
      if (!keep(id)) {
        ++r.sampled_out;
        last_rejected = span.trace_id;
        any_rejected = true;
        continue;
      }
      // The same trace id waiting, or just finished, in another partition: split.
      partitions_.insert(at.partition);
      for (const std::int32_t other : partitions_) {
        if (other == at.partition) continue;
        const Key there{other, span.trace_id};
        const auto rec = recent_.find(other);
        if (index_.count(there) || (rec != recent_.end() && rec->second.set.count(there))) {
          ++r.split;
          break;
        }
      }
      Pending p;
      p.key = key;
      p.first = now;
      lru_.push_back(std::move(p));
      found = index_.emplace(key, std::prev(lru_.end())).first;
      born_.push_back(found->second);
      found->second->born = std::prev(born_.end());
    } else {
      lru_.splice(lru_.end(), lru_, found->second);  // most recently updated last
    }
    Pending& p = *found->second;
    p.last = now;
    if (p.messages.empty() || !(p.messages.back() == at)) {
      p.messages.push_back(at);
      ++r.traces;
      touched_.push_back(found->second);  // once per trace and message
    }
    auto parts = extractSpanParts(batch, span, o_.mapping);
    p.any_role = p.any_role || parts.role != SpanParts::Role::kOther;
    merge(p, span, std::move(parts));
  }
  // Completion is decided once the whole message is merged: a trace whose two LLM spans come
  // in one message takes the one that ended last, whatever their order in the message.
  for (auto it : touched_)
    if (it->root && it->retrieval && it->generation)
      done.push_back(finish(it, FinishedTrace::How::kComplete, now));
  touched_.clear();
  while (!lru_.empty() && (lru_.size() > o_.max_traces || bytes_ > o_.max_bytes))
    done.push_back(finish(lru_.begin(), FinishedTrace::How::kEvicted, now));
  return r;
}

void TraceJoin::expire(std::vector<FinishedTrace>& done, Clock::time_point now) {
  while (!lru_.empty() && now - lru_.front().last >= o_.timeout)
    done.push_back(finish(lru_.begin(), FinishedTrace::How::kIncomplete, now));
  while (!born_.empty() && now - born_.front()->first >= o_.max_age) {
    done.push_back(finish(born_.front(), FinishedTrace::How::kIncomplete, now));
    done.back().aged_out = true;
  }
}

void TraceJoin::forget(const std::vector<std::int32_t>& partitions) {
  const auto revoked = [&](std::int32_t p) {
    return std::find(partitions.begin(), partitions.end(), p) != partitions.end();
  };
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (revoked(it->key.partition)) {
      bytes_ -= it->bytes;
      index_.erase(it->key);
      born_.erase(it->born);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto p : partitions) recent_.erase(p);
}

std::optional<TraceJoin::Clock::time_point> TraceJoin::oldest() const {
  if (lru_.empty()) return std::nullopt;
  return lru_.front().last;
}

}  // namespace assay
