// The input-format table's compliance test (sources/format.hpp): every row, with the shared
// hostile corpus (the committed fuzz corpora of the event parser and the OTLP decoder, plus the
// bounds below), must never throw, must name a reason for every message it refuses, must give
// events whose text is UTF-8 with an id, must refuse a message over limits.max_event_bytes as
// too_large, and must read back what its own --replay encoder wrote from the first line of the
// row's example file. A new format passes this before it lands
// (docs/adding-an-input-format.md).
#include <doctest/doctest.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "core/utf8.hpp"
#include "sources/format.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Config configFor(std::string_view name) {
  const auto loaded = loadConfigString(
      "kafka: {brokers: embedded, topic: t, group_id: g, format: " + std::string(name) +
          "}\nlimits: {max_event_bytes: 65536}\njudges:\n"
          "  - {name: n, kind: check, check: answer_nonempty}\n",
      "format_compliance.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.refusal());
  return loaded.config;
}

/// The shared hostile corpus: every committed fuzz input of the two message decoders, and the
/// bounds every format must hold whatever it reads.
std::vector<std::string> hostileCorpus() {
  std::vector<std::string> out;
  for (const char* target : {"event_parser", "otlp"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(test::kSourceDir) +
                                                             "/fuzz/corpus/" + target))
      out.push_back(readFile(e.path()));
  out.push_back("");
  out.push_back(std::string(1, '\0'));
  out.push_back("\xFF\xFE\xFD");
  out.push_back(std::string(100'000, '['));  // deep nesting (and too large)
  out.push_back(std::string(5'000, '[') + std::string(5'000, ']'));
  out.push_back(R"({"question": "q\ud800", "answer": "a"})");  // half a surrogate pair
  out.push_back(R"({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]})");
  out.push_back("\x0a\x05\x12\x03\x0a\x01\x00");  // a protobuf with truncated nested fields
  return out;
}

/// The first line of the row's example file (real --replay lines of its format).
std::string exampleLine(const InputFormatRow& row) {
  std::ifstream in(std::string(test::kSourceDir) + "/" + std::string(row.example));
  std::string line;
  std::getline(in, line);
  return line;
}

const InputFormat::Screen kKeepAll = [](std::string_view) { return KeyScreen{}; };

}  // namespace

TEST_CASE("format table: one row per kafka.format value the loader accepts, in enum order") {
  std::set<std::string_view> names;
  int i = 0;
  for (const auto& row : inputFormats()) {
    CAPTURE(row.name);
    CHECK(static_cast<int>(row.format) == i++);
    CHECK(names.insert(row.name).second);
    CHECK(configFor(row.name).kafka.format == row.format);
  }
  CHECK(names.size() == std::size(kEventFormatNames));
}

TEST_CASE("format table: every row survives the hostile corpus and holds the bounds") {
  const auto corpus = hostileCorpus();
  REQUIRE(corpus.size() > 1000);
  for (const auto& row : inputFormats()) {
    CAPTURE(row.name);
    const Config config = configFor(row.name);
    prometheus::Registry registry;
    const auto format = row.make(config, registry);
    REQUIRE(format);
    std::vector<DecodedEvent> out;
    std::size_t refused = 0, events = 0;
    for (std::size_t i = 0; i < corpus.size(); ++i) {
      const InputFormat::Message m{corpus[i], "", {0, static_cast<std::int64_t>(i)}, "t"};
      InputFormat::Read read;
      CHECK_NOTHROW(read = format->read(m, kKeepAll, out));
      if (!read.ok) {
        ++refused;
        CHECK(static_cast<int>(read.invalid.reason) < kInvalidReasonCount);
        CHECK(!read.invalid.detail.empty());
        CHECK(!read.held);
      }
      if (corpus[i].size() > config.limits.max_event_bytes) {
        CHECK(!read.ok);
        CHECK(read.invalid.reason == InvalidReason::kTooLarge);
      }
    }
    format->expire(out);
    for (const auto& d : out) {
      for (const auto& m : d.messages) format->release(m);
      if (!d.event) continue;
      ++events;
      const Event& e = *d.event;
      CHECK(!e.id.empty());
      for (const std::string* s : {&e.id, &e.question, &e.answer, &e.tenant, &e.variant})
        CHECK(isValidUtf8(*s));
      for (const auto& c : e.contexts) CHECK(isValidUtf8(c.text));
    }
    MESSAGE(row.name, ": ", corpus.size(), " hostile inputs, ", refused, " refused, ", events,
            " events");
    CHECK(refused > corpus.size() / 2);  // most of the corpus is not an event of this format
  }
}

TEST_CASE("format table: every row reads back what its --replay encoder wrote") {
  for (const auto& row : inputFormats()) {
    CAPTURE(row.name);
    const Config config = configFor(row.name);
    prometheus::Registry registry;
    const auto format = row.make(config, registry);
    const std::string line = exampleLine(row);
    REQUIRE_MESSAGE(!line.empty(), "the row's example file: ", row.example);
    std::string key, value, error;
    REQUIRE_MESSAGE(format->encodeLine(line, key, value, error), error);
    std::vector<DecodedEvent> out;
    const MessageRef at{3, 42};
    const auto read = format->read({value, key, at, "t"}, kKeepAll, out);
    REQUIRE_MESSAGE(read.ok, read.invalid.detail);
    std::size_t events = 0;
    for (const auto& d : out) {
      REQUIRE(d.event);
      ++events;
      CHECK(!d.event->question.empty());
      CHECK(!d.event->answer.empty());
      // A joined event names the message it came from; a one-message event is that message.
      if (read.held) {
        REQUIRE(d.messages.size() == 1);
        CHECK(d.messages[0] == at);
      } else {
        CHECK(d.messages.empty());
      }
    }
    CHECK(events >= 1);
    CHECK((key.empty() || events == 1));  // a key is the id of the one event (or trace) it holds
    // A held message is finished once the last event holding it is released.
    if (read.held) {
      for (std::size_t i = 0; i + 1 < events; ++i) CHECK(!format->release(at));
      CHECK(format->release(at));
    }
    // A screen that rejects everything: nothing comes out, nothing is held.
    out.clear();
    const InputFormat::Screen none = [](std::string_view) { return KeyScreen{{}, true}; };
    const auto rejected = format->read({value, key, {3, 43}, "t"}, none, out);
    CHECK(rejected.ok);
    CHECK(!rejected.held);
    format->expire(out);
    CHECK(out.empty());
  }
}
