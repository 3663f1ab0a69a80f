#include "cli/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "config/options.hpp"
#include "core/json_limits.hpp"
#include "core/judgment.hpp"
#include "core/log_text.hpp"
#include "core/rfc3339.hpp"
#include "sampling/sampler.hpp"
#include "tracking/stats.hpp"
#include "tracking/window.hpp"

namespace assay {

namespace {

std::string bar(double share, int width = 30) {
  const long n = std::lround(share * width);
  return std::string(static_cast<std::size_t>(n), '#');
}

void printDistribution(const JudgeSummary& s, std::ostream& out) {
  long runs = 0;
  for (const auto& [o, n] : s.outcomes) runs += n;
  std::string outcomes;
  for (const auto& [o, n] : s.outcomes) outcomes += fmt::format(" {}={}", o, n);
  out << fmt::format("  {:<18} {:<20} runs {:>4}:{}\n", s.judge, s.criterion, runs, outcomes);
  if (s.scores.empty()) return;
  const double mean =
      std::accumulate(s.scores.begin(), s.scores.end(), 0.0) / static_cast<double>(s.scores.size());
  auto sorted = s.scores;
  std::sort(sorted.begin(), sorted.end());
  auto q = [&](double p) {
    // Nearest-rank on the sorted sample (round half away from zero).
    return sorted[static_cast<std::size_t>(
        std::lround(p * static_cast<double>(sorted.size() - 1)))];
  };
  out << fmt::format(
      "  {:<18} mean {:.3f}  p10 {:.3f}  median {:.3f}  p90 {:.3f}  top-score share {:.1f} %\n", "",
      mean, q(0.1), q(0.5), q(0.9),
      100.0 * static_cast<double>(std::count(sorted.begin(), sorted.end(), s.max_score)) /
          static_cast<double>(sorted.size()));
  const bool binary = std::all_of(sorted.begin(), sorted.end(),
                                  [&](double x) { return x == s.min_score || x == s.max_score; });
  if (binary) return;  // pass/fail: the outcome line and the top-score share say it all
  const bool integer_scale =
      s.max_score - s.min_score <= 10 && s.min_score == std::floor(s.min_score) &&
      std::all_of(sorted.begin(), sorted.end(), [](double x) { return x == std::floor(x); });
  if (integer_scale) {  // a rubric: one line per level
    for (double level = s.min_score; level <= s.max_score; level += 1) {
      const long n = std::count(sorted.begin(), sorted.end(), level);
      out << fmt::format("  {:<18}   {:<11} {:>4}  {}\n", "", fmt::format("score {:g}", level), n,
                         bar(static_cast<double>(n) / static_cast<double>(sorted.size())));
    }
    return;
  }
  constexpr int kBins = 5;
  std::array<long, kBins> bins{};
  for (double x : sorted) {
    const double r = (x - s.min_score) / (s.max_score - s.min_score);
    ++bins[static_cast<std::size_t>(std::clamp(static_cast<int>(r * kBins), 0, kBins - 1))];
  }
  for (int b = 0; b < kBins; ++b) {
    const double lo = s.min_score + (s.max_score - s.min_score) * b / kBins;
    const double hi = s.min_score + (s.max_score - s.min_score) * (b + 1) / kBins;
    const double share = static_cast<double>(bins[b]) / static_cast<double>(sorted.size());
    out << fmt::format("  {:<18}   [{:.1f}, {:.1f}{} {:>4}  {}\n", "", lo, hi,
                       b + 1 == kBins ? "]" : ")", bins[b], bar(share));
  }
}

std::string num(std::optional<double> v, const char* format = "{:.3f}") {
  return v ? fmt::format(fmt::runtime(format), *v) : "undefined";
}

const char* agreementLevel(double tau) {
  return tau >= 0.7 ? "high" : tau >= 0.4 ? "moderate" : "low";
}

/// The values of `a` and `b` at the ids both have, ordered by id: (x, y) of equal length.
std::pair<std::vector<double>, std::vector<double>> joinById(
    const std::unordered_map<std::string, double>& a,
    const std::unordered_map<std::string, double>& b) {
  std::vector<std::pair<std::string, std::pair<double, double>>> both;
  for (const auto& [id, x] : a)
    if (auto it = b.find(id); it != b.end()) both.push_back({id, {x, it->second}});
  std::sort(both.begin(), both.end());
  std::pair<std::vector<double>, std::vector<double>> xy;
  for (const auto& [id, v] : both) xy.first.push_back(v.first), xy.second.push_back(v.second);
  return xy;
}

std::optional<double> rhoOf(const std::optional<stats::Correlation>& c) {
  return c ? std::optional<double>(c->coefficient) : std::nullopt;
}

void printAgreement(
    const std::vector<JudgeSummary>& judges,
    const std::unordered_map<std::string, std::unordered_map<std::string, double>>& score_by_id,
    const TrackingOptions& t, std::ostream& out);

/// Leniency and drift per judge, with the daemon's own code and tracking settings, over the
/// file's scores in order (duration windows use judged_at); then agreement between judges of
/// one criterion on the same events.
void printTracking(
    const std::vector<JudgeSummary>& judges,
    const std::unordered_map<std::string, std::unordered_map<std::string, double>>& score_by_id,
    const TrackingOptions& t, std::ostream& out) {
  const auto window_text = [](int count, double seconds) {
    return seconds > 0 ? fmt::format("{:g} h", seconds / 3600) : fmt::format("{} scores", count);
  };
  out << fmt::format(
      "leniency and drift (the daemon's tracking: lenient = more than {:.0f} % of the scores at "
      "the top over at least {}; drift = the {}{} against the last {}, two-sided Mann-Whitney "
      "p < {} and the mean moved at least {}):\n",
      t.leniency_max_ratio * 100, t.min_samples, t.rolling_baseline ? "" : "first ",
      window_text(t.baseline_window, t.baseline_seconds) +
          (t.rolling_baseline ? " before the recent window" : ""),
      window_text(t.recent_window, t.recent_seconds), t.drift_alpha, t.drift_min_delta);
  std::size_t width = 18;
  for (const auto& s : judges) width = std::max(width, s.judge.size());
  for (const auto& s : judges) {
    if (s.scores.empty()) continue;
    stats::ScoreWindow window(s.scores.size(), s.min_score, s.max_score);
    stats::DriftDetector drift({.baseline_size = static_cast<std::size_t>(t.baseline_window),
                                .recent_size = static_cast<std::size_t>(t.recent_window),
                                .baseline_seconds = t.baseline_seconds,
                                .recent_seconds = t.recent_seconds,
                                .alpha = t.drift_alpha,
                                .min_delta = t.drift_min_delta,
                                .rolling = t.rolling_baseline});
    double last = 0;
    for (std::size_t i = 0; i < s.scores.size(); ++i) {
      last = std::max(last, s.times[i]);
      if (window.add(s.scores[i])) drift.add(s.scores[i], s.times[i]);
    }
    const auto w = window.summary(t.leniency_max_ratio, static_cast<std::size_t>(t.min_samples));
    if (!w) continue;
    const auto d = drift.evaluate(last);
    // A 0/1 judge (a check, e.g. refusal: the judgments do not say which kind a judge is) has
    // no leniency verdict in the daemon either.
    const bool binary =
        s.min_score == 0 && s.max_score == 1 &&
        std::all_of(s.scores.begin(), s.scores.end(), [](double x) { return x == 0 || x == 1; });
    const bool enough = t.baseline_seconds > 0 || t.recent_seconds > 0 ||
                        s.scores.size() >= static_cast<std::size_t>(t.baseline_window) +
                                               static_cast<std::size_t>(t.recent_window);
    std::string drift_text =
        d ? fmt::format("{} (mean {:.3f} -> {:.3f}, p {:.3g})", d->drift ? "YES" : "no",
                        d->baseline_mean, d->recent_mean, d->p_value)
        : w->distinct == 1 ? "n/a (every score is the same: no test)"
        : enough           ? "n/a (a window holds too few scores)"
                 : fmt::format("n/a (needs {} scores)", t.baseline_window + t.recent_window);
    out << fmt::format(
        "  {:<{}} top {:5.1f} %  bottom {:5.1f} %  distinct {:>4}  entropy {:.2f}  lenient {:<3}  "
        "drift {}\n",
        s.judge, width, w->top_share * 100, w->bottom_share * 100, w->distinct, w->entropy,
        s.pass_fail || binary                            ? "n/a (pass/fail)"
        : w->n < static_cast<std::size_t>(t.min_samples) ? "n/a"
        : w->lenient                                     ? "YES"
                                                         : "no",
        drift_text);
  }
  printAgreement(judges, score_by_id, t, out);
}

/// Agreement between judges of one criterion on the events both scored.
void printAgreement(
    const std::vector<JudgeSummary>& judges,
    const std::unordered_map<std::string, std::unordered_map<std::string, double>>& score_by_id,
    const TrackingOptions& t, std::ostream& out) {
  out << "agreement between judges of the same criterion, on the events both scored (Kendall "
         "tau-b; high >= 0.7, moderate >= 0.4, else low):\n";
  bool any = false;
  // Pairs of summaries of one criterion and two judges (two versions of one judge never judged
  // the same event: the last judgment of an id), grouped so that many versions of one judge
  // cost their product with the other judges only; pairs with no event in common are counted.
  std::map<std::string, std::map<std::string, std::vector<std::size_t>>> by_criterion;
  for (std::size_t i = 0; i < judges.size(); ++i)
    by_criterion[judges[i].criterion][judges[i].name].push_back(i);
  std::size_t disjoint = 0;
  for (const auto& [criterion, names] : by_criterion)
    for (auto na = names.begin(); na != names.end(); ++na)
      for (auto nb = std::next(na); nb != names.end(); ++nb)
        for (std::size_t a : na->second)
          for (std::size_t b : nb->second) {
            if (a > b) std::swap(a, b);  // in the order of the file's first verdicts
            const auto ia = score_by_id.find(judges[a].judge),
                       ib = score_by_id.find(judges[b].judge);
            if (ia == score_by_id.end() || ib == score_by_id.end()) continue;
            const auto [x, y] = joinById(ia->second, ib->second);
            any = true;
            if (x.empty()) {
              ++disjoint;
              continue;
            }
            const auto tau = stats::kendallTauB(x, y);
            const auto rho = stats::spearman(x, y);
            const std::string why = x.size() < 3 ? " (too few events both scored)"
                                    : !tau       ? " (a judge gave one score only)"
                                                 : "";
            out << fmt::format(
                "  {:<17} {} vs {}: n {}, tau-b {}, Spearman {}{}{}{}\n", judges[a].criterion,
                judges[a].judge, judges[b].judge, x.size(), num(tau), num(rhoOf(rho)),
                tau ? fmt::format(" -> {}", agreementLevel(*tau)) : "", why,
                x.size() < static_cast<std::size_t>(t.min_pairs)
                    ? fmt::format(" [below tracking.min_pairs {}: the daemon exports "
                                  "no statistic yet]",
                                  t.min_pairs)
                    : "");
          }
  if (disjoint > 0)
    out << fmt::format("  ({} pair(s) of judges of one criterion scored no event in common)\n",
                       disjoint);
  if (!any) out << "  (no two judges share a criterion)\n";
}

}  // namespace

namespace {

/// The judgments file: the last judgment of each id (the JSON Lines sink appends across runs
/// and Kafka may redeliver), summarised per judge.
struct Judgments {
  std::vector<JudgeSummary> judges;
  std::unordered_map<std::string, std::size_t> judge_index;
  /// score per (judge, event id), for the label analyses
  std::unordered_map<std::string, std::unordered_map<std::string, double>> score_by_id;
  /// The versions each summary holds (by its key): a set beside JudgeSummary::versions' list.
  std::unordered_map<std::string, std::unordered_set<std::string>> versions_seen;
  long events = 0, bad_lines = 0, lines_read = 0, duplicates = 0;
  long repeated_verdicts = 0;  ///< a judge's second verdict in one judgment: skipped
};

/// Adds one judgment's verdicts to the per-judge summaries: one per judge and version, or per
/// judge when `across` (--across-versions). Keys are `name` U+001F `version` until
/// nameSummaries() names them.
void addJudgment(const JudgmentRecord& d, bool across, Judgments& j) {
  const std::string& id = *d.id;
  double judged_at = 0;
  if (d.judged_at)
    if (const auto ms = parseRfc3339(*d.judged_at)) judged_at = *ms / 1000.0;
  std::unordered_set<std::string_view> judged;  // a judge counts once per judgment
  for (const auto& v : d.verdicts) {
    if (!judged.insert(v.judge).second) {
      ++j.repeated_verdicts;
      continue;
    }
    // The name's length first: no two (judge, version) pairs share a key.
    const std::string key =
        across ? v.judge : std::to_string(v.judge.size()) + ":" + v.judge + v.version;
    auto [it, inserted] = j.judge_index.emplace(key, j.judges.size());
    if (inserted) {
      JudgeSummary s;
      s.judge = key;
      s.name = logText(v.judge, 120);  // printed: control characters escaped
      s.criterion = logText(v.criterion, 120);
      if (v.min) s.min_score = *v.min;
      if (v.max) s.max_score = *v.max;
      s.version_fields = v.version_fields;
      j.judges.push_back(std::move(s));
    }
    auto& s = j.judges[it->second];
    if (j.versions_seen[key].insert(v.version).second) s.versions.push_back(v.version);
    if (d.judged_at) {
      if (s.first_judged_at.empty()) s.first_judged_at = *d.judged_at;
      s.last_judged_at = *d.judged_at;
    }
    ++s.outcomes[v.outcome];
    if (v.has_passed) s.pass_fail = true;
    if (v.score) {
      s.scores.push_back(*v.score);
      s.times.push_back(judged_at);
      j.score_by_id[key][id] = *v.score;
    }
  }
}

/// Names every summary: the judge's name, or `name@version` when the file holds more than one
/// version of the judge; re-keys the index and the scores by that name.
/// A judge whose file holds verdicts without a version (written before versions existed) and
/// exactly one version since: the unversioned ones are counted with it, earlier ones first.
void poolUnversioned(Judgments& j) {
  std::map<std::string, std::vector<std::size_t>> by_name;
  for (std::size_t i = 0; i < j.judges.size(); ++i) by_name[j.judges[i].name].push_back(i);
  std::vector<std::size_t> merged;
  for (const auto& [name, list] : by_name) {
    if (list.size() != 2) continue;
    std::size_t old = list[0], now = list[1];
    if (j.judges[old].versions.front().empty() == j.judges[now].versions.front().empty()) continue;
    if (!j.judges[old].versions.front().empty()) std::swap(old, now);
    JudgeSummary& from = j.judges[old];
    JudgeSummary& to = j.judges[now];
    long runs = 0;
    for (const auto& [o, n] : from.outcomes) {
      to.outcomes[o] += n;
      runs += n;
    }
    to.pooled_unversioned = runs;
    to.scores.insert(to.scores.begin(), from.scores.begin(), from.scores.end());
    to.times.insert(to.times.begin(), from.times.begin(), from.times.end());
    to.pass_fail = to.pass_fail || from.pass_fail;
    if (!from.first_judged_at.empty() &&
        (to.first_judged_at.empty() || from.first_judged_at < to.first_judged_at))
      to.first_judged_at = from.first_judged_at;
    auto& into = j.score_by_id[to.judge];
    for (const auto& [id, score] : j.score_by_id[from.judge]) into.emplace(id, score);
    j.score_by_id.erase(from.judge);
    merged.push_back(old);
  }
  std::sort(merged.rbegin(), merged.rend());
  for (std::size_t i : merged) j.judges.erase(j.judges.begin() + static_cast<long>(i));
}

void nameSummaries(Judgments& j) {
  std::map<std::string, int> per_name;
  for (const auto& s : j.judges) ++per_name[s.name];
  std::unordered_map<std::string, std::unordered_map<std::string, double>> by_id;
  j.judge_index.clear();
  for (std::size_t i = 0; i < j.judges.size(); ++i) {
    auto& s = j.judges[i];
    std::string shown = s.name;
    if (per_name[s.name] > 1)
      shown += "@" + (s.versions.front().empty() ? std::string("unversioned")
                                                 : logText(s.versions.front(), 40));
    // A judge named like another's NAME@VERSION (names may hold '@'): told apart.
    for (int n = 2; j.judge_index.count(shown); ++n)
      shown = s.name + " (" + std::to_string(n) + ")";
    if (auto it = j.score_by_id.find(s.judge); it != j.score_by_id.end())
      by_id[shown] = std::move(it->second);
    s.judge = shown;
    j.judge_index[shown] = i;
  }
  j.score_by_id = std::move(by_id);
}

/// The judges whose verdicts come from more than one version: each version on its own line, with
/// what it changed against the one before it (judge_version_fields), or, with
/// --across-versions, the versions pooled.
void printVersions(const Judgments& j, bool across, std::ostream& out) {
  std::map<std::string, std::vector<const JudgeSummary*>> by_name;
  for (const auto& s : j.judges) by_name[s.name].push_back(&s);
  std::erase_if(by_name, [&](const auto& kv) {
    return (across ? kv.second.front()->versions.size() < 2 : kv.second.size() < 2) &&
           kv.second.front()->pooled_unversioned == 0;
  });
  if (by_name.empty()) return;
  const auto shown = [](const std::string& v) {
    return v.empty() ? std::string("(unversioned)") : logText(v, 40);
  };
  out << (across ? "versions: pooled by --across-versions (each judge's statistics below mix the "
                   "scores of its versions):\n"
                 : "versions: each version of a judge is summarised, tested and compared on its "
                   "own; --across-versions pools them:\n");
  for (const auto& [name, list] : by_name) {
    if (across) {
      std::vector<std::string> versions;
      for (const auto& v : list.front()->versions) versions.push_back(shown(v));
      out << fmt::format("  {:<18} {} versions: {}\n", name, versions.size(),
                         fmt::join(versions, ", "));
      continue;
    }
    if (list.size() == 1) {  // one version, with verdicts written before versions existed
      out << fmt::format(
          "  {:<18} {:<14} {} verdicts written before judge versions existed are counted with "
          "it (the only version since)\n",
          name, shown(list.front()->versions.front()), list.front()->pooled_unversioned);
      continue;
    }
    const JudgeSummary* before = nullptr;
    for (const auto* s : list) {
      long runs = 0;
      for (const auto& [o, n] : s->outcomes) runs += n;
      std::string changed;
      if (before) {
        const auto fields = before->version_fields.empty() || s->version_fields.empty()
                                ? std::vector<std::string>{}
                                : changedFields(before->version_fields, s->version_fields);
        changed = fields.empty()
                      ? fmt::format("; against {}: the changed fields are not recorded",
                                    shown(before->versions.front()))
                      : fmt::format("; against {}, changed: {}", shown(before->versions.front()),
                                    fmt::join(fields, ", "));
      }
      out << fmt::format("  {:<18} {:<14} runs {:>5}, judged {} .. {}{}\n", before ? "" : name,
                         shown(s->versions.front()), runs,
                         s->first_judged_at.empty() ? "?" : s->first_judged_at,
                         s->last_judged_at.empty() ? "?" : s->last_judged_at, changed);
      before = s;
    }
  }
}

/// Reads the judgments file (core/judgment.hpp's reader); false (after a message on `err`) when
/// it has lines but none is a judgment. An empty file is not an error: j.lines_read is then 0.
bool readJudgments(const std::string& path, std::istream& in, bool across, Judgments& j,
                   std::ostream& err) {
  std::vector<JudgmentRecord> docs;
  std::unordered_map<std::string, std::size_t> last_by_id;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++j.lines_read;
    JudgmentRecord d;
    if (readJudgmentLine(line, d) || !d.verdicts_array || !d.id) {
      ++j.bad_lines;
      continue;
    }
    last_by_id[*d.id] = docs.size();
    docs.push_back(std::move(d));
  }
  if (docs.empty() && j.lines_read > 0) {
    err << "assay report: '" << path << "' holds no judgment (" << j.lines_read
        << " non-empty lines, none a judgment object with id and verdicts)\n";
    return false;
  }
  j.duplicates = static_cast<long>(docs.size() - last_by_id.size());
  for (std::size_t di = 0; di < docs.size(); ++di) {
    if (last_by_id[*docs[di].id] != di) continue;
    ++j.events;
    addJudgment(docs[di], across, j);
  }
  if (!across) poolUnversioned(j);
  nameSummaries(j);
  return true;
}

/// The events file's labels: a boolean per event at label_pointer (for the AUC), a number at
/// human_pointer (for the judge-vs-human correlation).
struct Labels {
  struct Labelled {
    std::string id, group;
    bool label;
  };
  std::vector<Labelled> labelled;
  long non_boolean = 0;
  std::unordered_map<std::string, double> human;  // event id → numeric human label
};

/// True when `id` is in the half `half` names ("A": XXH3_64(id) < 2^63; "B": the others; "":
/// every id).
bool inHalf(const std::string& half, std::string_view id) {
  if (half.empty()) return true;
  return (sampleHash(id) < (std::uint64_t{1} << 63)) == (half == "A");
}

Labels readLabels(const ReportOptions& o, std::istream& ev) {
  Labels out;
  const rapidjson::Pointer label_ptr(o.label_pointer.c_str());
  const rapidjson::Pointer group_ptr(o.group_pointer.empty() ? "" : o.group_pointer.c_str());
  const rapidjson::Pointer human_ptr(o.human_pointer.empty() ? "" : o.human_pointer.c_str());
  std::string line;
  while (std::getline(ev, line)) {
    if (jsonShapeProblem(line)) continue;
    rapidjson::Document d;
    d.Parse(line.c_str());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("id") || !d["id"].IsString()) continue;
    if (!inHalf(o.half, d["id"].GetString())) continue;
    if (!o.human_pointer.empty())
      if (const auto* h = human_ptr.Get(d); h && h->IsNumber())
        out.human[d["id"].GetString()] = h->GetDouble();
    const auto* l = label_ptr.Get(d);
    if (!l || l->IsNull()) continue;  // unlabelled events are left out
    if (!l->IsBool()) {
      ++out.non_boolean;
      continue;
    }
    std::string group;
    if (!o.group_pointer.empty())
      if (const auto* g = group_ptr.Get(d); g && g->IsString()) group = g->GetString();
    out.labelled.push_back({d["id"].GetString(), group, l->GetBool()});
  }
  return out;
}

void printHuman(const ReportOptions& o, const Judgments& j, const Labels& labels,
                std::ostream& out) {
  out << fmt::format(
      "judge vs human label {} (judges of criterion {}; Spearman rho with its p-value, "
      "Kendall tau-b; the same code as assay_judge_human_spearman):\n",
      o.human_pointer, o.human_criterion);
  bool any = false;
  for (const auto& s : j.judges) {
    if (s.criterion != o.human_criterion) continue;
    const auto sit = j.score_by_id.find(s.judge);
    if (sit == j.score_by_id.end()) continue;
    const auto [x, y] = joinById(sit->second, labels.human);
    const auto rho = stats::spearman(x, y);
    const auto tau = stats::kendallTauB(x, y);
    any = true;
    out << fmt::format("  {:<18} n {}, Spearman {}{}, tau-b {}\n", s.judge, x.size(),
                       num(rhoOf(rho)), rho ? fmt::format(" (p {:.3g})", rho->p_value) : "",
                       num(tau));
  }
  if (!any)
    out << fmt::format("  ({} events carry a number there; no judge of criterion {} scored them)\n",
                       labels.human.size(), o.human_criterion);
}

/// ROC AUC of one judge against the boolean labels, overall and per group.
void printAuc(const ReportOptions& o, const std::string& judge, const Judgments& j,
              const std::unordered_map<std::string, double>& scores, const Labels& labels,
              std::ostream& out) {
  // A faithfulness score is high for faithful answers, so rank by (max − score) to detect the
  // positive class "hallucinated".
  const double top = j.judges[j.judge_index.at(judge)].max_score;
  std::map<std::string, std::pair<std::vector<double>, std::vector<bool>>> by_group;
  std::vector<double> all_scores;
  std::vector<bool> all_labels;
  long not_judged = 0;
  for (const auto& e : labels.labelled) {
    auto it = scores.find(e.id);
    if (it == scores.end()) {
      ++not_judged;
      continue;
    }
    all_scores.push_back(top - it->second);
    all_labels.push_back(e.label);
    by_group[e.group].first.push_back(top - it->second);
    by_group[e.group].second.push_back(e.label);
  }
  const long pos = std::count(all_labels.begin(), all_labels.end(), true);
  const long neg = static_cast<long>(all_labels.size()) - pos;
  const auto auc = rocAuc(all_scores, all_labels);
  out << fmt::format(
      "{} vs label {} (true = positive class; a LOW score predicts it, so AUC = P(a positive "
      "scores below a negative); 0.5 = chance, 1 = perfect):\n",
      judge, o.label_pointer);
  out << fmt::format(
      "  ROC AUC {}  (positive {} / negative {}; {} labelled events without a score)\n",
      auc ? fmt::format("{:.3f}", *auc) : "n/a", pos, neg, not_judged);
  if (by_group.size() <= 1) return;
  for (const auto& [group, sl] : by_group) {
    const auto g = rocAuc(sl.first, sl.second);
    const long gp = std::count(sl.second.begin(), sl.second.end(), true);
    out << fmt::format("    {:<14} AUC {}  ({} / {})\n", group.empty() ? "(none)" : group,
                       g ? fmt::format("{:.3f}", *g) : "n/a", gp,
                       static_cast<long>(sl.second.size()) - gp);
  }
}

/// The cascade table of one judge: LLM share and recall at ten thresholds across its scale and
/// at the lowest threshold that reaches the recall asked for, overall and per group there.
void printCascade(const ReportOptions& o, const std::string& judge, const Judgments& j,
                  const std::unordered_map<std::string, double>& scores, const Labels& labels,
                  std::ostream& out) {
  const auto& summary = j.judges[j.judge_index.at(judge)];
  std::vector<double> all;
  std::vector<bool> positive;
  for (const auto& e : labels.labelled)
    if (auto it = scores.find(e.id); it != scores.end()) {
      all.push_back(it->second);
      positive.push_back(e.label);
    }
  const auto curve = cascadeCurve(all, positive);
  const long pos = std::count(positive.begin(), positive.end(), true);
  out << fmt::format(
      "cascade on {} (run_if: [{{judge: {}, below: T}}]): LLM share = scored events sent on to "
      "the LLM judge, recall = positives of {} among them / all {} positives ({} events):\n",
      judge, judge, o.label_pointer, pos, all.size());
  if (curve.empty()) return;
  auto at = [&](double t) {
    CascadePoint p{t, 0, 0};
    for (const auto& c : curve)
      if (c.threshold <= t) p.share = c.share, p.recall = c.recall;
    // Between curve points the counts are those of the last point at or below t.
    return p;
  };
  // Euros per hallucination caught: the calls sent × the price / the positives among them.
  const auto perCaught = [&](const CascadePoint& p) -> std::optional<double> {
    const double caught = p.recall * static_cast<double>(pos);
    if (!o.price_per_call || caught <= 0) return std::nullopt;
    return p.share * static_cast<double>(all.size()) * *o.price_per_call / caught;
  };
  const auto column = [&](const CascadePoint& p) -> std::string {
    if (!o.price_per_call) return "";
    const auto v = perCaught(p);
    return v ? fmt::format("  {:>#14.4g}", *v) : fmt::format("  {:>14}", "-");
  };
  out << "  below      LLM share  recall" << (o.price_per_call ? "  EUR per caught" : "") << "\n";
  for (int k = 1; k <= 10; ++k) {
    const double t = summary.min_score + (summary.max_score - summary.min_score) * k / 10.0;
    const auto p = at(t);
    out << fmt::format("  {:<9.4g}  {:>9.3f}  {:>6.3f}{}\n", t, p.share, p.recall, column(p));
  }
  if (o.price_per_call && pos > 0)
    out << fmt::format(
        "  (at EUR {} a call: every event to the LLM judge costs EUR {:#.4g} per hallucination "
        "caught)\n",
        *o.price_per_call,
        static_cast<double>(all.size()) * *o.price_per_call / static_cast<double>(pos));
  const auto* target = cascadeForRecall(curve, o.cascade_recall);
  if (!target) {
    out << fmt::format("  no threshold reaches recall {} ({} positives)\n", o.cascade_recall, pos);
    return;
  }
  // The threshold as the user will write it in run_if: the fewest digits (6 at least) that
  // still send exactly the events counted (strictly above every score sent, at most the next).
  double sent_max = -std::numeric_limits<double>::infinity();
  double next_min = std::numeric_limits<double>::infinity();
  for (double v : all) {
    if (v < target->threshold) sent_max = std::max(sent_max, v);
    if (v >= target->threshold) next_min = std::min(next_min, v);
  }
  std::string written;
  for (int digits = 6; digits <= 17; ++digits) {
    written = fmt::format("{:.{}g}", target->threshold, digits);
    const double back = std::strtod(written.c_str(), nullptr);
    if (back > sent_max && back <= next_min) break;
  }
  out << fmt::format(
      "  recall >= {}: below {} sends {:.1f} % of the events on (recall {:.3f}){}; "
      "assay estimate --escalation-share {:.3f} prices it\n",
      o.cascade_recall, written, 100 * target->share, target->recall,
      perCaught(*target)
          ? fmt::format(", EUR {:#.4g} per hallucination caught", *perCaught(*target))
          : "",
      target->share);
  std::map<std::string, std::pair<std::vector<double>, std::vector<bool>>> by_group;
  for (const auto& e : labels.labelled)
    if (auto it = scores.find(e.id); it != scores.end()) {
      by_group[e.group].first.push_back(it->second);
      by_group[e.group].second.push_back(e.label);
    }
  if (by_group.size() <= 1) return;
  for (const auto& [group, sl] : by_group) {
    long sent = 0, sent_pos = 0, gpos = 0;
    for (std::size_t i = 0; i < sl.first.size(); ++i) {
      const bool below = sl.first[i] < target->threshold;
      sent += below;
      sent_pos += below && sl.second[i];
      gpos += sl.second[i];
    }
    out << fmt::format("    {:<14} LLM share {:.3f}  recall {}\n", group.empty() ? "(none)" : group,
                       static_cast<double>(sent) / static_cast<double>(sl.first.size()),
                       gpos ? fmt::format("{:.3f}", static_cast<double>(sent_pos) / gpos) : "n/a");
  }
}

bool readable(const std::string& path, std::ostream& err) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) && std::ifstream(path)) return true;
  err << "assay report: cannot read '" << path << "' (not a readable file)\n";
  return false;
}

}  // namespace

std::vector<CascadePoint> cascadeCurve(const std::vector<double>& scores,
                                       const std::vector<bool>& labels) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return scores[a] < scores[b]; });
  const auto n = static_cast<double>(scores.size());
  const auto pos = static_cast<double>(std::count(labels.begin(), labels.end(), true));
  std::vector<CascadePoint> out;
  std::size_t sent = 0, sent_pos = 0;
  for (std::size_t i = 0; i < order.size();) {
    const double s = scores[order[i]];
    for (; i < order.size() && scores[order[i]] == s; ++i) {  // every event at this score
      ++sent;
      sent_pos += labels[order[i]];
    }
    const double next =
        i < order.size() ? scores[order[i]] : s + std::max(1e-6, std::abs(s) * 1e-6);
    out.push_back({(s + next) / 2, sent / n, pos > 0 ? static_cast<double>(sent_pos) / pos : 0.0});
  }
  return out;
}

const CascadePoint* cascadeForRecall(const std::vector<CascadePoint>& curve, double recall) {
  for (const auto& p : curve)
    if (p.recall >= recall - 1e-12) return &p;
  return nullptr;
}

int runReport(const ReportOptions& o, std::ostream& out) { return runReport(o, out, std::cerr); }

int runReport(const ReportOptions& o, std::ostream& out, std::ostream& err) {
  if (o.events_path.empty() && (!o.cascade_judges.empty() || !o.half.empty() || o.auc_given)) {
    err << "assay report: --cascade, --half and --auc read the labels of --events FILE, which "
           "is not given\n";
    return 2;
  }
  if (!o.events_path.empty() && !readable(o.events_path, err)) return 2;
  if (!readable(o.judgments_path, err)) return 2;
  std::ifstream in(o.judgments_path);
  Judgments j;
  if (!readJudgments(o.judgments_path, in, o.across_versions, j, err)) return 2;
  if (j.lines_read == 0) {
    out << fmt::format(
        "judgments: none yet in {} (the file is empty: assayd has judged nothing so far; "
        "assay_events_consumed_total and assay_events_sampled_total on its /metrics say whether "
        "it consumes and samples)\n",
        o.judgments_path);
    return 0;
  }
  out << fmt::format(
      "judgments: {} events in {}{}{}{}\n", j.events, o.judgments_path,
      j.bad_lines ? fmt::format(" ({} unreadable lines skipped)", j.bad_lines) : "",
      j.duplicates ? fmt::format(" ({} repeated ids: the last judgment of each kept)", j.duplicates)
                   : "",
      j.repeated_verdicts ? fmt::format(" ({} verdicts of a judge already in their judgment "
                                        "skipped: the first of each kept)",
                                        j.repeated_verdicts)
                          : "");
  printVersions(j, o.across_versions, out);
  out << "per judge: runs by outcome (ok = scored; any other outcome = could not judge), then\n"
         "the score distribution of ok runs (p10/p90 = 10th/90th percentile; top-score share =\n"
         "runs at the judge's maximum score):\n";
  for (const auto& s : j.judges) printDistribution(s, out);
  printTracking(j.judges, j.score_by_id, o.tracking, out);

  if (o.events_path.empty()) return 0;
  std::ifstream ev(o.events_path);
  const Labels labels = readLabels(o, ev);
  if (!o.human_pointer.empty()) printHuman(o, j, labels, out);
  if (labels.labelled.empty()) {
    err << "assay report: no event in '" << o.events_path << "' has a boolean at "
        << o.label_pointer
        << (labels.non_boolean
                ? " (" + std::to_string(labels.non_boolean) + " have a non-boolean value there)"
                : std::string())
        << ": no AUC\n";
    return 2;
  }
  // A judge named on the command line: each of its versions (one summary each).
  const auto summaries = [&](const std::string& name) {
    std::vector<const std::string*> out;
    for (const auto& s : j.judges)
      if (s.name == name && j.score_by_id.count(s.judge)) out.push_back(&s.judge);
    return out;
  };
  for (const auto& judge : o.auc_judges) {
    const auto shown = summaries(judge);
    if (shown.empty() && o.auc_given)
      err << "assay report: --auc " << judge << ": no scored verdict of that judge in '"
          << o.judgments_path << "'\n";
    for (const auto* s : shown) printAuc(o, *s, j, j.score_by_id.at(*s), labels, out);
  }
  for (const auto& judge : o.cascade_judges) {
    const auto shown = summaries(judge);
    if (shown.empty()) {
      err << "assay report: --cascade " << judge << ": no scored verdict of that judge in '"
          << o.judgments_path << "'\n";
      return 2;
    }
    for (const auto* s : shown) printCascade(o, *s, j, j.score_by_id.at(*s), labels, out);
  }
  return 0;
}

}  // namespace assay
