#include "config/loader.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "config/reload.hpp"
#include "core/rfc3339.hpp"
#include "core/yaml_load.hpp"
#include "judges/llm/llm_judge.hpp"
#include "tests/test_paths.hpp"

using namespace assay;

namespace {
LoadResult load(const std::string& yaml) { return loadConfigString(yaml, "t.yaml"); }
const char* kJudge = "judges:\n  - {name: r, kind: lexical, metric: rouge_l}\n";
}  // namespace

TEST_CASE("the shipped configs load without errors") {
  for (const char* f : {"/config/demo.yaml", "/config/assayd.example.yaml"}) {
    const auto r = loadConfigFile(std::string(test::kSourceDir) + f);
    for (const auto& e : r.errors) MESSAGE(e.format());
    CHECK(r.ok());
  }
  const auto demo = loadConfigFile(std::string(test::kSourceDir) + "/config/demo.yaml");
  CHECK(demo.config.kafka.brokers == "embedded");
  CHECK(demo.config.sampling.rate == 1.0);
  const auto ex = loadConfigFile(std::string(test::kSourceDir) + "/config/assayd.example.yaml");
  REQUIRE(ex.config.sampling.rules.size() == 2);
  CHECK(ex.config.sampling.rules[0].tenant == "acme");
  CHECK(ex.config.sampling.rules[0].rate == 0.10);
  CHECK(ex.config.kafka.properties.size() == 6);
  CHECK(ex.config.kafka.properties[0] ==
        std::pair<std::string, std::string>{"security.protocol", "SASL_SSL"});
}

TEST_CASE("defaults apply to an almost empty file") {
  const auto r = load(kJudge);
  REQUIRE(r.ok());
  CHECK(r.config.kafka.topic == "rag.events");
  CHECK(r.config.kafka.partitions == 6);
  CHECK(r.config.sampling.rate == 0.05);
  CHECK(r.config.limits.queue_capacity == 10000);
  CHECK(r.config.limits.max_event_bytes == 1048576);
  CHECK(r.config.events.answer == "/answer");
  CHECK(r.config.tracking.max_label_values == 50);
  REQUIRE(r.config.judges.size() == 1);
  CHECK(r.config.judges[0].factory->descriptor->type == "rouge_l");
  CHECK(r.config.judges[0].rate == 1.0);
  CHECK(r.config.budget.key_prefix == "assay:assayd:");  // from kafka.group_id
}

TEST_CASE("budget.key_prefix: from the group id by default; braces and blanks refused") {
  CHECK(
      load(std::string(kJudge) + "kafka: {group_id: \"rag-quality\"}\n").config.budget.key_prefix ==
      "assay:rag-quality:");
  CHECK(load(std::string(kJudge) + "kafka: {group_id: \"a{b}\"}\n").config.budget.key_prefix ==
        "assay:a_b_:");
  CHECK(load(std::string(kJudge) + "budget: {key_prefix: \"assay:\"}\n").config.budget.key_prefix ==
        "assay:");
  for (const char* bad : {"\"\"", "\"a{b}:\"", "\"a b\""}) {
    const auto r = load(std::string(kJudge) + "budget: {key_prefix: " + bad + "}\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == "budget.key_prefix");
  }
}

TEST_CASE("budget.tenants and budget.apps: caps per name, \"*\" for the rest; bad ones refused") {
  const auto ok = load(std::string(kJudge) +
                       "budget:\n  tenants: {acme: 2.5, \"*\": 0.5}\n  apps: {checkout: 0}\n");
  REQUIRE(ok.ok());
  CHECK(ok.config.budget.tenant_caps ==
        std::vector<std::pair<std::string, double>>{{"acme", 2.5}, {"*", 0.5}});
  CHECK(ok.config.budget.app_caps == std::vector<std::pair<std::string, double>>{{"checkout", 0}});
  const std::pair<const char*, const char*> bad[] = {
      {"tenants: [acme]", "budget.tenants"},
      {"tenants: {acme: -1}", "budget.tenants.acme"},
      {"tenants: {acme: lots}", "budget.tenants.acme"},
      {"tenants: {acme: .nan}", "budget.tenants.acme"},
      {"tenants: {acme: 2000000}", "budget.tenants.acme"},
      {"apps: {checkout: {cap: 1}}", "budget.apps.checkout"},
      {"tenants: {\"\": 1}", "budget.tenants"}};
  for (const auto& [yaml, path] : bad) {
    const std::string where = path;  // not a structured binding: CAPTURE is a lambda
    const std::string text = yaml;
    CAPTURE(text);
    const auto r = load(std::string(kJudge) + "budget: {" + yaml + "}\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == where);
    CHECK(r.errors[0].line == 3);
  }
  // A reload applies them live, like budget.daily_limit_eur.
  const auto d = diffConfigs(std::string(kJudge) + "budget: {tenants: {acme: 1}}\n",
                             std::string(kJudge) + "budget: {tenants: {acme: 2}}\n");
  CHECK(d.budget_cap);
  CHECK(d.restart.empty());
}

TEST_CASE("canary: file, every, sample, label and state_file; bad values named at their key") {
  const auto ok = load(std::string(kJudge) +
                       "canary: {file: /tmp/c.jsonl, every: 30m, sample: 50, label: /l/bad}\n");
  REQUIRE(ok.ok());
  CHECK(ok.config.canary.file == "/tmp/c.jsonl");
  CHECK(ok.config.canary.every_seconds == 1800);
  CHECK(ok.config.canary.sample == 50);
  CHECK(ok.config.canary.label == "/l/bad");
  CHECK(ok.config.canary.file_line == 3);
  CHECK(ok.config.canary.judges.empty());  // every judge
  const auto some = load(std::string(kJudge) + "canary: {file: f, judges: [r]}\n");
  REQUIRE(some.ok());
  CHECK(some.config.canary.judges == std::vector<std::string>{"r"});
  const std::pair<const char*, const char*> bad[] = {
      {"{every: 6h}", "canary.file"},
      {"{file: f, judges: [rr]}", "canary.judges[0]"},
      {"{file: f, judges: [r, r]}", "canary.judges[1]"},
      {"{file: f, judges: []}", "canary.judges"},
      {"{file: f, judges: r}", "canary.judges"},
      {"{file: f, every: 10s}", "canary.every"},
      {"{file: f, every: 8d}", "canary.every"},
      {"{file: f, every: 100}", "canary.every"},
      {"{file: f, sample: 0}", "canary.sample"},
      {"{file: f, sample: 10001}", "canary.sample"},
      {"{file: f, label: labels}", "canary.label"},
      {"{file: f, lable: /x}", "canary.lable"}};
  for (const auto& [yaml, path] : bad) {
    const std::string where = path;  // not a structured binding: CAPTURE is a lambda
    const std::string text = yaml;
    CAPTURE(text);
    const auto r = load(std::string(kJudge) + "canary: " + yaml + "\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == where);
  }
}

TEST_CASE("review: judges that exist, thresholds on their scale, share and hourly cap in range") {
  const std::string judges =
      "judges:\n  - {name: r, kind: lexical, metric: rouge_l}\n"
      "  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, api_key_env: K}\n";
  const auto ok = load(judges +
                       "review: {path: /tmp/r.jsonl, judges: {f: {below: 3}, r: {below: "
                       "0.2}}, share: 0.05, max_per_hour: 10}\n");
  REQUIRE(ok.ok());
  REQUIRE(ok.config.review.judges.size() == 2);
  CHECK(ok.config.review.judges[0].name == "f");
  CHECK(ok.config.review.judges[0].below == 3);
  CHECK(ok.config.review.share == 0.05);
  CHECK(ok.config.review.topic.empty());
  const auto topic = load(judges + "review: {topic: assay.review-1, judges: {f: {below: 3}}}\n");
  REQUIRE(topic.ok());
  CHECK(topic.config.review.topic == "assay.review-1");
  CHECK(topic.config.review.path.empty());
  const std::string long_topic = "{topic: " + std::string(250, 't') + ", judges: {f: {below: 3}}}";
  const std::pair<const char*, const char*> bad[] = {
      {"{judges: {f: {below: 3}}}", "review"},  // neither a file nor a topic
      {"{path: '', judges: {f: {below: 3}}}", "review.path"},
      {"{topic: 'review topic', judges: {f: {below: 3}}}", "review.topic"},
      {"{topic: '..', judges: {f: {below: 3}}}", "review.topic"},
      {"{topic: '', path: p, judges: {f: {below: 3}}}", "review.topic"},
      {long_topic.c_str(), "review.topic"},
      {"{path: p, judges: {nope: {below: 3}}}", "review.judges.nope"},
      {"{path: p, judges: {f: {below: 5}}}", "review.judges.f.below"},  // the rubric is 1..4
      {"{path: p, judges: {r: {below: 2}}}", "review.judges.r.below"},  // rouge_l is 0..1
      {"{path: p, judges: {f: {}}}", "review.judges.f.below"},
      {"{path: p, judges: {f: {below: 3}}, share: 1.5}", "review.share"},
      {"{path: p, judges: {f: {below: 3}}, max_per_hour: 0}", "review.max_per_hour"},
      {"{path: p}", "review.judges"}};
  for (const auto& [yaml, path] : bad) {
    const std::string where = path;  // not a structured binding: CAPTURE is a lambda
    const std::string text = yaml;
    CAPTURE(text);
    const auto r = load(judges + "review: " + yaml + "\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == where);
  }
  // A key with control characters: escaped in the formatted error, one line, no ESC.
  const auto hostile = load(judges + "review: {path: p, judges: {\"a\\nb\\e[31m\": {below: 3}}}\n");
  REQUIRE(hostile.errors.size() == 1);
  CHECK(hostile.errors[0].format().find("review.judges.a\\x0ab\\x1b[31m: no judge") !=
        std::string::npos);
  const auto typo = load(judges + "review: {path: p, judges: {ff: {below: 3}}}\n");
  REQUIRE(typo.errors.size() == 1);
  CHECK(typo.errors[0].message == "no judge of that name in judges; did you mean 'f'?");
  const auto far = load(judges + "review: {path: p, judges: {nope: {below: 3}}}\n");
  REQUIRE(far.errors.size() == 1);
  CHECK(far.errors[0].message == "no judge of that name in judges (judges: r f)");
}

TEST_CASE(
    "JSON Pointers: an invalid escape is refused at its key (RapidJSON read it as the root)") {
  // The hostile trial: events.tenant "/tenant~2" passed --check-config, then every event was
  // refused (the invalid pointer resolved to the whole event, not a string).
  for (const char* yaml : {"events: {tenant: /tenant~2}", "canary: {file: f, label: /labels/~2}",
                           "events: {answer: '/a~'}"}) {
    const std::string text = yaml;
    CAPTURE(text);
    const auto r = load(std::string(kJudge) + yaml + "\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].message.find("not a valid JSON Pointer (RFC 6901) at character") == 0);
  }
  CHECK(load(std::string(kJudge) + "events: {tenant: /meta/a~1b~0c}\n").ok());
}

TEST_CASE("kafka topics: names the broker accepts, at their key") {
  const std::pair<const char*, const char*> bad[] = {
      {"{topic: 'rag events'}", "kafka.topic"},
      {"{results_topic: 'r/s'}", "kafka.results_topic"},
      {"{dead_letter_topic: '.'}", "kafka.dead_letter_topic"},
      {"{feedback_topic: 'fé'}", "kafka.feedback_topic"}};
  for (const auto& [yaml, path] : bad) {
    const std::string where = path;  // not a structured binding: CAPTURE is a lambda
    const std::string text = yaml;
    CAPTURE(text);
    const auto r = load(std::string(kJudge) + "kafka: " + yaml + "\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == where);
    CHECK(r.errors[0].message.find("topic name") != std::string::npos);
  }
  CHECK(
      load(std::string(kJudge) + "kafka: {topic: rag.events_v2-1, results_topic: assay.results}\n")
          .ok());
}

TEST_CASE("every error is reported with line, column and key path") {
  const auto r = load(
      "kafka:\n"                                                    // 1
      "  topik: x\n"                                                // 2
      "sampling:\n"                                                 // 3
      "  rate: 1.5\n"                                               // 4
      "judges:\n"                                                   // 5
      "  - {name: a, kind: lexical, metric: rogue}\n"               // 6
      "  - {name: a, kind: check, check: answer_nonempty}\n"        // 7
      "  - {name: b, kind: lexical, metric: bleu, max_order: 0}\n"  // 8
      "  - {name: c, kind: retrieval, metric: ndcg, k: five}\n"     // 9
      "  - {name: d, kind: check, check: context_count, mni: 1}\n"  // 10
      "events: {answer: answer}\n");                                // 11
  REQUIRE(r.errors.size() == 8);
  CHECK(r.errors[0].format() == "t.yaml:2:3: kafka.topik: unknown key; did you mean 'topic'?");
  CHECK(r.errors[1].format() ==
        "t.yaml:11:18: events.answer: expected a JSON Pointer (RFC 6901) starting with '/', or ''");
  CHECK(r.errors[2].format() == "t.yaml:4:9: sampling.rate: must be between 0 and 1");
  CHECK(r.errors[3].line == 6);
  CHECK(r.errors[3].path == "judges[0].metric");
  CHECK(r.errors[3].message.find("unknown lexical 'rogue'") == 0);
  CHECK(r.errors[4].format() == "t.yaml:7:12: judges[1].name: duplicate judge name 'a'");
  CHECK(r.errors[5].format() == "t.yaml:8:55: judges[2].max_order: must be between 1 and 8");
  CHECK(r.errors[6].format() == "t.yaml:9:49: judges[3].k: expected an integer");
  CHECK(r.errors[7].format() == "t.yaml:10:50: judges[4].mni: unknown key; did you mean 'min'?");
}

TEST_CASE("YAML syntax errors and unreadable files are errors, not exceptions") {
  const auto r = load("kafka: [unclosed\n");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].message.find("YAML syntax error") == 0);
  CHECK(r.errors[0].line >= 1);
  const auto missing = loadConfigFile("/nonexistent/assay.yaml");
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors[0].format() ==
        "/nonexistent/assay.yaml: cannot be opened: No such file or directory");
}

TEST_CASE("a configuration file is a regular UTF-8 file of at most 1 MiB, its aliases bounded") {
  const std::string dir = std::filesystem::temp_directory_path() / "assay-config-files";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A FIFO with no writer: refused at once (opening it blocked start-up, --check-config, reload).
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  const auto fifo = loadConfigFile(dir + "/fifo");
  REQUIRE(fifo.errors.size() == 1);
  CHECK(fifo.errors[0].format() == dir + "/fifo: is a FIFO, not a regular file");
  // A device that never ends (it aborted with exit 134 reading all of it).
  const auto zero = loadConfigFile("/dev/zero");
  REQUIRE(zero.errors.size() == 1);
  CHECK(zero.errors[0].message == "is a character device, not a regular file");
  // Over the size cap.
  {
    std::ofstream big(dir + "/big.yaml");
    big << std::string(kMaxConfigBytes + 1, '#');
  }
  const auto big = loadConfigFile(dir + "/big.yaml");
  REQUIRE(big.errors.size() == 1);
  CHECK(big.errors[0].message == "is 1.0 MiB, over the 1 MiB limit");
  std::filesystem::remove_all(dir);

  // A byte that is not UTF-8: refused with its line and column, wherever it is (a judge name
  // here reached /metrics, JSON Lines and /v1/route, and --check-config said OK).
  const auto raw = load(std::string(kJudge) + "tracking: {}\n# comment \xC3\x28 is fine? no\n");
  REQUIRE(raw.errors.size() == 1);
  CHECK(raw.errors[0].format() ==
        "t.yaml:4:11: not UTF-8: byte \\xC3 does not start a well-formed character (a "
        "configuration file is UTF-8)");
  const auto name = load("judges:\n  - {name: \"ok\xFF\", kind: lexical, metric: rouge_l}\n");
  REQUIRE(name.errors.size() == 1);
  CHECK(name.errors[0].line == 2);
  CHECK(name.errors[0].column == 15);
  // An escape of half a surrogate pair: yaml-cpp refuses it (and, a yaml-cpp limitation, a
  // whole escaped pair too: write the character or \U0001F600).
  const auto lone = load("judges:\n  - {name: \"a\\udc00\", kind: lexical, metric: rouge_l}\n");
  REQUIRE(lone.errors.size() == 1);
  CHECK(lone.errors[0].message.find("YAML syntax error: invalid unicode") == 0);

  // A "billion laughs" of 1 KiB: refused before any tree is walked, at the alias that passes
  // the bound (under an unknown key, it was walked in full: over 60 s).
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i)
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + [&] {
      std::string s;
      for (int k = 0; k < 10; ++k) s += (k ? ", *a" : "*a") + std::to_string(i - 1);
      return s;
    }() + "]\n";
  const auto start = std::chrono::steady_clock::now();
  const auto laughs = load(std::string(kJudge) + bomb);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(laughs.errors.size() == 1);
  CHECK(laughs.errors[0].message ==
        "more than 100000 YAML nodes once aliases are expanded (an alias bomb?)");
  CHECK(laughs.errors[0].line == 7);  // a4 (111,111 nodes) is the first to pass 100,000
  CHECK(seconds < 5.0);               // measured 0.01 s; the unbounded walk took over 60 s
  // An alias inside its own anchor's collection: a cyclic graph that every walk followed for
  // ever (the configuration fuzzer's input reached 2 GiB). Refused at the alias.
  const auto cycle = load(std::string(kJudge) + "a0: &a0 [x, y]\na1: &a1 [*a0, *a1, z]\n");
  REQUIRE(cycle.errors.size() == 1);
  CHECK(cycle.errors[0].message == "an alias inside the collection its anchor names (a cycle)");
  CHECK(cycle.errors[0].line == 4);
}

TEST_CASE("kafka.brokers entries are HOST[:PORT]; a percentage gets a hint") {
  const std::string rest =
      "\", topic: t, group_id: g}\njudges:\n  - {name: o, kind: lexical, "
      "metric: rouge_l}\n";
  const auto brokers = [&](const std::string& b) {
    const auto r = load("kafka: {brokers: \"" + b + rest);
    return r.errors.empty() ? std::string() : r.errors[0].format();
  };
  CHECK(brokers("kafka-1:9092, kafka-2:9092") == "");
  CHECK(brokers("SASL_SSL://kafka-1:9093,kafka-2") == "");  // no port: librdkafka's 9092
  CHECK(brokers("[::1]:9092") == "");
  CHECK(brokers("::1") == "");
  CHECK(brokers("http://kafka-1:9092") ==
        "t.yaml:1:18: kafka.brokers: entry 1: expected HOST:PORT (no URL scheme; "
        "librdkafka knows only plaintext://, ssl://, sasl_plaintext:// and sasl_ssl://, and the "
        "protocol is set by kafka.properties security.protocol)");
  CHECK(brokers("kafka-1:99999") ==
        "t.yaml:1:18: kafka.brokers: entry 1 (host 'kafka-1'): the port must be a number from 1 "
        "to 65535");
  CHECK(brokers("a:1,,b:2") == "t.yaml:1:18: kafka.brokers: entry 2 is empty (a stray comma?)");
  CHECK(brokers("a:1, :9092") == "t.yaml:1:18: kafka.brokers: entry 2: no host before the port");
  // A password pasted in the list is never quoted: as a port, or after a second colon.
  CHECK(brokers("kafka-1:9092,kafka-2:hunter2") ==
        "t.yaml:1:18: kafka.brokers: entry 2 (host 'kafka-2'): the port must be a number from 1 "
        "to 65535");
  CHECK(brokers("kafka-1:svc:hunter2") ==
        "t.yaml:1:18: kafka.brokers: entry 1: more than one ':' and not an IPv6 address (an IPv6 "
        "address with a port goes in brackets: [::1]:9092)");
  CHECK(brokers("2001:db8::7") == "");
  // The new-user trial's mistakes: another separator, a scheme without its colon, a typo.
  CHECK(brokers("kafka-1:9092;kafka-2:9092").find("separated by commas") != std::string::npos);
  CHECK(brokers("kafka-1:9092 kafka-2:9092").find("entry 1 holds a space or ';'") !=
        std::string::npos);
  CHECK(brokers("PLAINTEXT//kafka-1:9092").find("entry 1: expected HOST:PORT (a '/'") !=
        std::string::npos);
  CHECK(brokers("embeded").find("did you mean 'embedded'") != std::string::npos);
  const auto pct = load("sampling: {rate: 5%}\n");
  REQUIRE_FALSE(pct.errors.empty());
  CHECK(pct.errors[0].format() ==
        "t.yaml:1:18: sampling.rate: expected a number (a share is written as a fraction: 0.05 "
        "for 5%)");
}

TEST_CASE("a config without judges, an LLM judge, and bad rules are rejected") {
  CHECK(load("kafka: {topic: x}\n").errors.at(0).path == "judges");
  const auto llm = load("judges:\n  - {name: f, kind: llm, criterion: faithfulness}\n");
  REQUIRE(llm.errors.size() == 1);
  CHECK(llm.errors[0].path == "judges[0].model");
  const auto rules = load(std::string(kJudge) +
                          "sampling:\n  rules:\n    - {rate: 0.5}\n    - {match: {}, rate: 0.5}\n");
  REQUIRE(rules.errors.size() == 2);
  CHECK(rules.errors[0].path == "sampling.rules[0].match");
  CHECK(rules.errors[1].path == "sampling.rules[1].match");
  const auto zero = load("judges:\n  - {name: r, kind: lexical, metric: rouge_l, rate: 0}\n");
  REQUIRE(zero.errors.size() == 1);
  CHECK(zero.errors[0].message == "must be in (0, 1]");
}

TEST_CASE("judge options reach the typed option values") {
  const auto r = load(
      "judges:\n"
      "  - {name: c, kind: check, check: cites_source, patterns: ['Source: \\w+']}\n"
      "  - {name: n, kind: check, check: context_count, min: 2, max: 9}\n"
      "  - {name: o, kind: lexical, metric: context_overlap, number_weight: 2.5, rate: 0.25}\n");
  REQUIRE(r.ok());
  CHECK(r.config.judges[0].values.getStringList("patterns") ==
        std::vector<std::string>{"Source: \\w+"});
  CHECK(r.config.judges[1].values.getInt("min", 0) == 2);
  CHECK(r.config.judges[1].values.getInt("max", 0) == 9);
  CHECK(r.config.judges[2].values.getNumber("number_weight", 0) == 2.5);
  CHECK(r.config.judges[2].rate == 0.25);
  const auto bad =
      load("judges:\n  - {name: c, kind: check, check: cites_source, patterns: ['(']}\n");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].path == "judges[0].patterns");
}

TEST_CASE("a directory, an empty file and a bad port are errors; inert keys are warnings") {
  const auto dir = loadConfigFile("/tmp");
  REQUIRE(dir.errors.size() == 1);
  CHECK(dir.errors[0].message == "is a directory, not a regular file");
  const auto empty = load("");
  REQUIRE(empty.errors.size() == 1);
  CHECK(empty.errors[0].format() ==
        "t.yaml:1:1: empty configuration: at least one judge is needed (see config/demo.yaml)");
  for (const char* listen : {"127.0.0.1:99999", "127.0.0.1:", "nope", "h:12a"}) {
    const auto r = load(std::string(kJudge) + "admin: {listen: \"" + listen + "\"}\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == "admin.listen");
  }
  CHECK(load(std::string(kJudge) + "admin: {listen: \"127.0.0.1:0\"}\n").ok());
  const auto inert = load(std::string(kJudge) +
                          "budget: {daily_limit_eur: 5}\n"
                          "kafka: {feedback_topic: fb}\n"
                          "tracking: {window: 100}\n");
  CHECK(inert.ok());
  REQUIRE(inert.warnings.size() == 1);  // tracking and feedback_topic are in use now
  CHECK(inert.warnings[0].format().rfind("t.yaml:3:9: budget: warning: accepted, but has no effect",
                                         0) == 0);
  CHECK(inert.config.tracking.window == 100);
  CHECK(inert.config.kafka.feedback_topic == "fb");
}

TEST_CASE("tracking: time bound, join capacity, baseline file and its time range") {
  const std::string file = std::string(test::kSourceDir) + "/tests/tracking/baseline.jsonl";
  const auto ok =
      load(std::string(kJudge) +
           "tracking: {window_seconds: 3600, join_capacity: 5000, baseline_file: " + file +
           ", baseline_from: \"2026-11-01T00:00:00Z\", "
           "baseline_until: \"2026-11-08T00:00:00+01:00\"}\n");
  for (const auto& e : ok.errors) MESSAGE(e.format());
  REQUIRE(ok.ok());
  CHECK(ok.config.tracking.window_seconds == 3600);
  CHECK(ok.config.tracking.join_capacity == 5000);
  CHECK(ok.config.tracking.baseline_from == "2026-11-01T00:00:00Z");
  const auto bad = load(std::string(kJudge) +
                        "tracking:\n"
                        "  window_seconds: -1\n"
                        "  baseline_from: yesterday\n"
                        "  rolling_baseline: true\n"
                        "  baseline_until: \"2026-11-08T00:00:00Z\"\n");
  std::vector<std::string> got;
  for (const auto& e : bad.errors) got.push_back(e.format());
  REQUIRE(got.size() == 4);
  CHECK(got[0] == "t.yaml:4:19: tracking.window_seconds: must be between 0 and 31622400");
  CHECK(got[1] ==
        "t.yaml:5:18: tracking.baseline_from: expected an RFC 3339 time, e.g. "
        "2026-11-01T00:00:00Z");
  CHECK(got[2] ==
        "t.yaml:5:18: tracking.baseline_from: needs tracking.baseline_file (the judgments to "
        "read)");
  CHECK(got[3] ==
        "t.yaml:7:19: tracking.baseline_until: needs tracking.baseline_file (the judgments to "
        "read)");
  const auto missing = load(std::string(kJudge) +
                            "tracking:\n"
                            "  baseline_file: /nonexistent/week.jsonl\n"
                            "  baseline_from: \"2026-11-08T00:00:00Z\"\n"
                            "  baseline_until: \"2026-11-01T00:00:00Z\"\n");
  REQUIRE(missing.errors.size() == 2);
  CHECK(missing.errors[0].format() ==
        "t.yaml:4:18: tracking.baseline_file: cannot read '/nonexistent/week.jsonl' (a judgments "
        "JSON Lines file is expected)");
  CHECK(missing.errors[1].format() ==
        "t.yaml:6:19: tracking.baseline_until: must be later than tracking.baseline_from (the "
        "range is [from, until))");
}

TEST_CASE("drift windows: a number of scores or a duration") {
  const auto ok =
      load(std::string(kJudge) + "tracking: {baseline_window: 7d, recent_window: 50}\n");
  REQUIRE(ok.ok());
  CHECK(ok.config.tracking.baseline_seconds == 7 * 86400);
  CHECK(ok.config.tracking.recent_window == 50);
  CHECK(ok.config.tracking.recent_seconds == 0);
  const auto h = load(std::string(kJudge) + "tracking: {recent_window: 1.5h}\n");
  REQUIRE(h.ok());
  CHECK(h.config.tracking.recent_seconds == 5400);
  for (const char* bad : {"5x", "30s", "91d", "9", "h", "-2h", "[1]"}) {
    CAPTURE(bad);
    const auto r = load(std::string(kJudge) + "tracking: {recent_window: " + bad + "}\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].format() ==
          "t.yaml:3:27: tracking.recent_window: expected a number of scores from 10 to 1000000, "
          "or a duration from 1m to 90d such as 30m, 6h or 7d");
  }
}

TEST_CASE("tracking settings that switch a statistic off are warnings") {
  const auto r =
      load(std::string(kJudge) + "tracking: {window: 100, min_samples: 5000, min_pairs: 200}\n");
  CHECK(r.ok());
  REQUIRE(r.warnings.size() == 2);
  CHECK(r.warnings[0].format() ==
        "t.yaml:3:38: tracking.min_samples: warning: larger than tracking.window (100): the "
        "window never holds that many scores, so assay_judge_lenient never appears");
  CHECK(r.warnings[1].path == "tracking.min_pairs");
}

TEST_CASE("RFC 3339 times") {
  CHECK(parseRfc3339("1970-01-01T00:00:00Z") == 0);
  CHECK(parseRfc3339("2026-11-29T13:42:05.120Z") == 1795959725120);
  CHECK(parseRfc3339("2026-11-29T14:42:05.12+01:00") == 1795959725120);
  CHECK(parseRfc3339("2026-11-29t13:42:05.1209z") == 1795959725120);
  CHECK(parseRfc3339("2024-02-29T00:00:00-00:30") == 1709166600000);
  for (const char* bad : {"2026-11-29", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
                          "2026-11-29T24:00:00Z", "2026-11-29T13:42:05", "2026-11-29T13:42:05.Z",
                          "2026-11-29T13:42:05Z trailing", "2026-11-29T13:42:05+0100"})
    CHECK_FALSE(parseRfc3339(bad));
}

TEST_CASE("duplicate keys and properties librdkafka rejects are load errors") {
  const auto dup = load(std::string(kJudge) + "kafka: {topic: first}\nkafka: {topic: second}\n");
  REQUIRE(dup.errors.size() == 1);
  CHECK(dup.errors[0].format() ==
        "t.yaml:4:1: kafka: duplicate key (first on line 3; YAML would silently keep one of them)");
  // At every depth: budget prices, a rubric's levels.
  const auto deep = load(
      "budget: {prices: {m: {input: 1, output: 2}, m: {input: 9, output: 9}}}\n"
      "judges:\n"
      "  - name: f\n"
      "    kind: llm\n"
      "    criterion: faithfulness\n"
      "    model: gpt-4o-mini\n"
      "    rubric:\n"
      "      levels:\n"
      "        4: {name: a}\n"
      "        4: {name: b}\n");
  std::vector<std::string> dup_paths;
  for (const auto& e : deep.errors) dup_paths.push_back(e.format());
  CHECK(dup_paths ==
        std::vector<std::string>{
            "t.yaml:1:45: budget.prices.m: duplicate key (first on line 1; YAML would silently "
            "keep one of them)",
            "t.yaml:10:9: judges[0].rubric.levels.4: duplicate key (first on line 9; YAML would "
            "silently keep one of them)"});
  const auto props =
      load(std::string(kJudge) +
           "kafka:\n  properties:\n    no.such.property: 5\n    fetch.wait.max.ms: x\n"
           "    partition.assignment.strategy: cooperative-sticky\n");
  REQUIRE(props.errors.size() == 2);
  CHECK(
      props.errors[0].format() ==
      "t.yaml:5:5: kafka.properties.no.such.property: librdkafka: No such configuration property: "
      "\"no.such.property\"");
  CHECK(props.errors[1].path == "kafka.properties.fetch.wait.max.ms");
  REQUIRE(props.config.kafka.properties.size() == 1);
  CHECK(props.config.kafka.properties[0].first == "partition.assignment.strategy");
}

TEST_CASE("LLM judges: defaults, prices, criteria, run_if") {
  const auto ok = load(
      "budget: {daily_limit_eur: 2, timezone: Europe/Paris, prices: {my-model: {input: 1, output: "
      "2}}}\n"
      "judges:\n"
      "  - {name: overlap, kind: lexical, metric: context_overlap}\n"
      "  - name: f\n"
      "    kind: llm\n"
      "    criterion: faithfulness\n"
      "    model: gpt-4o-mini-2024-07-18\n"
      "    api_key_env: OPENAI_API_KEY\n"
      "    rate: 0.2\n"
      "    run_if: [{judge: overlap, below: 0.8}]\n"
      "  - {name: g, kind: llm, criterion: answer_relevancy, provider: anthropic, model: "
      "my-model}\n");
  for (const auto& e : ok.errors) MESSAGE(e.format());
  REQUIRE(ok.ok());
  // budget is in use: no warning about it; one about the API key variable, unless it is set.
  if (!std::getenv("OPENAI_API_KEY")) {
    REQUIRE(ok.warnings.size() == 1);
    CHECK(ok.warnings[0].path == "judges[1].api_key_env");
    CHECK(ok.warnings[0].line == 8);
    CHECK(ok.warnings[0].message.find("OPENAI_API_KEY is not set") != std::string::npos);
  }
  const auto& f = ok.config.judges[1];
  CHECK(f.factory->descriptor->kind == JudgeKind::kLlm);
  CHECK(f.factory->descriptor->cost == CostClass::kRemoteCall);
  CHECK(f.rate == 0.2);
  const auto settings = [&](const JudgeConfig& jc) {
    JudgeContext ctx;
    ctx.name = jc.name;
    ctx.budget = &ok.config.budget;
    return llm::llmSettingsFrom(jc.values, ctx);
  };
  CHECK(settings(f).endpoint == "https://api.openai.com/v1");
  CHECK(settings(f).max_tokens == 300);
  CHECK(settings(f).timezone == "Europe/Paris");
  CHECK(settings(f).global_daily_limit_eur == 2.0);
  // The scale comes from the rubric.
  const auto info = f.factory->info(f.values);
  CHECK(info.criterion == "faithfulness");
  CHECK(info.min_score == 1.0);
  CHECK(info.max_score == 4.0);
  CHECK(info.buckets == std::vector<double>{1, 2, 3, 4});
  REQUIRE(f.run_if.size() == 1);
  CHECK(f.run_if[0].judge == "overlap");
  CHECK(f.run_if[0].below == 0.8);
  CHECK(settings(ok.config.judges[2]).endpoint == "https://api.anthropic.com");
  CHECK(settings(ok.config.judges[2]).price.input_usd_per_mtok == 1.0);  // budget.prices
  CHECK(ok.config.budget.prices.at(0).cached_input == 1.0);  // defaults to the input price
  CHECK(ok.config.budget.prices.at(0).cache_write == 1.25);  // 1.25 x input by default
  CHECK(settings(ok.config.judges[2]).price.cache_write_usd_per_mtok == 1.25);
  const auto written = load(std::string("budget:\n  prices:\n    m: {input: 3, cached_input: 0.3, "
                                        "cache_write: 6, output: 15}\n") +
                            kJudge);
  REQUIRE(written.ok());
  CHECK(written.config.budget.prices.at(0).cache_write == 6.0);

  const auto bad = load(
      "budget: {timezone: Mars/Olympus}\n"
      "judges:\n"
      "  - {name: a, kind: llm, criterion: tone, model: gpt-4o}\n"
      "  - {name: b, kind: llm, criterion: faithfulness, model: unpriced-model}\n"
      "  - {name: c, kind: llm, criterion: faithfulness, model: gpt-4o, provider: azure}\n"
      "  - {name: d, kind: llm, criterion: faithfulness, model: gpt-4o, run_if: [{judge: e, below: "
      "1}]}\n"
      "  - {name: e, kind: check, check: answer_nonempty}\n");
  std::vector<std::string> paths;
  for (const auto& e : bad.errors) paths.push_back(e.path);
  CHECK(paths == std::vector<std::string>{"budget.timezone", "judges[0].criterion",
                                          "judges[1].model", "judges[2].provider",
                                          "judges[3].run_if[0].judge"});
  CHECK(bad.errors[2].message.find("add it under budget.prices") != std::string::npos);
  CHECK(bad.errors[2].line == 4);  // judges[1], where its model is
  CHECK(bad.errors[2].message.find("did you mean") == std::string::npos);  // nothing close
  // A typo of a priced model gets the nearest name.
  const auto typo = load(
      "judges:\n  - {name: a, kind: llm, criterion: faithfulness, model: "
      "gpt-4o-mni}\n");
  REQUIRE(typo.errors.size() == 1);
  CHECK(typo.errors[0].message ==
        "no price for model 'gpt-4o-mni'; did you mean 'gpt-4o-mini'? If not, add it under "
        "budget.prices (USD per million tokens) so the cap can hold");
  // Every bad option of one judge is reported, each at its key.
  const auto many = load(
      "judges:\n"
      "  - {name: a, kind: llm, criterion: faithfulness, model: gpt-4o, max_tokens: 1, "
      "timeout_ms: 5, provider: x}\n");
  std::vector<std::string> keys;
  for (const auto& e : many.errors) keys.push_back(e.path);
  CHECK(keys == std::vector<std::string>{"judges[0].provider", "judges[0].max_tokens",
                                         "judges[0].timeout_ms"});
  // A run_if on an asynchronous judge is refused: its verdict comes after.
  const auto chained = load(
      "judges:\n"
      "  - {name: a, kind: llm, criterion: faithfulness, model: gpt-4o}\n"
      "  - {name: b, kind: llm, criterion: faithfulness, model: gpt-4o-mini, run_if: [{judge: "
      "a, below: 3}]}\n");
  REQUIRE(chained.errors.size() == 1);
  CHECK(chained.errors[0].path == "judges[1].run_if[0].judge");
  CHECK(chained.errors[0].message.find("asynchronous") != std::string::npos);
}

TEST_CASE("LLM judges: rubric wording overrides and few-shot examples") {
  const auto r = load(
      "judges:\n"
      "  - name: f\n"
      "    kind: llm\n"
      "    criterion: faithfulness\n"
      "    model: gpt-4o-mini\n"
      "    rubric:\n"
      "      levels: {4: {description: Every figure matches the contract text.}}\n"
      "      examples:\n"
      "        - {question: q, contexts: [c], answer: a, score: 4, justification: ok}\n"
      "        - {question: q, contexts: [c], answer: b, score: 1, justification: no}\n");
  for (const auto& e : r.errors) MESSAGE(e.format());
  REQUIRE(r.ok());
  JudgeContext ctx;
  ctx.name = "f";
  ctx.budget = &r.config.budget;
  const auto s = llm::llmSettingsFrom(r.config.judges[0].values, ctx);
  REQUIRE(s.rubric.levels.size() == 4);
  CHECK(s.rubric.levels[3].score == 4);
  CHECK(s.rubric.levels[3].description == "Every figure matches the contract text.");
  CHECK(s.rubric.levels[3].name == llm::builtinRubric("faithfulness")->levels[3].name);
  REQUIRE(s.rubric.examples.size() == 2);
  CHECK(s.rubric.examples[1].score == 1);
  CHECK(s.rubric.examples[0].contexts == std::vector<std::string>{"c"});
  const auto bad = load(
      "judges:\n"
      "  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, rubric: {levels: {5: "
      "{name: x}}, examples: [{answer: a, score: 2}, {answer: b, score: 2}]}}\n");
  std::vector<std::string> paths;
  for (const auto& e : bad.errors) paths.push_back(e.path);
  CHECK(paths == std::vector<std::string>{"judges[0].rubric.levels.5",
                                          "judges[0].rubric.examples[1].score"});
}

TEST_CASE("a criterion of the user's own: definition, levels on its own scale, inputs") {
  const auto r = load(
      "judges:\n"
      "  - name: charter\n"
      "    kind: llm\n"
      "    criterion: response_charter\n"
      "    model: gpt-4o-mini\n"
      "    rubric:\n"
      "      definition: Judge whether the answer keeps the charter.\n"
      "      inputs: [question, answer, reference, /metadata/channel, \"/a~1b\"]\n"
      "      levels:\n"
      "        2: {name: kept, description: Every rule is kept.}\n"
      "        0: {name: broken, description: A rule is broken.}\n"
      "        1: {name: strays, description: A minor lapse.}\n"
      "      examples:\n"
      "        - {question: q, answer: a, reference: r, /metadata/channel: chat, \"/a~1b\": v, "
      "score: 0, justification: j}\n");
  for (const auto& e : r.errors) MESSAGE(e.format());
  REQUIRE(r.ok());
  const auto& jc = r.config.judges[0];
  JudgeContext ctx;
  ctx.name = jc.name;
  ctx.budget = &r.config.budget;
  const auto s = llm::llmSettingsFrom(jc.values, ctx);
  CHECK(s.rubric.custom);
  CHECK(s.rubric.criterion == "response_charter");
  CHECK(s.rubric.task == "Judge whether the answer keeps the charter.");
  REQUIRE(s.rubric.levels.size() == 3);  // sorted by score
  CHECK(s.rubric.levels[0].score == 0);
  CHECK(s.rubric.levels[0].name == "broken");
  CHECK(s.rubric.levels[2].description == "Every rule is kept.");
  CHECK(s.rubric.needs_question);
  CHECK_FALSE(s.rubric.needs_contexts);
  CHECK(s.rubric.needs_answer);
  CHECK(s.rubric.needs_reference);
  CHECK(s.rubric.fields == std::vector<std::string>{"/metadata/channel", "/a~1b"});
  REQUIRE(s.rubric.examples.size() == 1);
  CHECK(s.rubric.examples[0].reference == "r");
  CHECK(s.rubric.examples[0].field_values == std::vector<std::string>{"chat", "v"});
  // The scale and the histogram buckets are the levels'; the parser reads the pointers.
  const auto info = jc.factory->info(jc.values);
  CHECK(info.criterion == "response_charter");
  CHECK(info.min_score == 0.0);
  CHECK(info.max_score == 2.0);
  CHECK(info.buckets == std::vector<double>{0, 1, 2});
  CHECK(r.config.events.extra == std::vector<std::string>{"/metadata/channel", "/a~1b"});
  // Without inputs: question, contexts and answer.
  const auto plain = load(
      "judges:\n  - {name: t, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: "
      "{definition: d, levels: {1: {name: a, description: b}, 2: {name: c, description: d}}}}\n");
  REQUIRE(plain.ok());
  const auto ps = llm::llmSettingsFrom(plain.config.judges[0].values, ctx);
  CHECK((ps.rubric.needs_question && ps.rubric.needs_contexts && ps.rubric.needs_answer));
  CHECK_FALSE(ps.rubric.needs_reference);
  CHECK(plain.config.events.extra.empty());
  // A built-in's name misspelt, with a rubric: built as a criterion of one's own, and said so.
  const auto typo = load(
      "judges:\n  - {name: t, kind: llm, criterion: faithfulnes, model: gpt-4o-mini, rubric: "
      "{definition: d, levels: {1: {name: a, description: b}, 2: {name: c, description: d}}}}\n");
  REQUIRE(typo.ok());
  REQUIRE(typo.warnings.size() == 1);
  CHECK(typo.warnings[0].path == "judges[0].criterion");
  CHECK(typo.warnings[0].message.find("if you meant the built-in 'faithfulness'") !=
        std::string::npos);
  // Two LLM judges of one criterion on different scales: said.
  const auto shared = load(
      "judges:\n  - {name: t1, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: "
      "{definition: d, levels: {1: {name: a, description: b}, 2: {name: c, description: d}}}}\n"
      "  - {name: t2, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: "
      "{definition: d, levels: {0: {name: a, description: b}, 1: {name: c, description: d}}}}\n");
  REQUIRE(shared.ok());
  REQUIRE(shared.warnings.size() == 1);
  CHECK(shared.warnings[0].format() ==
        "t.yaml:3:38: judges[1].criterion: warning: judge 't1' judges the criterion 'tone' on 1-2 "
        "too, this one on 0-1: two rubrics under one criterion label; give this one its own name");
  // Pointer inputs under kafka.format otlp_*: a warning (traces have no event message).
  const auto otlp = load(
      "kafka: {format: otlp_json}\n"
      "judges:\n  - {name: t, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: "
      "{definition: d, inputs: [answer, /m], levels: {1: {name: a, description: b}, 2: {name: "
      "c, description: d}}}}\n");
  REQUIRE(otlp.ok());
  REQUIRE(otlp.warnings.size() == 1);
  CHECK(otlp.warnings[0].path == "judges[0].rubric.inputs");
}

TEST_CASE("a custom rubric's mistakes are named at FILE:LINE:COL") {
  const auto bad = load(
      "judges:\n"
      "  - name: a\n"
      "    kind: llm\n"
      "    criterion: tone\n"
      "    model: gpt-4o-mini\n"
      "    rubric:\n"
      "      inputs: [question, persona, answer, question, /x~2]\n"
      "      levels:\n"
      "        1: {name: rude, description: Rude.}\n"
      "        2: {name: curt}\n"
      "        4: {name: warm, description: Warm.}\n"
      "        04: {name: warm, description: Warm.}\n"
      "  - {name: b, kind: llm, criterion: faithfulnes, model: gpt-4o-mini}\n"
      "  - {name: c, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: {definition: d, "
      "levels: {1: {name: a, description: b}}}}\n"
      "  - {name: d, kind: llm, criterion: \"tone!\", model: gpt-4o-mini}\n"
      "  - {name: e, kind: llm, criterion: faithfulness, model: gpt-4o-mini, rubric: {inputs: "
      "[answer]}}\n"
      "  - {name: f, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: {definition: d, "
      "levels: {0: {name: a, description: b}, 101: {name: c, description: d}}}}\n");
  std::vector<std::string> all;
  for (const auto& e : bad.errors) all.push_back(e.format());
  CHECK(all ==
        std::vector<std::string>{
            "t.yaml:7:7: judges[0].rubric: rubric.definition is missing: a criterion of your own "
            "(tone) says in words what is judged",
            "t.yaml:7:26: judges[0].rubric.inputs[1]: unknown input 'persona' (one of: question, "
            "contexts, answer, reference, or a JSON Pointer into the event such as "
            "/metadata/persona)",
            "t.yaml:7:43: judges[0].rubric.inputs[3]: 'question' is listed twice",
            "t.yaml:7:53: judges[0].rubric.inputs[4]: '/x~2' is not a JSON Pointer (RFC 6901: "
            "'~' is written ~0, '/' ~1)",
            "t.yaml:10:12: judges[0].rubric.levels.2.description: missing: each level says in "
            "words what an answer at this level looks like",
            "t.yaml:12:13: judges[0].rubric.levels.04: duplicate score 4 (also "
            "rubric.levels.4)",
            "t.yaml:9:9: judges[0].rubric.levels: the scores run from 1 to 4 with no level for 3: "
            "the levels are consecutive integers (renumber them, or add the missing level)",
            "t.yaml:13:37: judges[1].criterion: 'faithfulnes' is not a built-in criterion (did "
            "you mean 'faithfulness'?): a criterion of your own needs rubric.definition and "
            "rubric.levels (the built-in ones: faithfulness, answer_relevancy, completeness, "
            "context_relevance)",
            "t.yaml:14:95: judges[2].rubric.levels: expected 2 to 10 levels {SCORE: {name, "
            "description}} on consecutive integer scores, found 1 level(s)",
            "t.yaml:15:37: judges[3].criterion: expected a name of letters, digits and '_', "
            "starting with a letter, at most 64 bytes (it labels the judge's metrics)",
            "t.yaml:16:88: judges[4].rubric.inputs: the inputs of the built-in criterion "
            "faithfulness are fixed: give a criterion of your own another name to choose what it "
            "sees",
            "t.yaml:17:131: judges[5].rubric.levels.101: expected an integer score from 0 to "
            "100"});
}

TEST_CASE("a custom rubric's text is bounded and printable; examples show only what it sees") {
  const auto bad = load(
      "judges:\n"
      "  - name: a\n"
      "    kind: llm\n"
      "    criterion: tone\n"
      "    model: gpt-4o-mini\n"
      "    rubric:\n"
      "      definition: \"   \"\n"
      "      inputs: [answer, \"/m/a\\0b\"]\n"
      "      levels:\n"
      "        \" 1\": {name: a, description: b}\n"
      "        2: {name: \"two\\nlines\", description: fine}\n"
      "        3: {name: c, description: \"" +
      std::string(2001, 'x') +
      "\"}\n"
      "      examples:\n"
      "        - {answer: a, contexts: [c], score: 2, justification: j}\n"
      "  - {name: b, kind: llm, criterion: tone, model: gpt-4o-mini, rubric: {definition: d, "
      "levels: {" +
      [] {
        std::string l;
        for (int i = 0; i < 1000; ++i)
          l += (i ? ", " : "") + std::to_string(i) + ": {name: n, description: d}";
        return l;
      }() +
      "}}}\n");
  std::vector<std::string> all;
  for (const auto& e : bad.errors) all.push_back(e.path + ": " + e.message);
  CHECK(all ==
        std::vector<std::string>{
            "judges[0].rubric.definition: blank: what is judged, in words, at most 8000 bytes",
            "judges[0].rubric.inputs[1]: a JSON Pointer without control characters (NUL, line "
            "breaks…)",
            "judges[0].rubric.levels. 1: expected an integer score from 0 to 100",
            "judges[0].rubric.levels.2.name: holds a control character: a level's name is a few "
            "words on one line, at most 200 bytes",
            "judges[0].rubric.levels.3.description: over 2000 bytes: a level's description is at "
            "most 2000 bytes of text",
            "judges[0].rubric.examples[0].contexts: this criterion does not see the contexts "
            "(rubric.inputs): the example's would not be shown",
            "judges[1].rubric.levels: expected 2 to 10 levels {SCORE: {name, description}} on "
            "consecutive integer scores, found 1000 levels"});
}

TEST_CASE("no configuration value that can be a secret is echoed; every number is finite") {
  const auto r = load(
      "kafka: {properties: {ssl.endpoint.identification.algorithm: \"Passw0rd-42\"}}\n"
      "budget: {daily_limit_eur: .nan, usd_to_eur: .inf}\n"
      "tracking: {drift_alpha: .nan}\n"
      "judges:\n"
      "  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, api_key_env: "
      "\"sk-proj-ABCDEF123456\", requests_per_minute: .nan}\n"
      "  - {name: c, kind: lexical, metric: context_overlap, number_weight: .inf}\n");
  std::string all;
  std::vector<std::string> paths;
  for (const auto& e : r.errors) {
    all += e.format() + "\n";
    paths.push_back(e.path);
  }
  INFO(all);
  CHECK(all.find("Passw0rd-42") == std::string::npos);
  CHECK(all.find("<redacted>") != std::string::npos);
  CHECK(all.find("sk-proj") == std::string::npos);
  std::sort(paths.begin(), paths.end());
  CHECK(paths == std::vector<std::string>{"budget.daily_limit_eur", "budget.usd_to_eur",
                                          "judges[0].api_key_env", "judges[0].requests_per_minute",
                                          "judges[1].number_weight",
                                          "kafka.properties.ssl.endpoint.identification.algorithm",
                                          "tracking.drift_alpha"});
  // A secret pasted where a variable's name goes (secret_env, password_env), or a password that
  // happens to be a valid name; credentials in kafka.brokers (/readyz quoted them).
  ::unsetenv("Hunter2");
  const auto pasted = load(std::string(kJudge) +
                           "kafka:\n  brokers: \"svc:Passw0rd-43@kafka-1:9092\"\n"
                           "  secret_env: {sasl.password: \"Passw0rd-44!\"}\n"
                           "budget: {store: \"redis://127.0.0.1:6379\", password_env: Hunter2}\n");
  std::string said;
  for (const auto& list : {pasted.errors, pasted.service_errors, pasted.warnings})
    for (const auto& e : list) said += e.format() + "\n";
  INFO(said);
  CHECK(said.find("Passw0rd") == std::string::npos);
  CHECK(said.find("Hunter2") == std::string::npos);
  CHECK(said.find("kafka.brokers: an entry holds '@'") != std::string::npos);
  CHECK(said.find("kafka.secret_env.sasl.password: expected the name of an environment variable") !=
        std::string::npos);
  CHECK(said.find("budget.password_env: environment variable named here (not printed") !=
        std::string::npos);
  // An API key variable holding a line break (it injected request headers): refused, unprinted.
  ::setenv("ASSAY_TEST_CRLF_KEY", "sk-x\r\nX-Injected: 1", 1);
  const auto crlf = loadConfigString(
      "judges:\n  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
      "api_key_env: ASSAY_TEST_CRLF_KEY}\n",
      "t.yaml");
  std::string crlf_said;
  for (const auto& list : {crlf.errors, crlf.warnings})
    for (const auto& e : list) crlf_said += e.format();
  INFO(crlf_said);
  CHECK(crlf_said.find("ASSAY_TEST_CRLF_KEY holds a line break") != std::string::npos);
  CHECK(crlf_said.find("Injected") == std::string::npos);
  ::unsetenv("ASSAY_TEST_CRLF_KEY");

  // The ledger holds at most 10^6 euros: a larger cap is refused at load, not at the first call.
  const auto big = load(std::string(kJudge) + "budget: {daily_limit_eur: 2000000}\n");
  REQUIRE(big.errors.size() == 1);
  CHECK(big.errors[0].path == "budget.daily_limit_eur");
}

TEST_CASE("limits.when_full: block by default, drop_newest, anything else an error") {
  const auto def = load(kJudge);
  CHECK(def.config.limits.when_full == LimitsOptions::WhenFull::kBlock);
  CHECK(judgeBacklog(def.config.limits) == 2 * 10000 + 64);  // never refuses under block
  const auto drop =
      load(std::string("limits: {when_full: drop_newest, queue_capacity: 50}\n") + kJudge);
  REQUIRE(drop.ok());
  CHECK(drop.config.limits.when_full == LimitsOptions::WhenFull::kDropNewest);
  CHECK(judgeBacklog(drop.config.limits) == 50);
  const auto bad = load(std::string("limits:\n  when_full: wait\n") + kJudge);
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].format() ==
        "t.yaml:2:14: limits.when_full: expected block or drop_newest, got 'wait'");
}

TEST_CASE("a plain http:// endpoint is refused off loopback unless insecure_http is set") {
  const auto judge = [](const std::string& endpoint, const std::string& extra = "") {
    return load(
        "judges:\n  - {name: f, kind: llm, criterion: faithfulness, model: gpt-4o-mini, "
        "endpoint: \"" +
        endpoint + "\"" + extra + "}\n");
  };
  for (const char* ok :
       {"http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://[::1]:8080/v1",
        "https://llm.internal.example/v1", "http://127.0.0.2:65535/v1?api-version=1"}) {
    CAPTURE(ok);
    CHECK(judge(ok).ok());
  }
  const auto remote = judge("http://llm.internal.example:8000/v1");
  REQUIRE(remote.errors.size() == 1);
  CHECK(remote.errors[0].path == "judges[0].endpoint");
  CHECK(remote.errors[0].message.find("unencrypted") != std::string::npos);
  CHECK_FALSE(judge("http://10.0.0.7/v1").ok());
  CHECK_FALSE(judge("http://[2001:db8::1]/v1").ok());
  CHECK_FALSE(judge("http://127.0.0.1.evil.example/v1").ok());
  CHECK(judge("http://llm.internal.example:8000/v1", ", insecure_http: true").ok());
  // Credentials before the host, or a port that is not one, are refused without quoting the
  // endpoint (it may hold a secret).
  for (const char* bad :
       {"https://user:sk-s3cret@api.example/v1", "https://api.example:sk-s3cret/v1",
        "https://api.example:0/v1", "https://api.example:65536", "https://a:b:c/v1",
        "https://[::1/v1", "https://:8080/v1",
        // A space, a control character or '#' in the path would break the request line (a
        // hostile trial injected a header through it).
        "https://api.example/v1 HTTP/1.1\\r\\nX-s3cret: 1", "https://api.example/my path",
        "https://api.example/v1#frag", "https://api.example/v1\\t"}) {
    CAPTURE(bad);
    const auto r = judge(bad);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].path == "judges[0].endpoint");
    CHECK(r.errors[0].format().find("s3cret") == std::string::npos);
  }
  CHECK(judge("https://u:p@h.example/v1").errors[0].message.find("credentials") !=
        std::string::npos);
  CHECK(assay::llm::isPlainRemoteHttp("http://llm.internal.example/v1"));
  CHECK_FALSE(assay::llm::isPlainRemoteHttp("https://api.openai.com/v1"));
}

TEST_CASE("secrets from files and variables: Kafka properties, the Redis password") {
  const std::string dir = "/tmp/assay-secrets-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/kafka_password") << "s3cret-from-file\n";
    std::ofstream(dir + "/redis_password") << "redis-pw\r\n";
    std::ofstream(dir + "/empty") << "\n";
  }
  ::setenv("ASSAY_TEST_SASL_USER", "svc-assay", 1);
  ::unsetenv("ASSAY_TEST_UNSET");
  ::unsetenv("CREDENTIALS_DIRECTORY");
  const auto property = [](const LoadResult& r, const std::string& key) {
    for (const auto& [k, v] : r.config.kafka.properties)
      if (k == key) return v;
    return std::string("<absent>");
  };
  const auto r = load(std::string(kJudge) + "kafka:\n  secret_files: {sasl.password: \"" + dir +
                      "/kafka_password\"}\n  secret_env: {sasl.username: ASSAY_TEST_SASL_USER}\n"
                      "budget: {password_file: \"" +
                      dir + "/redis_password\"}\n");
  REQUIRE(r.ok());
  CHECK(r.service_errors.empty());
  CHECK(property(r, "sasl.password") == "s3cret-from-file");
  CHECK(property(r, "sasl.username") == "svc-assay");
  CHECK(r.config.budget.store_password == std::optional<std::string>("redis-pw"));

  // A relative name is read from $CREDENTIALS_DIRECTORY (LoadCredential=) when it is set...
  ::setenv("CREDENTIALS_DIRECTORY", dir.c_str(), 1);
  const auto cred = load(std::string(kJudge) + "budget: {password_file: redis_password}\n");
  CHECK(cred.config.budget.store_password == std::optional<std::string>("redis-pw"));
  ::unsetenv("CREDENTIALS_DIRECTORY");
  // ... and deferred to the service when it is not: a warning, and a start-up error.
  const auto deferred = load(std::string(kJudge) + "budget: {password_file: redis_password}\n");
  CHECK(deferred.ok());
  REQUIRE(deferred.service_errors.size() == 1);
  CHECK(deferred.service_errors[0].path == "budget.password_file");
  CHECK(deferred.service_errors[0].line == 3);
  CHECK(deferred.service_errors[0].message.find("CREDENTIALS_DIRECTORY") != std::string::npos);
  REQUIRE(deferred.warnings.size() == 2);  // the inert budget, and this

  // Unreadable, an unset variable: service errors naming the file or the variable (the service
  // may read what this shell cannot); an empty file was read: an error for everyone.
  const auto bad = load(std::string(kJudge) + "kafka:\n  secret_files: {sasl.password: \"" + dir +
                        "/empty\", ssl.key.password: \"" + dir + "/missing\"}\n" +
                        "  secret_env: {sasl.username: ASSAY_TEST_UNSET}\n");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].message == "'" + dir + "/empty' is empty");
  REQUIRE(bad.service_errors.size() == 2);
  CHECK(bad.service_errors[0].message ==
        "'" + dir + "/missing' cannot be opened: No such file or directory");
  CHECK(bad.service_errors[1].message == "environment variable ASSAY_TEST_UNSET is not set");
  CHECK(property(bad, "sasl.password") == "unresolved");  // --check-config still builds clients
  // A FIFO or a device is refused, and opening it does not block start-up.
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  for (const std::string& device : {dir + "/fifo", std::string("/dev/null"), std::string("/dev")}) {
    const auto r2 = load(std::string(kJudge) + "budget: {password_file: \"" + device + "\"}\n");
    REQUIRE(r2.service_errors.size() == 1);
    CAPTURE(r2.service_errors[0].message);
    CHECK(r2.service_errors[0].message.find(", not a regular file") != std::string::npos);
  }
  // A control character in a secret file (an escape sequence, a NUL) is refused, unquoted.
  std::ofstream(dir + "/escape") << "s3cret\x1b[0mkey\n";
  const auto ctl = load(std::string(kJudge) + "budget: {password_file: \"" + dir + "/escape\"}\n");
  // An error, not a service error: --check-config fails on it as start-up does (hostile trial).
  REQUIRE(ctl.errors.size() == 1);
  CHECK(ctl.errors[0].message == "'" + dir + "/escape' holds a control character");
  const auto key = load(
      "judges:\n  - {name: f, kind: llm, criterion: faithfulness, model: "
      "gpt-4o-mini, api_key_file: \"" +
      dir + "/escape\"}\n");
  REQUIRE(key.errors.size() == 1);
  CHECK(key.errors[0].path == "judges[0].api_key_file");
  CHECK(key.errors[0].message.find("holds a control character") != std::string::npos);
  CHECK(key.errors[0].message.find("s3cret") == std::string::npos);

  // Given twice, or both a file and a variable: errors.
  const auto twice = load(std::string(kJudge) +
                          "kafka:\n  properties: {sasl.password: x}\n"
                          "  secret_env: {sasl.password: ASSAY_TEST_SASL_USER}\n"
                          "budget: {password_file: a, password_env: B}\n");
  REQUIRE(twice.errors.size() == 2);
  CHECK(twice.errors[0].path == "kafka.secret_env.sasl.password");
  CHECK(twice.errors[1].path == "budget.password_env");
  std::filesystem::remove_all(dir);
}

TEST_CASE("reload diff: what applies live, what needs a restart") {
  const std::string base =
      "kafka: {brokers: embedded, group_id: g}\n"
      "sampling: {rate: 0.1}\n"
      "judges:\n"
      "  - {name: r, kind: lexical, metric: rouge_l, rate: 1}\n"
      "  - {name: c, kind: check, check: cites_source}\n";
  CHECK(diffConfigs(base, base).empty());
  // Layout, comments and flow vs block style do not count.
  const std::string relaid =
      "# edited\nsampling:\n  rate: 0.1\nkafka: {group_id: g, brokers: embedded}\n"
      "judges:\n  - name: r\n    kind: lexical\n    metric: rouge_l\n    rate: 1\n"
      "  - {name: c, kind: check, check: cites_source}\n";
  CHECK(diffConfigs(base, relaid).empty());
  auto d = diffConfigs(base, base + "log: {level: debug}\n");
  CHECK(d.log);
  CHECK(d.restart.empty());
  std::string edited = base;
  edited.replace(edited.find("rate: 0.1"), 9, "rate: 0.2");
  edited.replace(edited.find("rate: 1}"), 8, "rate: 0.5}");
  d = diffConfigs(base, edited);
  CHECK(d.sampling);
  CHECK(d.judge_rates == std::vector<std::size_t>{0});
  CHECK(d.restart.empty());
  edited.replace(edited.find("group_id: g"), 11, "group_id: h");
  edited.replace(edited.find("cites_source"), 12, "json_valid");
  d = diffConfigs(base, edited);
  CHECK(d.restart == std::vector<std::string>{"kafka"});
  CHECK(d.judges);  // a judge's other options: the judges are rebuilt live
  CHECK(d.changed_judges == std::vector<std::string>{"changed 'r'", "changed 'c'"});
  CHECK(d.judge_rates.empty());  // r's new rate comes with the rebuild
  d = diffConfigs(base, base + "  - {name: b, kind: lexical, metric: bleu}\n");
  CHECK(d.restart.empty());
  CHECK(d.judges);
  CHECK(d.changed_judges == std::vector<std::string>{"added 'b'"});
  // Removing the first judge names it, not the judges whose index moved.
  std::string removed = base;
  removed.erase(removed.find("  - {name: r"),
                removed.find("  - {name: c") - removed.find("  - {name: r"));
  d = diffConfigs(base, removed);
  CHECK(d.changed_judges == std::vector<std::string>{"removed 'r'"});
  std::string swapped =
      "kafka: {brokers: embedded, group_id: g}\nsampling: {rate: 0.1}\njudges:\n"
      "  - {name: c, kind: check, check: cites_source}\n"
      "  - {name: r, kind: lexical, metric: rouge_l, rate: 1}\n";
  d = diffConfigs(base, swapped);
  CHECK(d.changed_judges == std::vector<std::string>{"reordered"});
  // The global cap applies live; any other budget key needs a restart.
  d = diffConfigs(base, base + "budget: {daily_limit_eur: 2}\n");
  CHECK(d.budget_cap);
  CHECK(d.restart.empty());
  d = diffConfigs(base + "budget: {daily_limit_eur: 2, timezone: UTC}\n",
                  base + "budget: {daily_limit_eur: 3, timezone: Europe/Paris}\n");
  CHECK_FALSE(d.budget_cap);
  CHECK(d.restart == std::vector<std::string>{"budget"});
  CHECK(diffConfigs(base, "{[").restart == std::vector<std::string>{"the whole file"});
}

TEST_CASE("kafka.format and the otlp section: values, overrides, errors at their key") {
  const auto ok =
      load(std::string("kafka: {format: otlp_proto}\n"
                       "otlp:\n"
                       "  mapping: gen_ai\n"
                       "  attributes: {tenant: customer.id, generation_kind: 'chat, LLM'}\n"
                       "  join_timeout_ms: 5000\n"
                       "  max_traces: 100\n"
                       "  incomplete: count\n") +
           kJudge);
  REQUIRE(ok.errors.empty());
  CHECK(ok.config.kafka.format == EventFormat::kOtlpProto);
  CHECK(ok.config.otlp.mapping == "gen_ai");
  CHECK(ok.config.otlp.attributes ==
        std::vector<std::pair<std::string, std::string>>{{"tenant", "customer.id"},
                                                         {"generation_kind", "chat, LLM"}});
  CHECK(ok.config.otlp.join_timeout_ms == 5000);
  CHECK(ok.config.otlp.max_traces == 100);
  CHECK_FALSE(ok.config.otlp.judge_incomplete);
  CHECK(load(kJudge).config.kafka.format == EventFormat::kAssayJson);  // the default

  const auto bad = load(std::string("kafka: {format: xml}\n"                  // 1
                                    "otlp:\n"                                 // 2
                                    "  mapping: phoenix\n"                    // 3
                                    "  attributes: {tenent: x, query: ''}\n"  // 4
                                    "  join_timeout_ms: 0\n"                  // 5
                                    "  incomplete: maybe\n") +                // 6
                        kJudge);
  REQUIRE(bad.errors.size() == 6);
  CHECK(bad.errors[0].format() ==
        "t.yaml:1:17: kafka.format: expected assay_json, otlp_json or otlp_proto, got 'xml'");
  CHECK(bad.errors[1].format() ==
        "t.yaml:3:12: otlp.mapping: expected openinference or gen_ai, got 'phoenix'");
  CHECK(bad.errors[2].format() ==
        "t.yaml:4:16: otlp.attributes.tenent: unknown key; did you mean 'tenant'?");
  CHECK(bad.errors[3].format() ==
        "t.yaml:4:34: otlp.attributes.query: expected a non-empty attribute name");
  CHECK(bad.errors[4].format() ==
        "t.yaml:5:20: otlp.join_timeout_ms: must be between 1 and 3600000");
  CHECK(bad.errors[5].format() ==
        "t.yaml:6:15: otlp.incomplete: expected judge or count, got 'maybe'");

  // The section that does not apply to the format is a warning.
  const auto inert = load(std::string("otlp: {mapping: gen_ai}\n") + kJudge);
  REQUIRE(inert.errors.empty());
  REQUIRE(inert.warnings.size() == 1);
  CHECK(inert.warnings[0].path == "otlp");
  const auto inert2 =
      load(std::string("kafka: {format: otlp_json}\nevents: {id: /rid}\n") + kJudge);
  REQUIRE(inert2.warnings.size() == 1);
  CHECK(inert2.warnings[0].path == "events");
}

TEST_CASE("redact: detectors, patterns and their errors at their key") {
  const auto ok = load(std::string("redact:\n"
                                   "  detectors: [email, card]\n"
                                   "  patterns: {employee_id: 'EMP-[0-9]{6}'}\n"
                                   "  sinks: true\n") +
                       kJudge);
  REQUIRE(ok.errors.empty());
  CHECK(ok.config.redact.detectors == std::vector<std::string>{"email", "card"});
  CHECK(ok.config.redact.patterns ==
        std::vector<std::pair<std::string, std::string>>{{"employee_id", "EMP-[0-9]{6}"}});
  CHECK(ok.config.redact.sinks);
  CHECK_FALSE(ok.config.redact.local_judges);
  const auto bad = load(std::string("redact:\n"                               // 1
                                    "  detectors: [email, ssn]\n"             // 2
                                    "  patterns: {x: '(a', 'bad name': a}\n"  // 3
                                    "  sink: true\n") +                       // 4
                        kJudge);
  REQUIRE(bad.errors.size() == 4);
  CHECK(bad.errors[0].format() == "t.yaml:4:3: redact.sink: unknown key; did you mean 'sinks'?");
  CHECK(bad.errors[1].format() ==
        "t.yaml:2:22: redact.detectors[1]: unknown detector 'ssn' (known: email, phone, card, "
        "iban, ip, token)");
  CHECK(bad.errors[2].path == "redact.patterns.x");
  CHECK(bad.errors[2].message.find("pattern 'x': invalid RE2 regex") == 0);
  CHECK(bad.errors[3].path == "redact.patterns.bad name");
  // A pattern named like a detector, or like another pattern but for case, would share its
  // placeholder type: an error at its key (assayd --check-config exits 2 on it).
  const auto taken = load(std::string("redact:\n"                                       // 1
                                      "  detectors: [email]\n"                          // 2
                                      "  patterns: {email: John, emp: a, EMP: b}\n") +  // 3
                          kJudge);
  REQUIRE(taken.errors.size() == 2);
  CHECK(taken.errors[0].path == "redact.patterns.email");
  CHECK(taken.errors[0].message.find("pattern name 'email' is taken") == 0);
  CHECK(taken.errors[1].format().find("t.yaml:3:35: redact.patterns.EMP: pattern name 'EMP' is "
                                      "taken") == 0);
  CHECK(taken.warnings.empty());  // an error said it: no "has no effect" on top
  // 40 patterns: one error, with the count (it was one per pattern past the 32nd, each "33").
  std::string forty = "redact:\n  patterns:\n";
  for (int i = 0; i < 40; ++i)
    forty += "    p" + std::to_string(i) + ": 'x" + std::to_string(i) + "'\n";
  const auto many = load(forty + kJudge);
  REQUIRE(many.errors.size() == 1);
  CHECK(many.errors[0].format().find("t.yaml:3:5: redact.patterns: 40 patterns, at most 32") == 0);
  const auto only_bad = load(std::string("redact: {detectors: [ssn]}\n") + kJudge);
  CHECK(only_bad.errors.size() == 1);
  CHECK(only_bad.warnings.empty());
  // Nothing on: a warning.
  const auto inert = load(std::string("redact: {sinks: true}\n") + kJudge);
  REQUIRE(inert.errors.empty());
  REQUIRE(inert.warnings.size() == 1);
  CHECK(inert.warnings[0].path == "redact");
}
