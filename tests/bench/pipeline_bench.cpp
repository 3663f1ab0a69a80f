// Benchmarks of the hot path and of the cheap judges on the real dev events
// (../shared/data/rag_events_dev.jsonl). Run: scripts/bench. Prints numbers; asserts nothing.

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "judges/claim_support_model.hpp"
#include "judges/registry.hpp"
#include "judges/rouge_l.hpp"
#include "judges/tokenizer.hpp"
#include "sampling/sampler.hpp"
#include "sources/event_parser.hpp"
#include "sources/otlp_decode.hpp"
#include "sources/trace_join.hpp"
#include "tracking/tracker.hpp"

using namespace assay;

namespace {

const std::vector<std::string>& lines() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    std::ifstream in(ASSAY_SHARED_DATA_DIR "/rag_events_dev.jsonl");
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) out.push_back(l);
    return out;
  }();
  return v;
}

const std::vector<Event>& events() {
  static const std::vector<Event> v = [] {
    std::vector<Event> out;
    EventParser p(EventFieldOptions{}, 1 << 20);
    for (const auto& l : lines()) {
      Event e;
      if (p.parse(l, "k", e).ok) out.push_back(std::move(e));
    }
    return out;
  }();
  return v;
}

void BM_SampleHash(benchmark::State& state) {
  std::size_t i = 0;
  const std::string id = "req-1234567-abcdef";
  for (auto _ : state) benchmark::DoNotOptimize(sampleHash(id) + i++);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SampleHash);

/// The event parser's committed fuzz corpus: hostile messages, most of them not events.
const std::vector<std::string>& hostile() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> out;
    for (const auto& e :
         std::filesystem::directory_iterator(ASSAY_SOURCE_DIR "/fuzz/corpus/event_parser")) {
      std::ifstream in(e.path(), std::ios::binary);
      out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return out;
  }();
  return v;
}

/// Arg 0: the default engine (simdjson, RapidJSON for what it refuses); 1: RapidJSON alone.
void parseBench(benchmark::State& state, const std::vector<std::string>& inputs) {
  EventParser p(EventFieldOptions{}, 1 << 20);
  if (state.range(0) == 1) p.setEngine(EventParser::JsonEngine::kRapidJson);
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const auto& l = inputs[i++ % inputs.size()];
    Event e;
    benchmark::DoNotOptimize(p.parse(l, "k", e));
    bytes += l.size();
  }
  state.SetLabel(state.range(0) == 1 ? "rapidjson" : "simdjson");
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
}
void BM_ParseEvent(benchmark::State& state) { parseBench(state, lines()); }
BENCHMARK(BM_ParseEvent)->Arg(0)->Arg(1);
void BM_ParseHostile(benchmark::State& state) { parseBench(state, hostile()); }
BENCHMARK(BM_ParseHostile)->Arg(0)->Arg(1);

// Ingestion of the same 20 requests (the first 4 dev events of each source dataset) as assay_json
// events and as OpenTelemetry traces (tests/data/otlp/dev_openinference.jsonl, 5 traces a
// message, made by scripts/otlp_traces): items = events; OTLP = decode + span join.
std::vector<std::string> otlpMessages() {
  std::vector<std::string> out;
  std::ifstream in(ASSAY_TEST_DATA_DIR "/data/otlp/dev_openinference.jsonl");
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

void BM_IngestAssayJson(benchmark::State& state) {
  std::vector<std::string> sample;
  std::map<std::string, int> per_dataset;
  for (const auto& l : lines()) {
    const auto at = l.find("\"source_dataset\": \"");
    if (at == std::string::npos) continue;
    const auto name = l.substr(at + 19, l.find('"', at + 19) - at - 19);
    if (per_dataset[name]++ < 4) sample.push_back(l);
  }
  EventParser p(EventFieldOptions{}, 1 << 20);
  std::size_t i = 0;
  for (auto _ : state) {
    Event e;
    benchmark::DoNotOptimize(p.parse(sample[i++ % sample.size()], "k", e));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(std::to_string(sample.size()) + " events");
}
BENCHMARK(BM_IngestAssayJson);

void ingestOtlp(benchmark::State& state, bool proto) {
  auto messages = otlpMessages();
  if (proto)
    for (auto& m : messages) {
      std::string pb, error;
      otlp::jsonToProto(m, pb, error);
      m = pb;
    }
  TraceJoinOptions o;
  o.mapping = *builtinTraceMapping("openinference");
  TraceJoin join(o);
  otlp::Batch b;
  std::vector<FinishedTrace> done;
  std::string error;
  std::size_t i = 0, events = 0;
  for (auto _ : state) {
    const auto& m = messages[i % messages.size()];
    if (proto)
      otlp::decodeProto(m, b, error);
    else
      otlp::decodeJson(m, b, error);
    // A fresh partition per pass, so that no trace is "late" on the next one.
    join.add(
        b, MessageRef{static_cast<std::int32_t>(i / messages.size()), 0},
        [](const std::string&) { return true; }, done);
    events += done.size();
    done.clear();
    if (++i % messages.size() == 0)
      join.forget({static_cast<std::int32_t>(i / messages.size() - 1)});
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(events));
  state.SetLabel(std::to_string(messages.size()) + " messages of 5 traces");
}
void BM_IngestOtlpJson(benchmark::State& state) { ingestOtlp(state, false); }
void BM_IngestOtlpProto(benchmark::State& state) { ingestOtlp(state, true); }
BENCHMARK(BM_IngestOtlpJson);
BENCHMARK(BM_IngestOtlpProto);

void BM_Tokenize(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(tokenize(events()[i++ % events().size()].answer));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Tokenize);

// The local judges (every type but the asynchronous LLM judge: scripts/bench measures it apart).
const std::vector<const JudgeFactory*>& localJudges() {
  static const auto list = [] {
    std::vector<const JudgeFactory*> out;
    for (const auto& f : judgeRegistry())
      if (f.descriptor->cost != CostClass::kRemoteCall) out.push_back(&f);
    return out;
  }();
  return list;
}

// Every local judge with default options on every dev event, one judge per benchmark.
void BM_Judge(benchmark::State& state) {
  const auto& f = *localJudges()[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(std::string(f.descriptor->type));
  const auto judge = f.create(JudgeOptionValues{}, JudgeContext{});
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(judge->judge(events()[i++ % events().size()]));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Judge)->DenseRange(0, static_cast<int>(localJudges().size()) - 1);

// claim_support's weights: parsed and checked whole, as at start-up (issue: under 10 ms).
void BM_ClaimSupportModelLoad(benchmark::State& state) {
  const std::string text(builtinClaimSupportModelText());
  for (auto _ : state) benchmark::DoNotOptimize(parseClaimSupportModel(text, "built-in"));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClaimSupportModelLoad)->Unit(benchmark::kMicrosecond);

// All judges on one event: the per-event CPU cost of the demo configuration.
void BM_AllJudgesPerEvent(benchmark::State& state) {
  std::vector<std::unique_ptr<Judge>> judges;
  for (const auto* f : localJudges())
    judges.push_back(f->create(JudgeOptionValues{}, JudgeContext{}));
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& e = events()[i++ % events().size()];
    for (const auto& j : judges) benchmark::DoNotOptimize(j->judge(e));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllJudgesPerEvent);

// The score tracker's join memory (tracking.join_capacity remembered events, the one structure
// of assayd that grows with the sampled events until it is full): heap bytes per remembered
// event with three judges' scores each, from glibc's mallinfo2 before and after 100,000 events.
void BM_TrackerJoinBytes(benchmark::State& state) {
  for (auto _ : state) {
    prometheus::Registry registry;
    TrackingOptions o;
    o.join_capacity = 100'000;
    ScoreTracker t({{"rouge_l", "answer_correctness", 0, 1},
                    {"bleu", "answer_correctness", 0, 1},
                    {"token_f1", "answer_correctness", 0, 1}},
                   o, registry);
    const auto before = mallinfo2().uordblks;
    for (int i = 0; i < o.join_capacity; ++i) {
      const std::string id = "dev-" + std::to_string(i) + "~bench-" + std::to_string(i * 7);
      t.noteEvent(id, "baseline", "support-bot");
      for (std::size_t j = 0; j < 3; ++j) t.record(j, id, "baseline", 0.5);
    }
    state.counters["bytes_per_event"] =
        static_cast<double>(mallinfo2().uordblks - before) / static_cast<double>(o.join_capacity);
  }
}
BENCHMARK(BM_TrackerJoinBytes)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
