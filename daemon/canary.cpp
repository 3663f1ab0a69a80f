#include "daemon/canary.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "core/bounded_file.hpp"
#include "core/clock.hpp"
#include "core/json_limits.hpp"
#include "core/log_text.hpp"
#include "judges/judge.hpp"
#include "sources/event_parser.hpp"
#include "tracking/stats.hpp"

namespace assay {
namespace {

/// Statistics need at least this many scored events.
constexpr std::size_t kMinScored = 5;

const char* const kStatistics[] = {"roc_auc", "spearman", "kendall_tau", "kappa",
                                   "kappa_quadratic"};

bool integral(double x) { return std::isfinite(x) && x == std::floor(x); }

/// The label at `pointer` of one line (a valid JSON object: the event parser read it).
void readLabel(std::string_view line, const std::string& pointer, CanaryItem& item) {
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  if (d.HasParseError()) return;
  const rapidjson::Value* v = rapidjson::Pointer(pointer.c_str()).Get(d);
  if (!v) return;
  if (v->IsBool())
    item.bad = v->GetBool();
  else if (v->IsNumber() && std::isfinite(v->GetDouble()))
    item.number = v->GetDouble();
}

}  // namespace

CanarySet loadCanarySet(const CanaryOptions& o, const EventFieldOptions& fields,
                        std::size_t max_event_bytes) {
  std::string text;
  if (const auto why = readRegularFile(o.file, kMaxCanaryBytes, text); !why.empty())
    throw std::runtime_error(o.file + " " + why);
  const EventParser parser(fields, max_event_bytes);
  CanarySet set;
  const auto problem = [&](std::size_t line, const std::string& why) {
    if (set.problems.size() < 5)
      set.problems.push_back(fmt::format("{}:{}: {}", o.file, line, logText(why, 200)));
  };
  std::size_t start = 0, number = 0;
  std::unordered_map<std::string, std::size_t> seen;  // event id → its line
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (++set.lines > kMaxCanaryLines)
      throw std::runtime_error(fmt::format(
          "{} has more than {} lines: a canary is a fixed set of labelled events replayed on "
          "every run (canary.sample of them); keep a few thousand",
          o.file, kMaxCanaryLines));
    CanaryItem item;
    const ParseOutcome po = parser.parse(line, "line-" + std::to_string(number), item.event);
    if (!po.ok) {
      ++set.invalid;
      problem(number, "not an event (" + std::string(invalidReasonName(po.reason)) +
                          (po.detail.empty() ? "" : ": " + po.detail) + ")");
      continue;
    }
    // An id twice: the verdict store would answer the second from the first's verdict (and the
    // statistics count one judgment twice), so only the first line of an id is kept.
    if (const auto [at, first] = seen.try_emplace(item.event.id, number); !first) {
      ++set.invalid;
      problem(number, fmt::format("repeats the id of line {} (ignored)", at->second));
      continue;
    }
    readLabel(line, o.label, item);
    if (!item.bad && !item.number) {
      // A labelled file often holds a few lines without a label: counted, the first named.
      if (set.unlabelled++ == 0) set.first_unlabelled = fmt::format("{}:{}", o.file, number);
      continue;
    }
    set.items.push_back(std::move(item));
  }
  if (set.items.empty())
    throw std::runtime_error(fmt::format(
        "{}: no labelled event ({} lines: {} not events, {} without a boolean or number at {})",
        o.file, set.lines, set.invalid, set.unlabelled, o.label));
  // The same `sample` events on every run, whatever the file's order: the lowest hashes.
  const auto hash = [](const CanaryItem& i) {
    return XXH3_64bits(i.event.id.data(), i.event.id.size());
  };
  std::stable_sort(set.items.begin(), set.items.end(),
                   [&](const CanaryItem& a, const CanaryItem& b) { return hash(a) < hash(b); });
  if (set.items.size() > static_cast<std::size_t>(o.sample))
    set.items.resize(static_cast<std::size_t>(o.sample));
  return set;
}

namespace {

/// An outcome that says the judge cannot judge this event, not that it failed: the local
/// judges' "cannot judge" outcomes and abstentions, and the inputs too long to judge.
bool cannotJudge(Outcome o) {
  return std::find(std::begin(kFaithfulnessOutcomes), std::end(kFaithfulnessOutcomes), o) !=
             std::end(kFaithfulnessOutcomes) ||
         o == Outcome::kTooLong || o == Outcome::kContextTooLong || o == Outcome::kContextsTrimmed;
}

}  // namespace

CanaryStatistics canaryStatistics(const std::vector<std::pair<double, const CanaryItem*>>& scores,
                                  std::size_t failed, double min_score, double max_score) {
  CanaryStatistics s;
  s.scored = scores.size();
  s.failed = failed;
  if (scores.size() < kMinScored) return s;
  double sum = 0;
  for (const auto& [score, item] : scores) sum += score;
  s.mean = sum / static_cast<double>(scores.size());
  // A boolean label: a LOW score should flag a bad answer (max − score ranks them first).
  std::vector<double> flipped, x, y;
  std::vector<bool> bad;
  for (const auto& [score, item] : scores) {
    if (item->bad) {
      flipped.push_back(max_score - score);
      bad.push_back(*item->bad);
    }
    if (item->number) {
      x.push_back(score);
      y.push_back(*item->number);
    }
  }
  if (flipped.size() >= kMinScored)
    if (const auto auc = stats::rocAuc(flipped, bad)) s.agreement["roc_auc"] = *auc;
  if (x.size() < kMinScored) return s;
  if (const auto rho = stats::spearman(x, y)) s.agreement["spearman"] = rho->coefficient;
  if (const auto tau = stats::kendallTauB(x, y)) s.agreement["kendall_tau"] = *tau;
  // Kappa only where the scales match: integer labels on the judge's integer scale.
  const bool same_scale =
      integral(min_score) && integral(max_score) && max_score - min_score <= 10 &&
      std::all_of(x.begin(), x.end(), integral) && std::all_of(y.begin(), y.end(), [&](double v) {
        return integral(v) && v >= min_score && v <= max_score;
      });
  if (!same_scale) return s;
  std::vector<int> a(x.begin(), x.end()), b(y.begin(), y.end());
  if (const auto k = stats::cohenKappa(a, b)) s.agreement["kappa"] = *k;
  if (const auto k = stats::cohenKappa(a, b, stats::KappaWeights::kQuadratic))
    s.agreement["kappa_quadratic"] = *k;
  return s;
}

// ---- Canary -------------------------------------------------------------------------------------

namespace {

prometheus::Family<prometheus::Gauge>& gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

Canary::Canary(const Config& config, JudgeRunner& runner, prometheus::Registry& registry,
               CanarySet set, double first_delay_s)
    : options_(config.canary),
      runner_(runner),
      set_(std::move(set)),
      mean_(gauge(registry, "assay_canary_mean_score",
                  "Mean score of the judge on the canary events, its own scale")),
      agreement_(gauge(registry, "assay_canary_agreement",
                       "Agreement of the judge with the canary's human labels, by statistic")),
      baseline_mean_(gauge(registry, "assay_canary_baseline_mean_score",
                           "Mean canary score of the judge version's first run")),
      baseline_agreement_(gauge(registry, "assay_canary_baseline_agreement",
                                "Agreement with the labels in the judge version's first run")),
      shift_(gauge(registry, "assay_canary_mean_shift",
                   "(mean - first run's mean) / the judge's scale width, in [-1, 1]")),
      drop_(gauge(registry, "assay_canary_agreement_drop",
                  "First run's agreement minus the last run's, by statistic")),
      verdicts_(gauge(registry, "assay_canary_verdicts",
                      "Canary verdicts of the last run: scored, not_scored (an outcome that "
                      "says the judge cannot judge the event: no_reference, empty_input…), "
                      "failed (errors, timeouts, budget skips, too late)")),
      runs_(prometheus::BuildCounter()
                .Name("assay_canary_runs_total")
                .Help("Canary runs")
                .Register(registry)
                .Add({})),
      last_run_(gauge(registry, "assay_canary_last_run_timestamp_seconds",
                      "When the last canary run ended, Unix seconds")
                    .Add({})) {
  gauge(registry, "assay_canary_events", "Labelled events a canary run replays")
      .Add({})
      .Set(static_cast<double>(set_.items.size()));
  gauge(registry, "assay_canary_invalid_lines",
        "Lines of the canary file that are not labelled events")
      .Add({})
      .Set(static_cast<double>(set_.invalid + set_.unlabelled));
  for (const auto& p : set_.problems) spdlog::warn("canary: {}", p);
  loadState();
  spdlog::info(
      "canary: {} labelled events of {} ({} lines, {} not events, {} without a label at {}{}), "
      "a run every {:g} s",
      set_.items.size(), options_.file, set_.lines, set_.invalid, set_.unlabelled, options_.label,
      set_.unlabelled ? ", the first at " + set_.first_unlabelled : "", options_.every_seconds);
  thread_ = std::thread([this, first_delay_s] { loop(first_delay_s); });
}

Canary::~Canary() { stop(); }

void Canary::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Canary::loop(double first_delay_s) {
  auto next = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(first_delay_s));
  const auto every = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.every_seconds));
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    try {
      runOnce();
    } catch (const std::exception& e) {
      spdlog::error("canary: the run failed: {}", e.what());
    }
    next = std::max(next + every, std::chrono::steady_clock::now());
  }
}

std::map<std::string, CanaryStatistics> Canary::runOnce(double wait_s,
                                                        std::optional<long long> period_given) {
  std::lock_guard run(run_mu_);
  auto judges = runner_.currentJudges();
  if (!options_.judges.empty())  // canary.judges: only those (a judge a reload removed: none)
    std::erase_if(judges, [&](const JudgeRunner::Handle& h) {
      return std::find(options_.judges.begin(), options_.judges.end(), h.name) ==
             options_.judges.end();
    });
  // A run's ids carry its period: a restart within the period finds the verdicts the LLM
  // judges stored (no second payment); the next period calls again.
  const long long period = period_given.value_or(
      static_cast<long long>(std::floor(epochSeconds() / options_.every_seconds)));
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t outstanding = 0;
    std::vector<std::vector<std::optional<double>>> scores;  // [judge][item]
    std::vector<std::size_t> not_scored;                     // [judge]
  };
  auto st = std::make_shared<State>();
  st->scores.assign(judges.size(), std::vector<std::optional<double>>(set_.items.size()));
  st->not_scored.assign(judges.size(), 0);
  for (std::size_t j = 0; j < judges.size(); ++j)
    for (std::size_t i = 0; i < set_.items.size(); ++i) {
      Event e = set_.items[i].event;
      e.id = fmt::format("canary:{}:{}", period, e.id);
      const auto keep = [st, j, i](const Verdict& v) {
        std::lock_guard lock(st->mu);
        if (v.outcome == Outcome::kOk && v.score)
          st->scores[j][i] = *v.score;
        else if (cannotJudge(v.outcome))
          ++st->not_scored[j];
      };
      if (!judges[j].asynchronous) {
        try {
          keep(judges[j].judge->judge(e));
        } catch (const std::exception&) {  // counted as failed, as judge_error would be
        }
        continue;
      }
      {
        std::lock_guard lock(st->mu);
        ++st->outstanding;
      }
      try {
        judges[j].judge->judgeAsync(e, [st, keep](const Verdict& v) {
          keep(v);
          std::lock_guard lock(st->mu);
          --st->outstanding;
          st->cv.notify_all();
        });
      } catch (const std::exception&) {
        std::lock_guard lock(st->mu);
        --st->outstanding;
      }
    }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(wait_s));
  std::map<std::string, CanaryStatistics> out;
  {
    std::unique_lock lock(st->mu);
    while (st->outstanding > 0 && std::chrono::steady_clock::now() < deadline) {
      st->cv.wait_for(lock, std::chrono::milliseconds(100));
      std::lock_guard stop(mu_);
      if (stopping_) break;
    }
    for (std::size_t j = 0; j < judges.size(); ++j) {
      std::vector<std::pair<double, const CanaryItem*>> scored;
      for (std::size_t i = 0; i < set_.items.size(); ++i)
        if (st->scores[j][i]) scored.emplace_back(*st->scores[j][i], &set_.items[i]);
      const std::size_t not_scored = st->not_scored[j];
      auto& s = out[judges[j].name] =
          canaryStatistics(scored, set_.items.size() - scored.size() - not_scored,
                           judges[j].info.min_score, judges[j].info.max_score);
      s.not_scored = not_scored;
    }
  }
  for (const auto& j : judges) exportRun(j, out[j.name]);
  runs_.Increment();
  last_run_.Set(epochSeconds());
  return out;
}

void Canary::exportRun(const JudgeRunner::Handle& j, const CanaryStatistics& s) {
  prometheus::Labels l{{"judge", j.name}};
  if (!j.version.empty()) l["judge_version"] = j.version;
  const auto with = [&](const char* key, const std::string& value) {
    auto m = l;
    m[key] = value;
    return m;
  };
  verdicts_.Add(with("result", "scored")).Set(static_cast<double>(s.scored));
  verdicts_.Add(with("result", "not_scored")).Set(static_cast<double>(s.not_scored));
  verdicts_.Add(with("result", "failed")).Set(static_cast<double>(s.failed));
  const auto set = [](prometheus::Family<prometheus::Gauge>& f, const prometheus::Labels& labels,
                      std::optional<double> v) {
    if (v)
      f.Add(labels).Set(*v);
    else
      f.Remove(&f.Add(labels));
  };
  set(mean_, l, s.mean);
  Baseline* base = nullptr;
  auto& versions = baselines_[j.name];
  if (const auto it = versions.find(j.version); it != versions.end()) {
    base = &it->second;
  } else if (s.mean) {  // the version's first run with statistics: what later runs compare with
    base = &versions[j.version];
    base->at = epochSeconds();
    base->mean = s.mean;
    base->agreement = s.agreement;
    saveState();
  }
  const double width = j.info.max_score - j.info.min_score;
  set(baseline_mean_, l, base ? base->mean : std::nullopt);
  set(shift_, l,
      base && base->mean && s.mean && width > 0
          ? std::optional<double>((*s.mean - *base->mean) / width)
          : std::nullopt);
  std::string summary, moved;
  if (base && base->mean && s.mean && width > 0 && std::abs(*s.mean - *base->mean) >= 0.1 * width)
    moved =
        fmt::format("the mean moved {:+.0f} % of the scale", 100 * (*s.mean - *base->mean) / width);
  for (const char* name : kStatistics) {
    const auto now = s.agreement.find(name);
    const std::optional<double> current =
        now != s.agreement.end() ? std::optional<double>(now->second) : std::nullopt;
    std::optional<double> first;
    if (base)
      if (const auto b = base->agreement.find(name); b != base->agreement.end()) first = b->second;
    set(agreement_, with("statistic", name), current);
    set(baseline_agreement_, with("statistic", name), first);
    set(drop_, with("statistic", name),
        current && first ? std::optional<double>(*first - *current) : std::nullopt);
    if (current)
      summary += fmt::format(", {} {:.3f}{}", name, *current,
                             first ? fmt::format(" (first {:.3f})", *first) : "");
    if (current && first && *first - *current >= 0.1)
      moved +=
          fmt::format("{}{} fell by {:.3f}", moved.empty() ? "" : "; ", name, *first - *current);
  }
  if (!moved.empty())
    spdlog::warn(
        "canary: judge '{}' ({}) moved since its version's first run with the same configuration: "
        "{} (its provider changed the model behind its name?)",
        j.name, j.version.empty() ? "unversioned" : j.version, moved);
  spdlog::info(
      "canary: judge '{}' ({}): {} scored, {} it cannot judge, {} failed{}{}", j.name,
      j.version.empty() ? "unversioned" : j.version, s.scored, s.not_scored, s.failed,
      s.mean ? fmt::format(", mean {:.3f}{}", *s.mean,
                           base && base->mean ? fmt::format(" (first {:.3f})", *base->mean) : "")
             : "",
      summary);
}

void Canary::loadState() {
  if (options_.state_file.empty()) return;
  std::string text;
  if (const auto why = readRegularFile(options_.state_file, std::size_t{16} << 20, text);
      !why.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(options_.state_file, ec))
      spdlog::warn("canary: state file {} {}: the versions' first runs start again",
                   options_.state_file, why);
    return;
  }
  rapidjson::Document d;
  // Bounded first (core/json_limits.hpp): a state file nested millions deep crashed every start.
  if (const auto shape = jsonShapeProblem(text)) {
    spdlog::warn(
        "canary: state file {} is not accepted as JSON ({}): the versions' first runs "
        "start again",
        options_.state_file, shape->message());
    return;
  }
  d.Parse(text.data(), text.size());
  if (d.HasParseError() || !d.IsObject()) {
    spdlog::warn("canary: state file {} is not a JSON object: the versions' first runs start again",
                 options_.state_file);
    return;
  }
  for (const auto& judge : d.GetObject()) {
    if (!judge.value.IsObject()) continue;
    for (const auto& version : judge.value.GetObject()) {
      if (!version.value.IsObject()) continue;
      Baseline b;
      const auto& v = version.value;
      if (v.HasMember("at") && v["at"].IsNumber()) b.at = v["at"].GetDouble();
      if (v.HasMember("mean") && v["mean"].IsNumber()) b.mean = v["mean"].GetDouble();
      if (v.HasMember("agreement") && v["agreement"].IsObject())
        for (const auto& a : v["agreement"].GetObject())
          if (a.value.IsNumber()) b.agreement[a.name.GetString()] = a.value.GetDouble();
      baselines_[judge.name.GetString()][version.name.GetString()] = std::move(b);
    }
  }
}

void Canary::saveState() {
  if (options_.state_file.empty()) return;
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  for (const auto& [judge, versions] : baselines_) {
    w.Key(judge.c_str(), static_cast<rapidjson::SizeType>(judge.size()));
    w.StartObject();
    for (const auto& [version, b] : versions) {
      w.Key(version.c_str(), static_cast<rapidjson::SizeType>(version.size()));
      w.StartObject();
      w.Key("at");
      w.Double(b.at);
      if (b.mean) {
        w.Key("mean");
        w.Double(*b.mean);
      }
      w.Key("agreement");
      w.StartObject();
      for (const auto& [name, value] : b.agreement) {
        w.Key(name.c_str());
        w.Double(value);
      }
      w.EndObject();
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndObject();
  const std::string tmp = options_.state_file + ".tmp";
  std::string why;
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << buf.GetString() << "\n";
    out.flush();
    if (!out) why = fmt::format("cannot write {}: {}", tmp, errno ? std::strerror(errno) : "?");
  }
  if (why.empty()) {
    std::error_code ec;
    std::filesystem::rename(tmp, options_.state_file, ec);
    if (ec) why = fmt::format("cannot replace {}: {}", options_.state_file, ec.message());
  }
  if (why.empty()) {
    state_failing_ = false;
  } else if (!state_failing_) {  // once until it works again, not once per judge
    state_failing_ = true;
    spdlog::error("canary: {}: a restart takes new first runs", why);
  }
}

}  // namespace assay
