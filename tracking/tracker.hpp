#pragma once
/// Watching the judges (issue 4): every judge's successful scores (failures never enter), joined
/// by event id with the other judges' scores and with user feedback, summarised as the
/// Prometheus gauges of docs/metrics.md. A series appears only once its
/// statistic is defined and disappears when it no longer is (never 0, 1 or NaN in its place).
///
/// Per judge × criterion (a rolling window of tracking.window scores no older than
/// tracking.window_seconds):
///   assay_judge_max_score_ratio, assay_judge_min_score_ratio  share at the top / bottom, [0, 1]
///   assay_judge_distinct_scores, assay_judge_score_entropy    levels used; entropy in [0, 1]
///   assay_judge_window_size                                   scores in the window
///   assay_judge_lenient          1 when the top share > tracking.leniency_max_ratio over at
///                                least tracking.min_samples scores
///   assay_score_window_mean
///   assay_score_baseline_mean, assay_score_recent_mean, assay_score_drift_p_value,
///   assay_score_drift            two-sided Mann–Whitney U, tie-corrected; 1 when p <
///                                tracking.drift_alpha and |recent − baseline| ≥ drift_min_delta
/// Per judge × criterion × variant (variant folded to tracking.max_label_values):
///   assay_score_mean, assay_score_sd, assay_score_n, assay_score_ci95_low/high
///                                (mean ± q·sd/√n, q = Student's t(0.975, n − 1), cut to the
///                                judge's scale, from tracking.min_interval_n scores;
///                                stats::meanInterval95), and
///   assay_score_ci95_overlap{variant_a, variant_b}  1 when two variants' intervals overlap
/// Agreement (sampling is nested, so judges of one criterion see the same events):
///   assay_judge_agreement_kendall_tau, _spearman, _pairs{criterion, judge_a, judge_b} over the
///   last tracking.window events both judged (the statistics from tracking.min_pairs pairs,
///   like the human Spearman and the kappa below; the _pairs gauges always); _level{..., level}
///   high (tau ≥ 0.7), moderate (0.4 ≤ tau < 0.7), low (< 0.4): the current level's series is 1,
///   the others 0.
/// Feedback (kafka.feedback_topic, docs/events.md), joined by id to events this process judged:
///   assay_judge_human_spearman, assay_judge_human_pairs{judge, criterion}
///   assay_annotator_kappa{criterion, annotator_a, annotator_b, weighting = none|quadratic}
///   assay_ab_p_value, assay_ab_decided{experiment}, assay_ab_ratings{experiment, variant}:
///     experiment = the event's `app` ("default" when absent); Pearson's chi-square test of
///     independence on the variant × stars table; decided = p < 0.05 and every arm ≥ 30 ratings
///   assay_feedback_events_total{kind, outcome}, assay_feedback_pending
/// assay_judge_scores_rejected_total{judge}: scores outside the judge's scale or not finite.
///
/// Thread-safe: noteEvent/record from workers and LLM callbacks, onFeedback and refresh from the
/// poll thread. One mutex guards the state; refresh copies what it needs and computes outside.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/options.hpp"
#include "core/label_folder.hpp"
#include "core/rate_limited_log.hpp"
#include "tracking/stats.hpp"
#include "tracking/window.hpp"

namespace assay {

struct TrackedJudge {
  std::string name, criterion;
  double min_score, max_score;
  /// false for pass/fail checks: a check that almost always passes is healthy, not lenient,
  /// so assay_judge_lenient is not exported for it (the top-score share still is).
  bool graded = true;
  /// Its version (core/judge_version.hpp; "" when built without one): every statistic is
  /// computed within one version, and its series carry it as the judge_version label.
  std::string version{};
};

/// One feedback event (docs/events.md, "Feedback events").
struct Feedback {
  enum class Kind { kRating, kAnnotation };
  Kind kind = Kind::kRating;
  std::string id;
  int value = 0;          ///< rating: stars 1..5; annotation: an integer level 0..100
  std::string criterion;  ///< annotation only
  std::string annotator;  ///< annotation only; "unknown" when absent
  /// rating only, optional: the experiment and arm of the rated request, or the unit the A/B
  /// router assigned (its arm is then the router's); a rating naming its experiment counts
  /// without its event being sampled here.
  std::string experiment{}, variant{}, unit{};
  /// The feedback message's Kafka partition (-1: unknown, e.g. a file): compared with its
  /// event's to detect producers that partition the two topics differently.
  std::int32_t partition = -1;
};

/// The experiments configured under `ab:` (daemon/ab/ab.hpp), whose table lives in the A/B
/// store: the tracker hands their ratings over and exports their state with the local ones.
struct SharedExperiment {
  std::string name;
  std::vector<std::string> arms;
  std::vector<std::int64_t> ratings;  ///< per arm
  std::optional<stats::ChiSquare> chi;
  double anytime_p = 1;
  bool decided = false;                        ///< a decision is recorded (final until a reset)
  std::optional<std::size_t> winner;           ///< the recorded winner
  double decision_p = 1;                       ///< the rule's p when the decision was recorded
  double decision_time_s = 0;                  ///< when, Unix seconds
  std::vector<std::int64_t> decision_ratings;  ///< per arm, then
};
struct SharedAb {
  /// A rating of `experiment` with its arm (`variant`) or `unit`: the outcome to count, or
  /// nullptr when the experiment is not configured (the tracker's own table takes it). Must not
  /// block (it queues).
  std::function<const char*(const std::string& experiment, const std::string& variant,
                            const std::string& unit, int stars, const std::string& id)>
      rate;
  std::function<std::vector<SharedExperiment>()> snapshot;  ///< poll thread
};

/// Parses a feedback message: `{"id", "kind": "rating", "value": 1..5}` or `{"id", "kind":
/// "annotation", "criterion", "value", "annotator"?}`; `fallback_id` (the Kafka key) when the
/// object has no id. On failure returns nullopt and sets `error` to what is wrong and `kind` to
/// the kind read so far ("rating", "annotation" or "unknown").
std::optional<Feedback> parseFeedback(std::string_view payload, std::string_view fallback_id,
                                      std::string& error, std::string& kind);

/// Which versions of each judge a baseline may come from (loadBaselineScores).
struct BaselineVersions {
  /// judge name → its current version: a verdict of another judge_version is skipped (a
  /// verdict written before versions existed, without one, is kept).
  std::map<std::string, std::string> keep;
  /// judge name → its scores skipped as of another version (out).
  std::map<std::string, std::size_t> skipped{};
};

/// Reads a baseline from a judgments JSON Lines file (the JSON Lines sink's own output): per
/// judge name, its successful scores in file order, only judgments with judged_at in
/// [from_ms, until_ms) when those are set, and only of the versions `versions` keeps when
/// given. Throws std::runtime_error naming FILE:LINE.
std::map<std::string, std::vector<double>> loadBaselineScores(const std::string& path,
                                                              std::optional<std::int64_t> from_ms,
                                                              std::optional<std::int64_t> until_ms,
                                                              BaselineVersions* versions = nullptr);

/// The tracker's series, declared once (the gauge families of the table in tracker.cpp, and
/// the counters below); ScoreTracker creates and removes the gauges' series as statistics come
/// and go.
struct TrackerStats {
  explicit TrackerStats(prometheus::Registry& registry);
  std::map<std::string, prometheus::Family<prometheus::Gauge>*, std::less<>> gauges;  // by name
  prometheus::Family<prometheus::Counter>& feedback;  ///< assay_feedback_events_total{kind,outcome}
  prometheus::Family<prometheus::Counter>& rejected;  ///< assay_judge_scores_rejected_total{judge}
  prometheus::Gauge& pending;                         ///< assay_feedback_pending
  /// assay_feedback_partition_mismatch_total: feedback joined to its event although the two
  /// messages came from partitions of different numbers.
  prometheus::Counter& partition_mismatch;
};

class ScoreTracker;

/// Freezes the drift baseline of every judge found in `options.baseline_file` (limited to
/// [baseline_from, baseline_until) when set); a judge with fewer than 2 scores there keeps the
/// baseline from its first scores (a warning says so). Does nothing without a file. Throws
/// std::runtime_error naming tracking.baseline_file and the file's line on bad content.
void freezeBaselines(ScoreTracker& tracker, const std::vector<TrackedJudge>& judges,
                     const TrackingOptions& options);

class ScoreTracker {
 public:
  /// `clock` returns seconds on a monotonic clock (tests inject their own).
  ScoreTracker(const std::vector<TrackedJudge>& judges, const TrackingOptions& options,
               prometheus::Registry& registry, std::function<double()> clock = {});
  ~ScoreTracker();

  /// A sampled event entered judging; remembered (the last tracking.join_capacity events) so
  /// that judges' scores and feedback can be joined by id.
  /// `partition`: the event message's Kafka partition (-1: unknown).
  void noteEvent(const std::string& id, const std::string& variant, const std::string& app,
                 std::int32_t partition = -1);
  /// A successful score of judge `index` for event `id`. Out-of-scale or non-finite scores are
  /// kept out of every statistic and counted in assay_judge_scores_rejected_total{judge}. A second
  /// score of the same judge for the same id (a redelivery) replaces the first in the join and
  /// forms no new pairs.
  void record(std::size_t index, const std::string& id, const std::string& variant, double score);
  /// A valid feedback event.
  void onFeedback(const Feedback& f);
  /// Counts a feedback message that could not be parsed.
  void countInvalidFeedback(const std::string& kind);
  /// Freezes the drift baseline of judge `index` (e.g. from loadBaselineScores).
  void setBaseline(std::size_t index, std::vector<double> scores);
  /// A configuration reload: the judges from now on, in configuration order; returns the index
  /// (for record()) of each. A judge whose name, criterion, scale and kind are unchanged keeps
  /// its index and its windows; a new or changed one gets a new index and starts empty; one no
  /// longer listed stops being exported (its series disappear at the next refresh), its late
  /// scores are ignored, and the agreement and human pairs naming it are dropped. Poll thread.
  std::vector<std::size_t> setJudges(const std::vector<TrackedJudge>& judges);
  /// Recomputes every statistic and sets (or removes) the gauges. Poll thread only.
  void refresh();
  /// The configured experiments' store (before any feedback).
  void setSharedAb(SharedAb shared);

 private:
  struct Judge;
  struct PairStat;
  struct Annotation {
    std::string criterion, annotator;
    int value;
  };
  // One per remembered event (tracking.join_capacity of them): kept small, keyed by the 64-bit
  // XXH3 of the event id (two of 100,000 ids collide with probability 3e-10).
  struct Entry {
    bool known = false;       // noteEvent seen (else only feedback so far)
    std::string experiment;   // the event's app ("default")
    std::string raw_variant;  // as in the event (A/B arms are never folded together)
    std::vector<std::pair<std::size_t, double>> scores;  // judge index, score
    std::vector<Annotation> annotations;
    std::optional<int> rating;
    bool rating_counted = false;           // applied to the A/B table
    std::int32_t partition = -1;           // the event message's (noteEvent)
    std::int32_t feedback_partition = -1;  // a feedback message's, held before its event
  };
  using Stars = std::array<double, 5>;

  double now() const;
  Entry& entry(const std::string& id);  // mu_ held; creates and evicts
  void evictOldest();                   // mu_ held
  /// Adds a known event's rating to its experiment's table; returns the outcome to count
  /// ("joined", or "no_variant" for an event without a variant: not an arm). mu_ held.
  const char* applyRating(const std::string& id, Entry& e);
  /// A rating into the local table of `experiment` (not configured under ab:). mu_ held.
  const char* addLocalRating(const std::string& experiment, const std::string& variant, int stars);
  void countFeedback(const char* kind, const char* outcome);
  /// Event and feedback partitions `a` and `b` of event `id` differ (-1 = unknown): counted
  /// and logged (rate-limited). mu_ held.
  void checkPartitions(const std::string& id, std::int32_t event, std::int32_t feedback);
  PairStat& pairStat(std::map<std::vector<std::string>, std::unique_ptr<PairStat>>& m,
                     const std::vector<std::string>& key);  // mu_ held

  TrackingOptions options_;
  std::function<double()> clock_;
  TrackerStats stats_;
  LabelFolder variants_, annotators_, criteria_;

  std::mutex mu_;
  std::vector<std::unique_ptr<Judge>> judges_;
  std::unordered_map<std::uint64_t, Entry> entries_;  // by XXH3_64 of the event id
  std::deque<std::uint64_t> order_;                   // their keys, oldest first
  std::size_t pending_feedback_ = 0;
  // Pairs: agreement {criterion, judge_a, judge_b}; human {judge index}; kappa {criterion,
  // annotator_a, annotator_b}.
  std::map<std::vector<std::string>, std::unique_ptr<PairStat>> agreement_, human_, kappa_;
  // experiment → raw variant → stars (at most kMaxArms arms, then "other")
  std::map<std::string, std::map<std::string, Stars>> ab_;
  SharedAb shared_;  // guarded by mu_ (set once, before feedback)
  std::function<std::vector<SharedExperiment>()> shared_snapshot_;  // poll thread
  std::set<std::string> local_decided_;
  RateLimitedLog
      partition_log_;  // checkPartitions  // poll thread: experiments joined by app, decided

  // Gauges owned by refresh() (poll thread only): series key → gauge.
  std::map<std::string, prometheus::Gauge*> series_;
  using Touched = std::map<std::string, bool>;  // series set by this refresh
  struct Snapshot;
  Snapshot snapshot(double t);  // copies what refresh() computes from, under the lock
  void exportJudge(const Snapshot& snap, std::size_t index, Touched& touched);
  void exportVariants(const prometheus::Labels& labels,
                      const std::map<std::string, std::vector<double>>& variants, double min_score,
                      double max_score, Touched& touched);
  void exportAgreement(const Snapshot& snap, Touched& touched);
  void exportAb(const Snapshot& snap, Touched& touched);
  void setGauge(const char* family, const prometheus::Labels& labels, std::optional<double> v,
                Touched& touched);
};

}  // namespace assay
