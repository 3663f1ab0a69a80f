// `assay ab status|reset` against a real redis-server holding an experiment's table.
#include "cli/ab_command.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../llm/redis_server.hpp"
#include "cli/cli.hpp"
#include "daemon/ab/ab.hpp"
#include "tests/cli/run_cli.hpp"

using namespace assay;

namespace {
using test::runCli;
}  // namespace

TEST_CASE("assay ab status shows the recorded decision; reset archives it and starts run 1") {
  test::RedisServer redis;
  const std::string config = "/tmp/assay_ab_cli_" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(config) << "kafka: {brokers: embedded, topic: t, group_id: g, feedback_topic: f}\n"
                        << "budget: {store: \"" << redis.url() << "\"}\n"
                        << "judges: [{name: n, kind: check, check: answer_nonempty}]\n"
                        << "ab:\n  decision: chi_square\n  experiments:\n"
                        << "    - {name: answer-style, arms: [control, concise]}\n"
                        << "    - {name: other, arms: [a, b]}\n";
  // 40 ratings per arm through the store, and the decision as an instance records it.
  BudgetOptions budget;
  budget.store = redis.url();
  budget.key_prefix = "assay:g:";
  auto store = ab::makeStore(budget);
  const AbExperiment e{"answer-style", {"control", "concise"}, {1, 1}};
  for (int i = 0; i < 40; ++i) {
    REQUIRE(store->rate(e, 0, i < 20 ? 3 : 2, "c" + std::to_string(i)) ==
            ab::Store::Rated::kCounted);
    REQUIRE(store->rate(e, 1, i < 30 ? 4 : 5, "k" + std::to_string(i)) ==
            ab::Store::Rated::kCounted);
  }
  AbOptions options;
  options.decision = "chi_square";
  const auto d = ab::decide(*store->table(e), options);
  REQUIRE(d.decided);
  REQUIRE(store->record(e, ab::recordedFrom(d, options, 1'764'000'000'000)));
  REQUIRE(store->rate(e, 0, 5, "late") == ab::Store::Rated::kCounted);

  auto s = runCli({"ab", "status", "--config", config, "--experiment", "answer-style"});
  CAPTURE(s.err);
  REQUIRE(s.code == 0);
  CHECK(s.out.find("experiment answer-style (run 0, 81 ratings)") != std::string::npos);
  CHECK(s.out.find("  control                41 ratings  mean stars 2.56\n") != std::string::npos);
  CHECK(s.out.find("  decision: winner concise at 2025-11-24T16:00:00Z, chi_square p ") !=
        std::string::npos);
  CHECK(s.out.find("on 80 ratings; 1 since, which do not re-decide it") != std::string::npos);
  // Every experiment without --experiment; one never rated has no decision.
  const auto all = runCli({"ab", "status", "--config", config});
  CHECK(all.out.find("experiment other (run 0, 0 ratings)") != std::string::npos);
  CHECK(all.out.find("decision: none yet") != std::string::npos);

  auto refused = runCli({"ab", "reset", "--config", config, "--experiment", "answer-style"});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("add --yes") != std::string::npos);
  CHECK(runCli({"ab", "reset", "--config", config, "--experiment", "nope", "--yes"})
            .err.find("no experiment 'nope'") != std::string::npos);
  const auto r =
      runCli({"ab", "reset", "--config", config, "--experiment", "answer-style", "--yes"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("experiment answer-style reset: run 1 starts; 81 ratings and the decision "
                   "(winner concise) archived") != std::string::npos);
  const auto t = store->table(e);
  CHECK(t->run == 1);
  CHECK(t->total == 0);
  CHECK_FALSE(t->recorded);
  s = runCli({"ab", "status", "--config", config, "--experiment", "answer-style"});
  CHECK(s.out.find("experiment answer-style (run 1, 0 ratings)") != std::string::npos);
  redis.stop();
  const auto down = runCli({"ab", "status", "--config", config});
  CHECK(down.code == 1);
  CHECK(down.err.find("does not answer") != std::string::npos);
  std::filesystem::remove(config);
}

TEST_CASE("assay ab: a memory store has nothing shared to show or reset") {
  const std::string config = "/tmp/assay_ab_cli_mem_" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(config) << "kafka: {brokers: embedded, topic: t, group_id: g, feedback_topic: f}\n"
                        << "judges: [{name: n, kind: check, check: answer_nonempty}]\n"
                        << "ab: {experiments: [{name: x, arms: [a, b]}]}\n";
  const auto r = runCli({"ab", "status", "--config", config});
  CHECK(r.code == 2);
  CHECK(r.err.find("which a restart of assayd resets") != std::string::npos);
  CHECK(runCli({"ab", "frobnicate"}).err.find("expected status or reset") != std::string::npos);
  std::filesystem::remove(config);
}
