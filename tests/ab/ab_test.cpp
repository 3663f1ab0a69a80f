// The A/B router and its experiments' store (daemon/ab/ab.hpp): the hash split, the decision,
// the memory store and the Redis store (a real redis-server started here) against the
// reference sequential test, two instances on one Redis, and the router's answers.
#include "daemon/ab/ab.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <thread>

#include "../llm/redis_server.hpp"
#include "tracking/sequential.hpp"

using namespace assay;
using namespace assay::ab;
using namespace std::chrono_literals;

namespace {

AbExperiment twoArms(double a = 50, double b = 50) {
  return AbExperiment{"answer-style", {"control", "concise"}, {a, b}};
}

AbOptions optionsWith(AbExperiment e, std::string decision = "anytime") {
  AbOptions o;
  o.experiments = {std::move(e)};
  o.decision = std::move(decision);
  return o;
}

BudgetOptions redisBudget(const test::RedisServer& server, const std::string& prefix) {
  BudgetOptions b;
  b.store = server.url();
  b.key_prefix = prefix;
  return b;
}

/// 1–5 stars: arm 0 centred on 3.6, arm 1 on 3.9 (a real difference), from `seed`.
std::vector<std::pair<std::size_t, int>> ratings(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::discrete_distribution<int> a({5, 10, 20, 40, 25}), b({2, 6, 17, 42, 33});
  std::vector<std::pair<std::size_t, int>> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t arm = i % 2;
    out.emplace_back(arm, 1 + (arm == 0 ? a(rng) : b(rng)));
  }
  return out;
}

/// The router's JSON answer's "arm".
std::string armOf(const std::string& body) {
  const auto at = body.find("\"arm\":\"");
  REQUIRE(at != std::string::npos);
  return body.substr(at + 7, body.find('"', at + 7) - at - 7);
}

}  // namespace

TEST_CASE("the hash split: 10,000 units within 2 % of 50/50, 90/10 near 10 %, stable") {
  const auto e = twoArms();
  std::size_t first = 0;
  for (int u = 0; u < 10'000; ++u) first += hashArm(e, "user-" + std::to_string(u)) == 0;
  CHECK(first >= 4800);
  CHECK(first <= 5200);
  const auto skewed = twoArms(90, 10);
  std::size_t small = 0;
  for (int u = 0; u < 10'000; ++u) small += hashArm(skewed, "user-" + std::to_string(u)) == 1;
  CHECK(small >= 900);
  CHECK(small <= 1100);
  // A documented function of (experiment, unit): the same answer in every process and version.
  CHECK(hashArm(e, "user-42") == hashArm(twoArms(), "user-42"));
  AbExperiment renamed = e;
  renamed.name = "other";
  std::size_t same = 0;
  for (int u = 0; u < 1000; ++u)
    same += hashArm(e, std::to_string(u)) == hashArm(renamed, std::to_string(u));
  CHECK(same < 600);  // another experiment splits independently
}

TEST_CASE("decide: the issue's table, chi-square 3.908 with 3 dof, p 0.2715 (scipy), undecided") {
  Table t;
  t.arms = {{0, 0, 5, 10, 15}, {0, 3, 4, 12, 11}};
  t.total = 60;
  const auto d = decide(t, optionsWith(twoArms(), "chi_square"));
  REQUIRE(d.chi);
  // scipy.stats.chi2_contingency([[0,5,10,15],[3,4,12,11]], correction=False): the zero
  // column (1 star) dropped first.
  CHECK(d.chi->statistic == doctest::Approx(3.9081).epsilon(1e-4));
  CHECK(d.chi->dof == 3);
  CHECK(d.chi->p_value == doctest::Approx(0.2715).epsilon(1e-3));
  CHECK(d.ratings == std::vector<std::int64_t>{30, 30});
  CHECK(*d.mean_stars[0] == doctest::Approx(4.3333).epsilon(1e-4));
  CHECK_FALSE(d.decided);
  CHECK_FALSE(d.winner);
}

TEST_CASE("decide: p below alpha but an arm under 30 ratings is not decided; then it is") {
  Table t;
  t.arms = {{20, 5, 0, 0, 0}, {0, 0, 0, 5, 20}};
  t.max_log_e = std::log(1000.0);  // anytime p 0.001
  auto d = decide(t, optionsWith(twoArms()));
  CHECK(d.anytime_p == doctest::Approx(0.001));
  CHECK_FALSE(d.decided);  // 25 ratings per arm
  t.arms = {{25, 5, 0, 0, 0}, {0, 0, 0, 5, 25}};
  d = decide(t, optionsWith(twoArms()));
  CHECK(d.decided);
  CHECK(*d.winner == 1);
}

TEST_CASE("the memory store: the table and the sequential test's sup log M, ids counted once") {
  auto store = makeStore(BudgetOptions{});
  const auto e = twoArms();
  stats::SequentialIndependenceTest reference(2, 5);
  std::size_t i = 0;
  for (const auto& [arm, stars] : ratings(400, 1)) {
    CHECK(store->rate(e, arm, stars, "r" + std::to_string(i++)) == Store::Rated::kCounted);
    reference.add(arm, static_cast<std::size_t>(stars - 1));
  }
  CHECK(store->rate(e, 0, 5, "r7") == Store::Rated::kDuplicate);
  const auto t = store->table(e);
  REQUIRE(t);
  CHECK(t->total == 400);
  CHECK(t->max_log_e == doctest::Approx(reference.maxLogE()).epsilon(1e-12));
  CHECK(decide(*t, optionsWith(e)).anytime_p == doctest::Approx(reference.pValue()));
  CHECK(*store->assign(e, "u1", "control", 60'000) == "control");
  CHECK(*store->assign(e, "u1", "concise", 60'000) == "control");  // cached
  CHECK(*store->cached(e, "u1") == "control");
  CHECK(*store->assign(e, "u2", "concise", 1) == "concise");
  std::this_thread::sleep_for(5ms);
  CHECK(store->cached(e, "u2")->empty());  // expired
}

TEST_CASE("the Redis store matches the reference test, and two instances share one table") {
  test::RedisServer redis;
  auto a = makeStore(redisBudget(redis, "assay:g:"));
  auto b = makeStore(redisBudget(redis, "assay:g:"));
  auto other_group = makeStore(redisBudget(redis, "assay:h:"));
  const auto e = twoArms();
  stats::SequentialIndependenceTest reference(2, 5);
  std::size_t k = 0;
  for (const auto& [arm, stars] : ratings(600, 2)) {
    // Alternate instances: the order in Redis is the order of the ratings.
    auto& store = k % 3 == 0 ? *a : *b;
    REQUIRE(store.rate(e, arm, stars, "r" + std::to_string(k)) == Store::Rated::kCounted);
    reference.add(arm, static_cast<std::size_t>(stars - 1));
    ++k;
  }
  CHECK(a->rate(e, 1, 5, "r3") == Store::Rated::kDuplicate);  // counted once, by any instance
  const auto ta = a->table(e), tb = b->table(e);
  REQUIRE(ta);
  REQUIRE(tb);
  CHECK(ta->total == 600);
  CHECK(ta->arms == tb->arms);
  CHECK(ta->max_log_e == tb->max_log_e);
  CHECK(ta->max_log_e == doctest::Approx(reference.maxLogE()).epsilon(1e-9));
  const auto da = decide(*ta, optionsWith(e)), db = decide(*tb, optionsWith(e));
  REQUIRE(da.chi);
  CHECK(da.chi->p_value == db.chi->p_value);
  CHECK(da.anytime_p == db.anytime_p);
  CHECK(da.anytime_p == doctest::Approx(reference.pValue()).epsilon(1e-9));
  // Another key prefix (another consumer group) is another table.
  CHECK(other_group->table(e)->total == 0);
  // The router's cache: the first answer holds for every instance while it lives.
  CHECK(*a->assign(e, "u1", "concise", 30'000) == "concise");
  CHECK(*b->assign(e, "u1", "control", 30'000) == "concise");
  CHECK(*b->cached(e, "u1") == "concise");
  CHECK(b->cached(e, "nobody")->empty());
  redis.stop();
  CHECK_FALSE(a->table(e));  // the store does not answer: nullopt, never a made-up table
  CHECK(a->rate(e, 0, 3, "late") == Store::Rated::kUnavailable);
}

TEST_CASE("the router: one unit one arm on 100 calls, errors, and the winner once decided") {
  prometheus::Registry registry;
  AbService service(optionsWith(twoArms()), makeStore(BudgetOptions{}), registry);
  const auto [status, body] = service.route("experiment=answer-style&unit=user%2D7");
  REQUIRE(status == 200);
  CHECK(body.find("\"unit\":\"user-7\"") != std::string::npos);
  CHECK(body.find("\"decided\":false") != std::string::npos);
  const std::string arm = armOf(body);
  CHECK(arm == twoArms().arms[hashArm(twoArms(), "user-7")]);
  for (int i = 0; i < 100; ++i)
    CHECK(armOf(service.route("unit=user-7&experiment=answer-style").second) == arm);
  CHECK(service.route("experiment=answer-style").first == 400);
  // Issue 28: %FF was reflected as a raw byte, an answer that is not UTF-8.
  const auto [bad_status, bad_body] = service.route("experiment=answer-style&unit=u%FF");
  CHECK(bad_status == 400);
  CHECK(bad_body == "{\"error\":\"experiment and unit must be UTF-8 once percent-decoded\"}\n");
  CHECK(service.route("experiment=%ED%A0%80&unit=u").first == 400);
  CHECK(service.route("experiment=answer-style&unit=caf%C3%A9").first == 200);
  CHECK(service.route("experiment=nope&unit=u").first == 404);
  // Ratings: by arm name, or by the unit the router served; an unknown arm is counted apart.
  const auto* e = service.find("answer-style");
  REQUIRE(e);
  CHECK(std::string(service.rate(*e, "bogus", "", 4, "x")) == "unknown_arm");
  CHECK(std::string(service.rate(*e, "", "", 4, "x")) == "no_variant");
  CHECK(std::string(service.rate(*e, "", "user-7", 4, "by-unit")) == "joined");
  std::size_t k = 0;
  for (const auto& [a, stars] : ratings(3000, 3))
    service.rate(*e, e->arms[a], "", stars, "r" + std::to_string(k++));
  service.sync();
  const auto states = service.snapshot();
  REQUIRE(states.size() == 1);
  CHECK(states[0].table.total == 3001);
  const auto& d = states[0].decision;
  REQUIRE(d.decided);  // 3.6 vs 3.9 stars over 3,000 ratings: the anytime-valid test rejects
  CHECK(e->arms[*d.winner] == "concise");
  const auto [s2, decided] = service.route("experiment=answer-style&unit=anyone");
  CHECK(s2 == 200);
  CHECK(armOf(decided) == "concise");
  CHECK(decided.find("\"decided\":true") != std::string::npos);
}

namespace {
/// Rates `n` ratings of `stars` on `arm`, ids from `prefix`.
void rateMany(AbService& s, const AbExperiment& e, const std::string& arm, int stars, int n,
              const std::string& prefix) {
  for (int i = 0; i < n; ++i) s.rate(e, arm, "", stars, prefix + std::to_string(i));
}
}  // namespace

TEST_CASE("chi_square: decided at 40/40 is recorded once; 20 more ratings do not un-decide it") {
  // The trial: decided at p 0.0020 with 40 ratings per arm, then p 0.278 after 20 more;
  // the router went back to 50/50. A decision is an event: it stays.
  prometheus::Registry registry;
  AbService service(optionsWith(twoArms(), "chi_square"), makeStore(BudgetOptions{}), registry);
  const auto* e = service.find("answer-style");
  REQUIRE(e);
  // control: 40 ratings, mean 3.0 (3 stars x 20, 2 x 10, 4 x 10); concise: 40, mean 4.0.
  rateMany(service, *e, "control", 3, 20, "c3-");
  rateMany(service, *e, "control", 2, 10, "c2-");
  rateMany(service, *e, "control", 4, 10, "c4-");
  rateMany(service, *e, "concise", 4, 30, "k4-");
  rateMany(service, *e, "concise", 3, 5, "k3-");
  rateMany(service, *e, "concise", 5, 5, "k5-");
  service.sync();
  auto s = service.snapshot()[0];
  REQUIRE(s.decision.chi);
  // scipy.stats.chi2_contingency([[10,20,10,0],[0,5,30,5]], correction=False): p 1.98e-07.
  CHECK(s.decision.chi->p_value == doctest::Approx(1.98e-07).epsilon(0.01));
  REQUIRE(s.table.recorded);
  const RecordedDecision first = *s.table.recorded;
  CHECK(e->arms[first.winner] == "concise");
  CHECK(first.rule == "chi_square");
  CHECK(first.p == s.decision.chi->p_value);
  CHECK(first.ratings == std::vector<std::int64_t>{40, 40});
  CHECK(first.mean_stars == std::vector<double>{3.0, 4.0});
  CHECK(armOf(service.route("experiment=answer-style&unit=u1").second) == "concise");
  // Later ratings turn the table the other way: the rule no longer holds, nothing changes.
  rateMany(service, *e, "concise", 1, 300, "k1-");
  rateMany(service, *e, "control", 5, 20, "c5-");
  service.sync();
  s = service.snapshot()[0];
  CHECK(s.table.total == 400);
  CHECK(*s.decision.mean_stars[1] < *s.decision.mean_stars[0]);  // control rates higher now
  REQUIRE(s.table.recorded);
  CHECK(s.table.recorded->winner == first.winner);
  CHECK(s.table.recorded->at_ms == first.at_ms);
  CHECK(s.table.recorded->ratings == first.ratings);
  for (int i = 0; i < 50; ++i) {
    const auto [status, body] = service.route("experiment=answer-style&unit=u" + std::to_string(i));
    CHECK(armOf(body) == "concise");
    CHECK(body.find("\"decided\":true") != std::string::npos);
  }
}

TEST_CASE("the memory store: a decision is recorded once; a reset starts an empty run") {
  auto store = makeStore(BudgetOptions{});
  const auto e = twoArms();
  CHECK(store->rate(e, 1, 5, "a") == Store::Rated::kCounted);
  RecordedDecision d{1, 0.01, "anytime", 1000, {0, 1}, {0, 5}};
  CHECK(store->record(e, d));
  RecordedDecision other = d;
  other.winner = 0;
  CHECK(store->record(e, other));
  CHECK(store->table(e)->recorded->winner == 1);  // the first stays
  CHECK(store->reset(e, 2000) == 1);
  const auto t = store->table(e);
  CHECK(t->run == 1);
  CHECK(t->total == 0);
  CHECK(t->max_log_e == 0);
  CHECK_FALSE(t->recorded);
  CHECK(store->rate(e, 1, 5, "a") == Store::Rated::kDuplicate);  // ids stay counted
  CHECK(store->reset(e, 3000) == 2);
}

TEST_CASE("Redis: two instances record one decision; a reset is seen by both and splits again") {
  test::RedisServer redis;
  prometheus::Registry ra, rb;
  AbService a(optionsWith(twoArms()), makeStore(redisBudget(redis, "assay:g:")), ra);
  AbService b(optionsWith(twoArms()), makeStore(redisBudget(redis, "assay:g:")), rb);
  const auto* e = a.find("answer-style");
  std::size_t k = 0;
  for (const auto& [arm, stars] : ratings(3000, 3))
    (k % 2 ? a : b).rate(*e, e->arms[arm], "", stars, "r" + std::to_string(k)), ++k;
  a.sync();
  b.sync();
  a.sync();
  const auto sa = a.snapshot()[0], sb = b.snapshot()[0];
  REQUIRE(sa.table.recorded);
  REQUIRE(sb.table.recorded);
  // One record for both: the same winner, time and counts, whichever instance wrote it.
  CHECK(sa.table.recorded->at_ms == sb.table.recorded->at_ms);
  CHECK(sa.table.recorded->winner == sb.table.recorded->winner);
  CHECK(sa.table.recorded->ratings == sb.table.recorded->ratings);
  CHECK(e->arms[sa.table.recorded->winner] == "concise");
  CHECK(sa.table.recorded->p < 0.05);
  CHECK(sa.table.recorded->p == sa.table.recorded->p);  // finite, read back exactly
  // The store keeps the first record: a second one does not replace it.
  auto store = makeStore(redisBudget(redis, "assay:g:"));
  RecordedDecision other = *sa.table.recorded;
  other.winner = 0;
  CHECK(store->record(*e, other));
  CHECK(store->table(*e)->recorded->winner == sa.table.recorded->winner);
  // Reset: archived, run 1, no decision; both instances route by the split again.
  REQUIRE(store->reset(*e, 1234) == 1);
  a.sync();
  b.sync();
  for (AbService* s : {&a, &b}) {
    const auto st = s->snapshot()[0];
    CHECK(st.table.run == 1);
    CHECK(st.table.total == 0);
    CHECK_FALSE(st.table.recorded);
    const auto [status, body] = s->route("experiment=answer-style&unit=user-7");
    CHECK(body.find("\"decided\":false") != std::string::npos);
    CHECK(armOf(body) == e->arms[hashArm(*e, "user-7")]);
  }
  // The archive holds the old run's table and its decision, under the reset's time.
  CHECK(test::rawCommands(redis.port(), {"EVAL \"local k = redis.call('KEYS', "
                                         "'assay:g:ab:{answer-style}:*:table:reset:1234') return "
                                         "redis.call('HGET', k[1], 'd:arm')\" 0"}) ==
        std::to_string(sa.table.recorded->winner));
}

TEST_CASE("Redis: a hand-edited table is read without a crash; reset repairs it") {
  test::RedisServer redis;
  auto store = makeStore(redisBudget(redis, "assay:g:"));
  const auto e = twoArms();
  REQUIRE(store->rate(e, 1, 5, "a") == Store::Rated::kCounted);
  // The table's key, found by its pattern (TAG is a hash of the arms).
  const std::string key_of =
      "local k = redis.call('KEYS', 'assay:g:ab:{answer-style}:*:table') return ";
  auto edit = [&](const std::string& field, const std::string& value) {
    CHECK(test::rawCommands(redis.port(), {"EVAL \"" + key_of + "redis.call('HSET', k[1], '" +
                                           field + "', '" + value + "')\" 0"})
              .rfind(':', 0) == 0);  // ":1" new field, ":0" replaced
  };
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"total", "abc"},
                                                        {"run", "1e400"},
                                                        {"maxloge", "zz"},
                                                        {"n:0:2", "-3"},
                                                        {"d:arm", "1abc"},
                                                        {"d:p", "nan"},
                                                        {"d:rule", "anytime\x1b[31m"}})
    edit(field, value);
  const auto t = store->table(e);
  REQUIRE(t);  // read, not a crash (std::stoll threw before)
  CHECK(t->total == 0);
  CHECK(t->run == 0);
  CHECK(t->max_log_e == 0);
  CHECK(t->arms[0][1] == 0);
  CHECK(t->arms[1][4] == 1);  // what reads is kept
  CHECK_FALSE(t->recorded);   // better undecided than a made-up winner
  // The documented repair: reset archives the table; the run counts from what reads.
  CHECK(store->reset(e, 99) == 1);
  const auto fresh = store->table(e);
  CHECK(fresh->run == 1);
  CHECK(fresh->total == 0);
  // A decision whose fields all read is read back exactly.
  RecordedDecision d{1, 0.0123, "chi_square", 1234, {40, 41}, {3.0, 3.9}};
  REQUIRE(store->record(e, d));
  const auto back = store->table(e)->recorded;
  REQUIRE(back);
  CHECK(back->winner == 1);
  CHECK(back->p == 0.0123);
  CHECK(back->rule == "chi_square");
  CHECK(back->ratings == d.ratings);
  CHECK(back->mean_stars == d.mean_stars);
}
