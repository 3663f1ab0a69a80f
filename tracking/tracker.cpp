#include "tracking/tracker.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>

#include "core/json_limits.hpp"
#include "core/judgment.hpp"
#include "core/log_text.hpp"
#include "core/rate_limited_log.hpp"
#include "core/rfc3339.hpp"
#include "core/utf8.hpp"
#include "tracking/stats.hpp"

namespace assay {
namespace {

struct FamilySpec {
  const char* name;
  const char* help;
};

constexpr FamilySpec kFamilies[] = {
    {"assay_judge_max_score_ratio", "Share of the judge's window of scores at its top score"},
    {"assay_judge_min_score_ratio", "Share of the judge's window of scores at its bottom score"},
    {"assay_judge_distinct_scores", "Distinct score values in the judge's window"},
    {"assay_judge_score_entropy",
     "Shannon entropy of the window's scores over the scale's levels, normalised to [0, 1]"},
    {"assay_judge_window_size", "Scores in the judge's window"},
    {"assay_judge_lenient",
     "1 when the top-score share exceeds tracking.leniency_max_ratio (over min_samples scores)"},
    {"assay_score_window_mean", "Mean of the judge's window of scores"},
    {"assay_score_baseline_mean", "Mean of the drift baseline"},
    {"assay_score_recent_mean", "Mean of the drift's recent window"},
    {"assay_score_drift_p_value",
     "Two-sided Mann-Whitney U p-value, recent window against the baseline"},
    {"assay_score_drift",
     "1 when recent scores differ from the baseline (Mann-Whitney p < drift_alpha and the mean "
     "moved at least drift_min_delta)"},
    {"assay_score_mean", "Mean score per variant over the window"},
    {"assay_score_sd", "Sample standard deviation of the scores per variant"},
    {"assay_score_n", "Scores per variant in the window"},
    {"assay_score_ci95_low", "Lower end of the 95 % interval of the variant's mean score"},
    {"assay_score_ci95_high", "Upper end of the 95 % interval of the variant's mean score"},
    {"assay_score_ci95_overlap",
     "1 when two variants' 95 % intervals overlap (the difference may be noise)"},
    {"assay_judge_agreement_kendall_tau",
     "Kendall tau-b between two judges of one criterion on the same events"},
    {"assay_judge_agreement_spearman",
     "Spearman rho between two judges of one criterion on the same events"},
    {"assay_judge_agreement_pairs", "Events both judges scored, in the agreement window"},
    {"assay_judge_agreement_level",
     "1 for the current agreement level: high (tau >= 0.7), moderate (0.4 <= tau < 0.7), low"},
    {"assay_judge_human_spearman", "Spearman rho between the judge and human annotations"},
    {"assay_judge_human_pairs", "(judge score, human annotation) pairs in the window"},
    {"assay_judge_human_kendall_tau", "Kendall tau-b between the judge and human annotations"},
    {"assay_judge_human_kappa",
     "Cohen's kappa between the judge and human annotations on the judge's integer scale"},
    {"assay_annotator_kappa",
     "Cohen's kappa between two annotators of the same events (below 0.6: ambiguous rubric)"},
    {"assay_ab_p_value",
     "Pearson chi-square test of independence, variant x stars, on user ratings"},
    {"assay_ab_decided",
     "1 once the experiment is decided, then final: a configured experiment's recorded decision "
     "(until assay ab reset); an experiment joined by app and variant, once chi-square p < 0.05 "
     "with 30 ratings per arm in this process (until a restart)"},
    {"assay_ab_ratings", "User ratings joined to an experiment's variant"},
    {"assay_ab_expected_min",
     "Smallest expected count of the chi-square table (below 5 in over 20 % of the cells, or "
     "below 1: the p-value is approximate, Cochran 1954)"},
    {"assay_ab_reliable", "1 when the chi-square approximation holds (Cochran's rule), else 0"},
    {"assay_ab_anytime_p_value",
     "Anytime-valid p-value of a configured experiment (valid under continuous monitoring)"},
    {"assay_ab_winner", "1 for the arm a decided experiment sends every unit to, else 0"},
    {"assay_ab_decision_p_value",
     "A decided experiment's p-value under its rule when the decision was recorded"},
    {"assay_ab_decision_timestamp_seconds",
     "When a decided experiment's decision was recorded, Unix seconds"},
    {"assay_ab_decision_ratings",
     "A decided experiment's ratings per arm when the decision was recorded (assay_ab_ratings "
     "keeps counting)"},
};

std::string seriesKey(const char* family, const prometheus::Labels& labels) {
  std::string k = family;
  for (const auto& [n, v] : labels) {
    k += '\x1f';
    k += n;
    k += '=';
    k += v;
  }
  return k;
}

constexpr std::size_t kMaxArms = 1000;           // raw A/B arms per experiment
constexpr std::size_t kMaxOverlapVariants = 10;  // overlap gauges: among the largest arms
constexpr std::size_t kMaxNameBytes = 256;       // raw variant and annotator names kept
// Annotations kept per event: each new one pairs with every earlier one (kappa), so 1,000
// annotators of one event took 1.25 GB; beyond this they are counted over_limit.
constexpr std::size_t kMaxAnnotationsPerEvent = 16;

/// `s` cut to at most `n` bytes without splitting a UTF-8 sequence.
std::string cut(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

/// `l` without its version labels whose value is empty (a judge built without a version, in
/// tests: no label rather than an empty one).
prometheus::Labels versioned(prometheus::Labels l) {
  for (const char* key : {"judge_version", "judge_a_version", "judge_b_version"})
    if (const auto it = l.find(key); it != l.end() && it->second.empty()) l.erase(it);
  return l;
}

const char* levelOf(double tau) { return tau >= 0.7 ? "high" : tau >= 0.4 ? "moderate" : "low"; }

}  // namespace

struct ScoreTracker::Judge {
  TrackedJudge spec;
  bool active = true;  // false once a reload removed or changed it
  stats::ScoreWindow window;
  stats::DriftDetector drift;
  std::map<std::string, stats::ScoreWindow> by_variant;
  Judge(const TrackedJudge& s, const TrackingOptions& o)
      : spec(s),
        window(static_cast<std::size_t>(o.window), s.min_score, s.max_score, o.window_seconds),
        drift(stats::DriftOptions{.baseline_size = static_cast<std::size_t>(o.baseline_window),
                                  .recent_size = static_cast<std::size_t>(o.recent_window),
                                  .baseline_seconds = o.baseline_seconds,
                                  .recent_seconds = o.recent_seconds,
                                  .alpha = o.drift_alpha,
                                  .min_delta = o.drift_min_delta,
                                  .rolling = o.rolling_baseline}) {}
};

struct ScoreTracker::PairStat {
  stats::PairWindow pairs;
  PairStat(std::size_t capacity, double max_age) : pairs(capacity, max_age) {}
};

// ---- Feedback parsing --------------------------------------------------------------------------

std::optional<Feedback> parseFeedback(std::string_view payload, std::string_view fallback_id,
                                      std::string& error, std::string& kind) {
  kind = "unknown";
  if (const auto shape = jsonShapeProblem(payload)) {
    error = "not JSON: " + shape->message();
    return std::nullopt;
  }
  rapidjson::Document d;
  d.Parse<rapidjson::kParseValidateEncodingFlag>(payload.data(), payload.size());
  if (d.HasParseError()) {
    error = std::string("not JSON: ") + rapidjson::GetParseError_En(d.GetParseError());
    return std::nullopt;
  }
  if (!d.IsObject()) {
    error = "not a JSON object";
    return std::nullopt;
  }
  Feedback f;
  const auto str = [&](const char* key, std::string& out) {
    const auto it = d.FindMember(key);
    if (it == d.MemberEnd()) return false;
    if (!it->value.IsString()) {
      error = std::string("/") + key + ": expected a string";
      return false;
    }
    out.assign(it->value.GetString(), it->value.GetStringLength());
    return true;
  };
  std::string k;
  if (!str("kind", k)) {
    if (error.empty()) error = "/kind: missing";
    return std::nullopt;
  }
  if (k != "rating" && k != "annotation") {
    error = "/kind: expected \"rating\" or \"annotation\", got \"" + k.substr(0, 40) + "\"";
    return std::nullopt;
  }
  kind = k;
  f.kind = k == "rating" ? Feedback::Kind::kRating : Feedback::Kind::kAnnotation;
  if (!str("id", f.id)) {
    if (!error.empty()) return std::nullopt;
    if (!isValidUtf8(fallback_id)) {  // the key is bytes, not text: it would leave as the id
      error = "/id: missing, and the message key is not valid UTF-8";
      return std::nullopt;
    }
    f.id = std::string(fallback_id);
  }
  if (f.id.empty()) {
    error = "/id: missing (and no message key)";
    return std::nullopt;
  }
  const auto v = d.FindMember("value");
  if (v == d.MemberEnd() || !v->value.IsNumber()) {
    error = v == d.MemberEnd() ? "/value: missing" : "/value: expected a number";
    return std::nullopt;
  }
  const double x = v->value.GetDouble();
  const int lo = f.kind == Feedback::Kind::kRating ? 1 : 0;
  const int hi = f.kind == Feedback::Kind::kRating ? 5 : 100;
  if (!std::isfinite(x) || x != std::floor(x) || x < lo || x > hi) {
    error = "/value: expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    return std::nullopt;
  }
  f.value = static_cast<int>(x);
  if (f.kind == Feedback::Kind::kRating) {
    // Optional: the experiment and arm the rated request was in (or the unit the router
    // assigned), so that a rating counts without its event being sampled here.
    for (auto [key, out] : {std::pair{"experiment", &f.experiment},
                            std::pair{"variant", &f.variant}, std::pair{"unit", &f.unit}}) {
      if (!str(key, *out) && !error.empty()) return std::nullopt;
      if (out->size() > kMaxNameBytes * 2) {
        error = std::string("/") + key + ": longer than " + std::to_string(kMaxNameBytes * 2) +
                " bytes";
        return std::nullopt;
      }
    }
    if (!f.variant.empty() && f.experiment.empty()) {
      error = "/variant: given without /experiment";
      return std::nullopt;
    }
  }
  if (f.kind == Feedback::Kind::kAnnotation) {
    if (!str("criterion", f.criterion) || f.criterion.empty()) {
      if (error.empty()) error = "/criterion: missing";
      return std::nullopt;
    }
    if (!str("annotator", f.annotator)) {
      if (!error.empty()) return std::nullopt;
      f.annotator = "unknown";
    }
  }
  return f;
}

// ---- Baseline file -----------------------------------------------------------------------------

std::map<std::string, std::vector<double>> loadBaselineScores(const std::string& path,
                                                              std::optional<std::int64_t> from_ms,
                                                              std::optional<std::int64_t> until_ms,
                                                              BaselineVersions* versions) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the baseline file");
  std::map<std::string, std::vector<double>> out;
  std::string line;
  long n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = path + ":" + std::to_string(n) + ": ";
    JudgmentRecord d;
    if (const auto problem = readJudgmentLine(line, d))
      throw std::runtime_error(where + (problem->kind == JudgmentLineProblem::Kind::kShape
                                            ? "not a judgment line: " + problem->message
                                            : std::string("not a judgment (JSON object) line")));
    if (from_ms || until_ms) {
      std::optional<std::int64_t> ms;
      if (d.judged_at) ms = parseRfc3339(*d.judged_at);
      if (!ms) throw std::runtime_error(where + "judged_at: expected an RFC 3339 time");
      if ((from_ms && *ms < *from_ms) || (until_ms && *ms >= *until_ms)) continue;
    }
    if (!d.verdicts_array) throw std::runtime_error(where + "verdicts: expected an array");
    for (const auto& v : d.verdicts) {
      if (!v.score) continue;  // a failed verdict (score null) is not one
      if (versions && !v.version.empty()) {
        const auto keep = versions->keep.find(v.judge);
        if (keep != versions->keep.end() && keep->second != v.version) {
          ++versions->skipped[v.judge];
          continue;
        }
      }
      out[v.judge].push_back(*v.score);
    }
  }
  return out;
}

// ---- Tracker -----------------------------------------------------------------------------------

TrackerStats::TrackerStats(prometheus::Registry& registry)
    : feedback(prometheus::BuildCounter()
                   .Name("assay_feedback_events_total")
                   .Help("Feedback events by kind and outcome (joined to a judged event, "
                         "unmatched = its event was never seen here, duplicate, invalid)")
                   .Register(registry)),
      rejected(prometheus::BuildCounter()
                   .Name("assay_judge_scores_rejected_total")
                   .Help("Scores outside the judge's scale or not finite, kept out of every "
                         "statistic")
                   .Register(registry)),
      pending(prometheus::BuildGauge()
                  .Name("assay_feedback_pending")
                  .Help("Feedback events held until their event is seen")
                  .Register(registry)
                  .Add({})),
      partition_mismatch(prometheus::BuildCounter()
                             .Name("assay_feedback_partition_mismatch_total")
                             .Help("Feedback joined to its event although it came from a "
                                   "partition of another number: the producers partition the "
                                   "two topics differently, so with more than one instance "
                                   "most feedback reaches an instance that never saw its event")
                             .Register(registry)
                             .Add({})) {
  for (const auto& f : kFamilies)
    gauges[f.name] = &prometheus::BuildGauge().Name(f.name).Help(f.help).Register(registry);
}

ScoreTracker::ScoreTracker(const std::vector<TrackedJudge>& judges, const TrackingOptions& options,
                           prometheus::Registry& registry, std::function<double()> clock)
    : options_(options),
      clock_(std::move(clock)),
      stats_(registry),
      variants_(static_cast<std::size_t>(options.max_label_values)),
      annotators_(static_cast<std::size_t>(options.max_label_values)),
      criteria_(static_cast<std::size_t>(options.max_label_values)) {
  for (const auto& j : judges) judges_.push_back(std::make_unique<Judge>(j, options));
}

ScoreTracker::~ScoreTracker() = default;

std::vector<std::size_t> ScoreTracker::setJudges(const std::vector<TrackedJudge>& judges) {
  const auto same = [](const TrackedJudge& a, const TrackedJudge& b) {
    return a.name == b.name && a.version == b.version && a.criterion == b.criterion &&
           a.min_score == b.min_score && a.max_score == b.max_score && a.graded == b.graded;
  };
  std::lock_guard lock(mu_);
  std::vector<bool> kept(judges_.size(), false);
  std::vector<std::size_t> out;
  for (const auto& spec : judges) {
    std::size_t k = 0;
    while (k < judges_.size() && !(judges_[k]->active && same(judges_[k]->spec, spec))) ++k;
    if (k == judges_.size()) {
      judges_.push_back(std::make_unique<Judge>(spec, options_));
      kept.push_back(false);
    }
    kept[k] = true;
    out.push_back(k);
  }
  std::set<std::string> retired;
  for (std::size_t k = 0; k < judges_.size(); ++k)
    if (judges_[k]->active && !kept[k]) {
      judges_[k]->active = false;
      retired.insert(judges_[k]->spec.name);
    }
  std::erase_if(agreement_, [&](const auto& kv) {
    return retired.count(kv.first[1]) > 0 || retired.count(kv.first[2]) > 0;
  });
  std::erase_if(human_, [&](const auto& kv) { return retired.count(kv.first[0]) > 0; });
  return out;
}

double ScoreTracker::now() const {
  if (clock_) return clock_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ScoreTracker::countFeedback(const char* kind, const char* outcome) {
  stats_.feedback.Add({{"kind", kind}, {"outcome", outcome}}).Increment();
}

void ScoreTracker::countInvalidFeedback(const std::string& kind) {
  countFeedback(kind == "rating" || kind == "annotation" ? kind.c_str() : "unknown", "invalid");
}

ScoreTracker::Entry& ScoreTracker::entry(const std::string& id) {
  const std::uint64_t key = XXH3_64bits(id.data(), id.size());
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  while (entries_.size() >= static_cast<std::size_t>(options_.join_capacity)) evictOldest();
  order_.push_back(key);
  return entries_[key];
}

void ScoreTracker::evictOldest() {
  if (order_.empty()) return;
  auto it = entries_.find(order_.front());
  order_.pop_front();
  if (it == entries_.end()) return;
  const Entry& e = it->second;
  if (!e.known) {  // feedback whose event never came
    if (e.rating) countFeedback("rating", "unmatched");
    for (std::size_t i = 0; i < e.annotations.size(); ++i) countFeedback("annotation", "unmatched");
    pending_feedback_ -= std::min(pending_feedback_, e.annotations.size() + (e.rating ? 1 : 0));
  }
  entries_.erase(it);
}

ScoreTracker::PairStat& ScoreTracker::pairStat(
    std::map<std::vector<std::string>, std::unique_ptr<PairStat>>& m,
    const std::vector<std::string>& key) {
  auto& p = m[key];
  if (!p)
    p = std::make_unique<PairStat>(static_cast<std::size_t>(options_.window),
                                   options_.window_seconds);
  return *p;
}

const char* ScoreTracker::applyRating(const std::string& id, Entry& e) {
  if (!e.rating || e.rating_counted || !e.known) return "joined";
  e.rating_counted = true;
  if (e.raw_variant.empty()) return "no_variant";
  if (shared_.rate)  // a configured experiment: the shared table
    if (const char* outcome = shared_.rate(e.experiment, e.raw_variant, "", *e.rating, id))
      return outcome;
  return addLocalRating(e.experiment, e.raw_variant, *e.rating);
}

const char* ScoreTracker::addLocalRating(const std::string& experiment, const std::string& variant,
                                         int stars) {
  // Each experiment is tested on its own: one beyond tracking.max_label_values is not tested
  // (counted), never pooled with others into an "other" table.
  auto exp = ab_.find(experiment);
  if (exp == ab_.end()) {
    if (ab_.size() >= static_cast<std::size_t>(options_.max_label_values))
      return "experiment_over_limit";
    exp = ab_.emplace(experiment, std::map<std::string, Stars>{}).first;
  }
  auto& arms = exp->second;
  const std::string arm = arms.count(variant) || arms.size() < kMaxArms ? variant : "other";
  arms[arm][static_cast<std::size_t>(stars - 1)] += 1;
  return "joined";
}

void ScoreTracker::setSharedAb(SharedAb shared) {
  std::lock_guard lock(mu_);
  shared_snapshot_ = shared.snapshot;
  shared_ = std::move(shared);
}

void ScoreTracker::checkPartitions(const std::string& id, std::int32_t event,
                                   std::int32_t feedback) {
  if (event < 0 || feedback < 0 || event == feedback) return;
  stats_.partition_mismatch.Increment();
  long suppressed = 0;
  if (partition_log_.allow(suppressed))
    spdlog::warn(
        "feedback for event '{}' came from feedback partition {}, its event from events "
        "partition {}: the producers partition the two topics differently (the same key with "
        "different partitioners: librdkafka's default consistent_random is not the Java "
        "client's murmur2; or different partition counts). With more than one instance, "
        "feedback is joined only where its event was judged: key both by the event id with "
        "one partitioner and one partition count{}",
        logText(id, 80), feedback, event, RateLimitedLog::note(suppressed));
}

void ScoreTracker::noteEvent(const std::string& id, const std::string& variant,
                             const std::string& app, std::int32_t partition) {
  std::lock_guard lock(mu_);
  Entry& e = entry(id);
  if (e.known) return;
  e.known = true;
  e.partition = partition;
  if (e.annotations.size() + (e.rating ? 1 : 0) > 0)
    checkPartitions(id, partition, e.feedback_partition);
  e.raw_variant = cut(variant, kMaxNameBytes);
  e.experiment = cut(app.empty() ? "default" : app, kMaxNameBytes);
  const std::size_t held = e.annotations.size() + (e.rating ? 1 : 0);
  pending_feedback_ -= std::min(pending_feedback_, held);
  for (std::size_t i = 0; i < e.annotations.size(); ++i) countFeedback("annotation", "joined");
  if (e.rating) countFeedback("rating", applyRating(id, e));
}

void ScoreTracker::record(std::size_t index, const std::string& id, const std::string& variant,
                          double score) {
  const double t = now();
  std::lock_guard lock(mu_);
  Judge& j = *judges_[index];
  if (!j.active) return;  // a late score of a judge a reload removed
  if (!j.window.add(score, t)) {
    stats_.rejected.Add(versioned({{"judge", j.spec.name}, {"judge_version", j.spec.version}}))
        .Increment();
    return;
  }
  j.drift.add(score, t);
  const std::string v = variants_.fold(variant);
  auto vit = j.by_variant.find(v);
  if (vit == j.by_variant.end())
    vit = j.by_variant
              .emplace(
                  v, stats::ScoreWindow(static_cast<std::size_t>(options_.window), j.spec.min_score,
                                        j.spec.max_score, options_.window_seconds))
              .first;
  vit->second.add(score, t);

  Entry& e = entry(id);
  for (auto& [k, s] : e.scores)
    if (k == index) {  // a redelivery: keep the latest score, pair nothing twice
      s = score;
      return;
    }
  for (const auto& [k, s] : e.scores) {
    const Judge& other = *judges_[k];
    if (!other.active || other.spec.criterion != j.spec.criterion) continue;
    const bool first = k < index;
    const Judge& a = first ? other : j;
    const Judge& b = first ? j : other;
    pairStat(agreement_, {j.spec.criterion, a.spec.name, b.spec.name})
        .pairs.add(first ? s : score, first ? score : s, t);
  }
  for (const auto& an : e.annotations)
    if (an.criterion == j.spec.criterion)
      pairStat(human_, {j.spec.name}).pairs.add(score, an.value, t);
  e.scores.emplace_back(index, score);
}

void ScoreTracker::onFeedback(const Feedback& f) {
  const double t = now();
  std::lock_guard lock(mu_);
  Entry& e = entry(f.id);
  if (e.known)
    checkPartitions(f.id, e.partition, f.partition);
  else if (f.partition >= 0)
    e.feedback_partition = f.partition;
  if (f.kind == Feedback::Kind::kRating) {
    if (!f.experiment.empty() && shared_.rate) {  // experiments are configured (ab:)
      // A rating that names its experiment must name a configured one: a typo in the producer
      // is counted, never a new table.
      const char* outcome = shared_.rate(f.experiment, f.variant, f.unit, f.value, f.id);
      countFeedback("rating", outcome ? outcome : "unknown_experiment");
      return;
    }
    if (e.rating) {
      countFeedback("rating", "duplicate");
      return;
    }
    e.rating = f.value;
    if (!f.experiment.empty()) {  // it names its experiment and arm: counted without the event
      e.rating_counted = true;
      countFeedback("rating", f.variant.empty()
                                  ? "no_variant"
                                  : addLocalRating(cut(f.experiment, kMaxNameBytes),
                                                   cut(f.variant, kMaxNameBytes), f.value));
      return;
    }
    if (e.known) {
      countFeedback("rating", applyRating(f.id, e));
    } else {
      ++pending_feedback_;
    }
    return;
  }
  // Raw names decide who is who (two annotators folded into "other" are still two people);
  // only the export folds them (refresh()).
  const std::string annotator = cut(f.annotator, kMaxNameBytes);
  // Bounded per event, and by tracking.max_label_values distinct criteria (criteria come from
  // feedback: 44,500 distinct ones held the consuming thread 6 s).
  if (e.annotations.size() >= kMaxAnnotationsPerEvent ||
      criteria_.fold(f.criterion) != f.criterion) {
    countFeedback("annotation", "over_limit");
    return;
  }
  for (const auto& an : e.annotations)
    if (an.criterion == f.criterion && an.annotator == annotator) {
      countFeedback("annotation", "duplicate");
      return;
    }
  for (const auto& [k, s] : e.scores)
    if (judges_[k]->active && judges_[k]->spec.criterion == f.criterion)
      pairStat(human_, {judges_[k]->spec.name}).pairs.add(s, f.value, t);
  // Kappa pairs only between annotators that keep their own label (the first
  // tracking.max_label_values): a pair with a folded one is never exported, and tracking every
  // pair of distinct annotators would grow with their square.
  const bool named = annotators_.fold(annotator) == annotator;
  for (const auto& an : e.annotations) {
    if (an.criterion != f.criterion || !named || annotators_.fold(an.annotator) != an.annotator)
      continue;
    const bool first = an.annotator < annotator;
    pairStat(kappa_,
             {f.criterion, first ? an.annotator : annotator, first ? annotator : an.annotator})
        .pairs.add(first ? an.value : f.value, first ? f.value : an.value, t);
  }
  e.annotations.push_back({f.criterion, annotator, f.value});
  if (e.known)
    countFeedback("annotation", "joined");
  else
    ++pending_feedback_;
}

void ScoreTracker::setBaseline(std::size_t index, std::vector<double> scores) {
  std::lock_guard lock(mu_);
  judges_[index]->drift.setBaseline(std::move(scores));
}

void ScoreTracker::setGauge(const char* family, const prometheus::Labels& labels,
                            std::optional<double> v, Touched& touched) {
  const std::string key = seriesKey(family, labels);
  if (!v || !std::isfinite(*v)) return;  // left untouched: removed at the end of refresh()
  auto& g = series_[key];
  if (!g) g = &stats_.gauges.at(family)->Add(labels);
  g->Set(*v);
  touched[key] = true;
}

/// What refresh() computes from, copied under the lock.
struct ScoreTracker::Snapshot {
  struct JudgeSnap {
    std::optional<stats::WindowSummary> summary;
    std::optional<stats::DriftResult> drift;
    std::map<std::string, std::vector<double>> variants;
  };
  using Pairs = std::vector<
      std::pair<std::vector<std::string>, std::pair<std::vector<double>, std::vector<double>>>>;
  std::vector<JudgeSnap> judges;
  Pairs agreement, human, kappa;
  std::map<std::string, std::map<std::string, Stars>> ab;
};

ScoreTracker::Snapshot ScoreTracker::snapshot(double t) {
  Snapshot snap;
  snap.judges.resize(judges_.size());
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < judges_.size(); ++i) {
    Judge& j = *judges_[i];
    if (!j.active) continue;
    j.window.expire(t);
    snap.judges[i].summary = j.window.summary(options_.leniency_max_ratio,
                                              static_cast<std::size_t>(options_.min_samples));
    snap.judges[i].drift = j.drift.evaluate(t);
    for (auto& [v, w] : j.by_variant) {
      w.expire(t);
      snap.judges[i].variants[v] = w.values();
    }
  }
  const auto copy = [&](auto& from, Snapshot::Pairs& to) {
    for (auto& [k, p] : from) {
      p->pairs.expire(t);
      to.push_back({k, {p->pairs.xs(), p->pairs.ys()}});
    }
  };
  copy(agreement_, snap.agreement);
  copy(human_, snap.human);
  copy(kappa_, snap.kappa);
  snap.ab = ab_;
  stats_.pending.Set(static_cast<double>(pending_feedback_));
  return snap;
}

void ScoreTracker::refresh() {
  const Snapshot snap = snapshot(now());
  Touched touched;
  for (std::size_t i = 0; i < judges_.size(); ++i)
    if (judges_[i]->active) exportJudge(snap, i, touched);
  exportAgreement(snap, touched);
  exportAb(snap, touched);
  // Series whose statistic is no longer defined (window expired, a variant gone) disappear.
  for (auto it = series_.begin(); it != series_.end();) {
    if (touched.count(it->first)) {
      ++it;
      continue;
    }
    const std::string family = it->first.substr(0, it->first.find('\x1f'));
    stats_.gauges.at(family)->Remove(it->second);
    it = series_.erase(it);
  }
}

namespace {
std::optional<double> opt(std::size_t v) { return static_cast<double>(v); }
}  // namespace

void ScoreTracker::exportJudge(const Snapshot& snap, std::size_t i, Touched& touched) {
  const auto& js = snap.judges[i];
  const auto& spec = judges_[i]->spec;
  const prometheus::Labels labels = versioned(
      {{"judge", spec.name}, {"judge_version", spec.version}, {"criterion", spec.criterion}});
  if (const auto& s = js.summary) {
    setGauge("assay_judge_max_score_ratio", labels, s->top_share, touched);
    setGauge("assay_judge_min_score_ratio", labels, s->bottom_share, touched);
    setGauge("assay_judge_distinct_scores", labels, opt(s->distinct), touched);
    setGauge("assay_judge_score_entropy", labels, s->entropy, touched);
    setGauge("assay_judge_window_size", labels, opt(s->n), touched);
    setGauge("assay_score_window_mean", labels, s->mean, touched);
    if (spec.graded && s->n >= static_cast<std::size_t>(options_.min_samples))
      setGauge("assay_judge_lenient", labels, s->lenient ? 1.0 : 0.0, touched);
  }
  if (const auto& d = js.drift) {
    setGauge("assay_score_baseline_mean", labels, d->baseline_mean, touched);
    setGauge("assay_score_recent_mean", labels, d->recent_mean, touched);
    setGauge("assay_score_drift_p_value", labels, d->p_value, touched);
    setGauge("assay_score_drift", labels, d->drift ? 1.0 : 0.0, touched);
  }
  exportVariants(labels, js.variants, spec.min_score, spec.max_score, touched);
}

void ScoreTracker::exportVariants(const prometheus::Labels& labels,
                                  const std::map<std::string, std::vector<double>>& variants,
                                  double min_score, double max_score, Touched& touched) {
  std::map<std::string, stats::MeanInterval> intervals;
  for (const auto& [variant, values] : variants) {
    auto l = labels;
    l["variant"] = variant;
    if (values.empty()) continue;
    setGauge("assay_score_n", l, opt(values.size()), touched);
    const auto ci = stats::meanInterval95(values, min_score, max_score);
    if (!ci) {  // one score: a mean, no spread
      setGauge("assay_score_mean", l, values.front(), touched);
      continue;
    }
    setGauge("assay_score_mean", l, ci->mean, touched);
    setGauge("assay_score_sd", l, ci->sd, touched);
    if (values.size() < static_cast<std::size_t>(options_.min_interval_n)) continue;
    intervals.emplace(variant, *ci);
    setGauge("assay_score_ci95_low", l, ci->low, touched);
    setGauge("assay_score_ci95_high", l, ci->high, touched);
  }
  // Overlap of every two of the kMaxOverlapVariants arms with the most scores (the pairs grow
  // with the square of the arms).
  if (intervals.size() > kMaxOverlapVariants) {
    std::vector<std::pair<std::size_t, std::string>> by_n;
    by_n.reserve(intervals.size());
    for (const auto& [v, ci] : intervals) by_n.push_back({ci.n, v});
    std::sort(by_n.begin(), by_n.end(), std::greater<>());
    for (std::size_t k = kMaxOverlapVariants; k < by_n.size(); ++k) intervals.erase(by_n[k].second);
  }
  for (auto a = intervals.begin(); a != intervals.end(); ++a)
    for (auto b = std::next(a); b != intervals.end(); ++b) {
      auto l = labels;
      l["variant_a"] = a->first;
      l["variant_b"] = b->first;
      const bool overlap = a->second.low <= b->second.high && b->second.low <= a->second.high;
      setGauge("assay_score_ci95_overlap", l, overlap ? 1.0 : 0.0, touched);
    }
}

void ScoreTracker::exportAgreement(const Snapshot& snap, Touched& touched) {
  // Agreement statistics need tracking.min_pairs pairs: from a handful they are noise.
  const auto enough = [&](const auto& xy) {
    return xy.first.size() >= static_cast<std::size_t>(options_.min_pairs);
  };
  const auto active = [&](const std::string& name) -> const TrackedJudge* {
    const auto it = std::find_if(judges_.begin(), judges_.end(),
                                 [&](const auto& j) { return j->active && j->spec.name == name; });
    return it == judges_.end() ? nullptr : &(*it)->spec;
  };
  for (const auto& [key, xy] : snap.agreement) {
    const TrackedJudge* a = active(key[1]);
    const TrackedJudge* b = active(key[2]);
    if (!a || !b) continue;
    const prometheus::Labels l = versioned({{"criterion", key[0]},
                                            {"judge_a", key[1]},
                                            {"judge_a_version", a->version},
                                            {"judge_b", key[2]},
                                            {"judge_b_version", b->version}});
    setGauge("assay_judge_agreement_pairs", l, opt(xy.first.size()), touched);
    if (!enough(xy)) continue;
    const auto tau = stats::kendallTauB(xy.first, xy.second);
    const auto rho = stats::spearman(xy.first, xy.second);
    setGauge("assay_judge_agreement_kendall_tau", l, tau, touched);
    if (rho) setGauge("assay_judge_agreement_spearman", l, rho->coefficient, touched);
    if (tau)
      for (const char* level : {"high", "moderate", "low"}) {
        auto ll = l;
        ll["level"] = level;
        setGauge("assay_judge_agreement_level", ll,
                 std::string_view(levelOf(*tau)) == level ? 1.0 : 0.0, touched);
      }
  }
  for (const auto& [key, xy] : snap.human) {
    const TrackedJudge* j = active(key[0]);
    if (!j) continue;
    const prometheus::Labels l =
        versioned({{"judge", j->name}, {"judge_version", j->version}, {"criterion", j->criterion}});
    setGauge("assay_judge_human_pairs", l, opt(xy.first.size()), touched);
    if (!enough(xy)) continue;
    if (const auto rho = stats::spearman(xy.first, xy.second))
      setGauge("assay_judge_human_spearman", l, rho->coefficient, touched);
    setGauge("assay_judge_human_kendall_tau", l, stats::kendallTauB(xy.first, xy.second), touched);
    // Kappa where the scales match: integer scores and annotations on the judge's integer scale.
    const auto on_scale = [&](double v) {
      return v == std::floor(v) && v >= j->min_score && v <= j->max_score;
    };
    if (j->min_score == std::floor(j->min_score) && j->max_score - j->min_score <= 10 &&
        std::all_of(xy.first.begin(), xy.first.end(), on_scale) &&
        std::all_of(xy.second.begin(), xy.second.end(), on_scale)) {
      const std::vector<int> a(xy.first.begin(), xy.first.end()),
          b(xy.second.begin(), xy.second.end());
      auto none = l, quadratic = l;
      none["weighting"] = "none";
      quadratic["weighting"] = "quadratic";
      setGauge("assay_judge_human_kappa", none, stats::cohenKappa(a, b), touched);
      setGauge("assay_judge_human_kappa", quadratic,
               stats::cohenKappa(a, b, stats::KappaWeights::kQuadratic), touched);
    }
  }
  for (const auto& [key, xy] : snap.kappa) {
    // A pair is exported only when both annotators keep their own label value
    // (tracking.max_label_values): a kappa "with other" would mix several people.
    if (!enough(xy) || annotators_.fold(key[1]) != key[1] || annotators_.fold(key[2]) != key[2])
      continue;
    std::vector<int> a(xy.first.begin(), xy.first.end()), b(xy.second.begin(), xy.second.end());
    const prometheus::Labels l{
        {"criterion", key[0]}, {"annotator_a", key[1]}, {"annotator_b", key[2]}};
    auto none = l, quadratic = l;
    none["weighting"] = "none";
    quadratic["weighting"] = "quadratic";
    setGauge("assay_annotator_kappa", none, stats::cohenKappa(a, b), touched);
    setGauge("assay_annotator_kappa", quadratic,
             stats::cohenKappa(a, b, stats::KappaWeights::kQuadratic), touched);
  }
}

void ScoreTracker::exportAb(const Snapshot& snap, Touched& touched) {
  for (const auto& [experiment, arms] : snap.ab) {
    // The test runs on the real arms; the ratings gauge folds their names for its label.
    std::vector<std::vector<double>> table;
    std::map<std::string, double> ratings_by_label;
    bool every_arm_30 = true;
    for (const auto& [variant, stars] : arms) {
      double n = 0;
      for (double c : stars) n += c;
      ratings_by_label[variants_.fold(variant)] += n;
      if (n == 0) continue;
      every_arm_30 = every_arm_30 && n >= 30;
      table.emplace_back(stars.begin(), stars.end());
    }
    for (const auto& [label, n] : ratings_by_label)
      setGauge("assay_ab_ratings", {{"experiment", experiment}, {"variant", label}}, n, touched);
    const auto chi = stats::chiSquareIndependence(table);
    if (!chi) continue;
    const prometheus::Labels l{{"experiment", experiment}};
    setGauge("assay_ab_p_value", l, chi->p_value, touched);
    setGauge("assay_ab_expected_min", l, chi->min_expected, touched);
    setGauge("assay_ab_reliable", l, chi->reliable ? 1.0 : 0.0, touched);
    // A decision is an event: once made it stays (in this process), whatever later ratings do.
    if (chi->p_value < 0.05 && every_arm_30) local_decided_.insert(experiment);
    setGauge("assay_ab_decided", l, local_decided_.count(experiment) ? 1.0 : 0.0, touched);
  }
  if (!shared_snapshot_) return;
  for (const auto& x : shared_snapshot_()) {
    const prometheus::Labels l{{"experiment", x.name}};
    for (std::size_t a = 0; a < x.arms.size(); ++a) {
      setGauge("assay_ab_ratings", {{"experiment", x.name}, {"variant", x.arms[a]}},
               static_cast<double>(x.ratings[a]), touched);
      setGauge("assay_ab_winner", {{"experiment", x.name}, {"variant", x.arms[a]}},
               x.winner == a ? 1.0 : 0.0, touched);
    }
    setGauge("assay_ab_anytime_p_value", l, x.anytime_p, touched);
    setGauge("assay_ab_decided", l, x.decided ? 1.0 : 0.0, touched);
    if (x.decided) {
      setGauge("assay_ab_decision_p_value", l, x.decision_p, touched);
      setGauge("assay_ab_decision_timestamp_seconds", l, x.decision_time_s, touched);
      for (std::size_t a = 0; a < x.arms.size() && a < x.decision_ratings.size(); ++a)
        setGauge("assay_ab_decision_ratings", {{"experiment", x.name}, {"variant", x.arms[a]}},
                 static_cast<double>(x.decision_ratings[a]), touched);
    }
    if (!x.chi) continue;
    setGauge("assay_ab_p_value", l, x.chi->p_value, touched);
    setGauge("assay_ab_expected_min", l, x.chi->min_expected, touched);
    setGauge("assay_ab_reliable", l, x.chi->reliable ? 1.0 : 0.0, touched);
  }
}

void freezeBaselines(ScoreTracker& tracker, const std::vector<TrackedJudge>& judges,
                     const TrackingOptions& t) {
  if (t.baseline_file.empty()) return;
  std::map<std::string, std::vector<double>> baseline;
  BaselineVersions versions;
  for (const auto& j : judges)
    if (!j.version.empty()) versions.keep[j.name] = j.version;
  try {
    baseline = loadBaselineScores(
        t.baseline_file, t.baseline_from.empty() ? std::nullopt : parseRfc3339(t.baseline_from),
        t.baseline_until.empty() ? std::nullopt : parseRfc3339(t.baseline_until), &versions);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("tracking.baseline_file: ") + e.what());
  }
  const std::string range =
      t.baseline_from.empty() && t.baseline_until.empty()
          ? ""
          : fmt::format(" judged in [{}, {})", t.baseline_from.empty() ? "…" : t.baseline_from,
                        t.baseline_until.empty() ? "…" : t.baseline_until);
  for (const auto& [name, n] : versions.skipped)
    spdlog::warn(
        "tracking: baseline file '{}' has {} score(s) of judge '{}' by another version than its "
        "current {}: left out (a baseline is of one version)",
        t.baseline_file, n, name, versions.keep[name]);
  for (std::size_t i = 0; i < judges.size(); ++i) {
    auto it = baseline.find(judges[i].name);
    if (it == baseline.end() || it->second.size() < 2) {
      spdlog::warn(
          "tracking: baseline file '{}' has {} score(s) of judge '{}'{}: its baseline is taken "
          "from its first scores instead",
          t.baseline_file, it == baseline.end() ? 0 : it->second.size(), judges[i].name, range);
      continue;
    }
    auto scores = it->second;
    // A count window keeps the file's last baseline_window scores; a duration window all of
    // them (baseline_from/until choose the period).
    if (t.baseline_seconds <= 0 && scores.size() > static_cast<std::size_t>(t.baseline_window))
      scores.erase(scores.begin(), scores.end() - t.baseline_window);
    spdlog::info("tracking: judge '{}' drift baseline frozen from '{}'{} ({} scores)",
                 judges[i].name, t.baseline_file, range, scores.size());
    tracker.setBaseline(i, std::move(scores));
  }
}

}  // namespace assay
