#pragma once
/// The A/B router and its experiments' ratings (docs/ab.md), one answer for every instance.
///
/// - Assignment: a unit (a user, a session) goes to the arm whose cumulative share covers
///   xxh64("EXPERIMENT\0UNIT") / 2^64 (hashArm), so the split follows `ab.experiments[].arms`
///   and needs no state; the router caches each unit's arm in the store for
///   `ab.assignment_ttl` (30 s), so one user keeps one arm while the cache lives, and a rating
///   that names its unit finds the arm it was served. Once an experiment is decided everyone
///   goes to the winner.
/// - Ratings: the variant × stars table and the anytime-valid test's state live in the store
///   (`budget.store`): with Redis, every instance increments the same table atomically (one Lua
///   script per rating, which also counts each rating id once) and computes the same chi-square
///   and the same decision; with `memory` they are per process.
/// - Decision: p < ab.alpha (0.05) and every arm has ab.min_ratings_per_arm (30) ratings; p is
///   the anytime-valid sequential test's (tracking/sequential.hpp; valid however often
///   it is looked at) unless `ab.decision: chi_square` asks for the seed's rule (Pearson's
///   chi-square at every look, whose real false-positive rate is far above alpha). The first
///   time the rule holds, the decision is recorded in the store (winner, p, rule, time, the
///   ratings and mean stars per arm), once for every instance: from then on it is final.
///   Ratings keep being counted and reported beside it, and never re-decide it; only a reset
///   (`assay ab reset`, Store::reset) starts the experiment again.

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "config/options.hpp"
#include "tracking/stats.hpp"

namespace assay::ab {

/// Counts of 1..5 stars of one arm.
using Stars = std::array<std::int64_t, 5>;

/// The arm of `unit`: xxh64 (seed 0) of the experiment's name, a NUL byte and the unit, read
/// as a uniform number in [0, 1), against the arms' cumulative shares. Deterministic across
/// instances, versions and restarts.
std::size_t hashArm(const AbExperiment& experiment, std::string_view unit);

/// A decision as recorded in the store: final until the experiment is reset.
struct RecordedDecision {
  std::size_t winner = 0;  ///< arm index: the highest mean stars when the rule first held
  double p = 1;            ///< the rule's p-value then, [0, 1]
  std::string rule;        ///< "anytime" or "chi_square"
  std::int64_t at_ms = 0;  ///< when, Unix epoch milliseconds
  std::vector<std::int64_t> ratings;  ///< per arm, then
  std::vector<double> mean_stars;     ///< per arm, then (1..5; 0 for an arm without ratings)
};

/// What the store holds for one experiment.
struct Table {
  std::vector<Stars> arms;  ///< per configured arm, in configuration order
  double max_log_e = 0;     ///< sup log M: the anytime-valid p-value is min(1, e^−max_log_e)
  std::int64_t total = 0;   ///< ratings counted
  std::optional<RecordedDecision> recorded;  ///< the decision, once made
  std::int64_t run = 0;                      ///< resets so far (0 until the first `assay ab reset`)
};

struct Decision {
  std::optional<stats::ChiSquare> chi;  ///< nullopt: fewer than two rated arms or star levels
  double anytime_p = 1;                 ///< min(1, 1 / sup M)
  std::vector<std::int64_t> ratings;    ///< per arm
  std::vector<std::optional<double>> mean_stars;  ///< per arm; nullopt without ratings
  bool decided = false;               ///< the rule holds on this table (recorded or not)
  std::optional<std::size_t> winner;  ///< when decided: the arm with the highest mean stars
  double p = 1;                       ///< the rule's p-value (anytime_p or the chi-square's)
};

/// The rule on `table` under `options` (the rule, alpha, the minimum per arm), whatever is
/// recorded: what recordedFrom() records the first time it holds.
Decision decide(const Table& table, const AbOptions& options);

/// The record of `d` (decided) at `at_ms` under `options`' rule.
RecordedDecision recordedFrom(const Decision& d, const AbOptions& options, std::int64_t at_ms);

/// Where assignments and tables live: `budget.store` ("memory" or a redis:// URL), keys under
/// `budget.key_prefix`. Thread-safe; a Redis round trip each (1 s timeout).
class Store {
 public:
  enum class Rated { kCounted, kDuplicate, kUnavailable };
  virtual ~Store() = default;
  /// The unit's cached arm; when none, `proposed` is stored for `ttl_ms` and returned.
  /// nullopt when the store does not answer.
  virtual std::optional<std::string> assign(const AbExperiment& e, std::string_view unit,
                                            const std::string& proposed, std::int64_t ttl_ms) = 0;
  /// The unit's cached arm, "" when none; nullopt when the store does not answer.
  virtual std::optional<std::string> cached(const AbExperiment& e, std::string_view unit) = 0;
  /// Counts one rating (`arm` an index into e.arms, `stars` 1..5) unless rating `id` was
  /// already counted in this experiment (7 days), and advances the sequential test, atomically.
  virtual Rated rate(const AbExperiment& e, std::size_t arm, int stars, std::string_view id) = 0;
  virtual std::optional<Table> table(const AbExperiment& e) = 0;
  /// Records `d` unless a decision is recorded already, atomically (the first instance wins);
  /// false when the store does not answer. Read the table again for the one that holds.
  virtual bool record(const AbExperiment& e, const RecordedDecision& d) = 0;
  /// Starts the experiment again: the table (ratings, sequential test, decision) is archived
  /// (Redis: renamed to PREFIXab:{NAME}:TAG:table:reset:AT_MS; memory: dropped) and an empty
  /// one takes its place with `run` one higher. Rating ids already counted stay counted. The
  /// new run number, or nullopt when the store does not answer.
  virtual std::optional<std::int64_t> reset(const AbExperiment& e, std::int64_t at_ms) = 0;
  virtual bool shared() const = 0;
};

/// The store of `budget` (BudgetOptions: store URL, key prefix, password). Throws
/// std::invalid_argument for a malformed URL.
std::unique_ptr<Store> makeStore(const BudgetOptions& budget);

/// The daemon's experiments: ratings queued to a thread of their own (no Redis round trip on
/// the consuming thread), tables and decisions refreshed every second, and the router.
class AbService {
 public:
  AbService(AbOptions options, std::unique_ptr<Store> store, prometheus::Registry& registry);
  ~AbService();
  AbService(const AbService&) = delete;
  AbService& operator=(const AbService&) = delete;

  const AbExperiment* find(std::string_view experiment) const;

  /// Queues one rating of `experiment` (configured: found by its name, so any copy of the
  /// configuration will do; "unknown_experiment" otherwise): its arm by name, or, when `arm` is
  /// empty, the arm the router gave `unit` (its cached assignment, else the hash). Returns the
  /// outcome for assay_feedback_events_total: "joined" (queued), "unknown_arm", "no_variant"
  /// (neither an arm nor a unit) or "backlog_full" (100,000 ratings wait). What the store made of
  /// it is counted in assay_ab_ratings_recorded_total{experiment, outcome}.
  const char* rate(const AbExperiment& experiment, const std::string& arm, const std::string& unit,
                   int stars, const std::string& id);

  /// `GET /v1/route?experiment=NAME&unit=ID`: (HTTP status, JSON body). 200 {"experiment",
  /// "unit", "arm", "decided", "cached"} (cached: the store answered; else the hash alone);
  /// 400 without both parameters, 404 for an unknown experiment.
  std::pair<int, std::string> route(std::string_view query);

  struct State {
    std::string experiment;
    std::vector<std::string> arms;
    bool available = false;  ///< the store answered the last refresh
    Table table;             ///< table.recorded: the decision in force (final until a reset)
    Decision decision;  ///< the rule on the current table (ratings since the decision included)
    bool seen = false;  ///< the store has answered at least once since start
  };
  /// The last refresh of every experiment.
  std::vector<State> snapshot() const;
  /// Waits until every rating queued so far is in the store, then refreshes (tests, stop).
  void sync();

 private:
  struct Pending {
    std::size_t experiment;
    std::string arm, unit, id;
    int stars;
  };
  void loop();
  void refresh();                 // worker thread
  void record(const Pending& p);  // worker thread

  const AbOptions options_;
  std::unique_ptr<Store> store_;
  prometheus::Family<prometheus::Counter>& recorded_;
  mutable std::mutex mu_;  // guards the queue and states_
  std::condition_variable cv_, idle_cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::uint64_t sync_requests_ = 0, syncs_done_ = 0;
  std::vector<State> states_;
  std::thread thread_;  // last
};

}  // namespace assay::ab
