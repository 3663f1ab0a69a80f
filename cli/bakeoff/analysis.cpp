#include "cli/bakeoff/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "tracking/stats.hpp"

namespace assay::bakeoff {
namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

/// The arm with the highest value, nullopt on a tie for first place.
std::optional<std::size_t> uniqueMax(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  const auto top = std::max_element(v.begin(), v.end());
  if (std::count(v.begin(), v.end(), *top) > 1) return std::nullopt;
  return static_cast<std::size_t>(top - v.begin());
}

struct Mean {
  double sum = 0;
  std::size_t n = 0;
  void add(double v) { sum += v, ++n; }
  std::optional<double> value() const {
    return n ? std::optional(sum / static_cast<double>(n)) : std::nullopt;
  }
};

void checkCall(const Call& c, std::size_t arms, std::size_t inputs, std::size_t judges,
               std::size_t criteria) {
  bool ok =
      c.judge < judges && c.input < inputs && c.order.size() == arms && c.scores.size() == arms;
  for (const auto& s : c.scores) ok = ok && s.size() == criteria;
  if (!ok) throw std::invalid_argument("bakeoff::analyze: a call's sizes disagree with the setup");
}

}  // namespace

std::vector<Criterion> defaultCriteria() {
  return {{"relevance", "answers the question that was asked", 30},
          {"completeness", "covers every part of the question", 25},
          {"clarity", "easy to read and to follow", 20},
          {"accuracy", "correct, and supported by the given context where there is one", 15},
          {"format", "follows the requested format and length", 10}};
}

std::string criteriaProblem(const std::vector<Criterion>& criteria) {
  if (criteria.empty()) return "at least one criterion is needed";
  if (criteria.size() > kMaxCriteria)
    return "at most " + std::to_string(kMaxCriteria) + " criteria, not " +
           std::to_string(criteria.size());
  double sum = 0;
  std::string terms;
  for (std::size_t i = 0; i < criteria.size(); ++i) {
    const auto& c = criteria[i];
    if (c.name.empty()) return "criterion " + std::to_string(i + 1) + " has no name";
    for (std::size_t j = 0; j < i; ++j)
      if (criteria[j].name == c.name) return "criterion '" + c.name + "' is listed twice";
    if (!(c.weight > 0 && c.weight <= 100))
      return "criterion '" + c.name + "': weight " + number(c.weight) + " is not in (0, 100]";
    sum += c.weight;
    terms += (terms.empty() ? "" : " + ") + c.name + " " + number(c.weight);
  }
  if (std::abs(sum - 100) > 1e-9) return "weights must sum to 100: " + terms + " = " + number(sum);
  return "";
}

std::string sizeProblem(std::size_t arms, std::size_t inputs, std::size_t judges,
                        std::size_t passes) {
  if (arms < kMinArms || arms > kMaxArms)
    return std::to_string(arms) + " arms: a bakeoff compares 2 to 8";
  if (inputs < 1 || inputs > kMaxInputs)
    return std::to_string(inputs) + " inputs: a bakeoff takes 1 to 10";
  if (arms * inputs > kMaxCells)
    return std::to_string(arms) + " arms × " + std::to_string(inputs) +
           " inputs = " + std::to_string(arms * inputs) + " cells: at most 40";
  if (judges < kMinJudges || judges > kMaxJudges)
    return std::to_string(judges) + " judges: a bakeoff uses 2 or 3";
  if (passes < 1 || passes > 2) return "passes: 1, or 2 (the second with the order reversed)";
  return "";
}

std::string label(std::size_t position) {
  return std::string(1, static_cast<char>('A' + position));
}

std::vector<std::size_t> randomOrder(std::size_t arms, std::mt19937_64& rng) {
  std::vector<std::size_t> order(arms);
  for (std::size_t i = 0; i < arms; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<std::size_t> reversed(std::vector<std::size_t> order) {
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<std::vector<double>> mapBack(const std::vector<std::size_t>& order,
                                         const std::vector<std::vector<double>>& label_scores) {
  if (label_scores.size() != order.size())
    throw std::invalid_argument("bakeoff::mapBack: one score set per label");
  std::vector<std::vector<double>> out(order.size());
  for (std::size_t position = 0; position < order.size(); ++position) {
    if (order[position] >= order.size() || !out[order[position]].empty())
      throw std::invalid_argument("bakeoff::mapBack: the order is not a permutation");
    out[order[position]] = label_scores[position];
  }
  return out;
}

double weightedScore(const std::vector<double>& scores, const std::vector<Criterion>& criteria) {
  double s = 0;
  for (std::size_t c = 0; c < criteria.size() && c < scores.size(); ++c)
    s += criteria[c].weight * scores[c] / 100.0;
  return s;
}

Level levelOf(double tau) {
  if (tau >= 0.7) return Level::kHigh;
  if (tau >= 0.4) return Level::kModerate;
  return Level::kLow;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kHigh:
      return "high";
    case Level::kModerate:
      return "moderate";
    case Level::kLow:
      return "low";
  }
  return "low";
}

namespace {

/// The calls sorted out: weighted scores per judge, input and arm (averaged over passes), each
/// call's single first place, and the position audit's counts.
struct Collected {
  std::vector<std::vector<std::vector<Mean>>> by_judge;                     // [judge][input][arm]
  std::vector<std::vector<std::vector<std::optional<std::size_t>>>> first;  // [judge][input][pass]
};

Collected collect(std::size_t arms, std::size_t inputs, std::size_t judges,
                  const std::vector<Criterion>& criteria, const std::vector<Call>& calls,
                  Analysis& a) {
  Collected c{std::vector<std::vector<std::vector<Mean>>>(
                  judges, std::vector<std::vector<Mean>>(inputs, std::vector<Mean>(arms))),
              std::vector<std::vector<std::vector<std::optional<std::size_t>>>>(
                  judges, std::vector<std::vector<std::optional<std::size_t>>>(inputs))};
  a.audit.resize(judges);
  for (std::size_t j = 0; j < judges; ++j) a.audit[j].judge = j;
  for (const auto& call : calls) {
    checkCall(call, arms, inputs, judges, criteria.size());
    std::vector<double> weighted(arms);
    for (std::size_t arm = 0; arm < arms; ++arm) {
      weighted[arm] = weightedScore(call.scores[arm], criteria);
      c.by_judge[call.judge][call.input][arm].add(weighted[arm]);
    }
    const auto top = uniqueMax(weighted);
    auto& passes = c.first[call.judge][call.input];
    if (passes.size() <= call.pass) passes.resize(call.pass + 1);
    passes[call.pass] = top;
    if (!top) continue;
    auto& audit = a.audit[call.judge];
    ++audit.calls;
    if (*top == call.order.front()) ++audit.first_shown;
  }
  for (auto& audit : a.audit) {
    if (audit.calls == 0) continue;
    audit.share = static_cast<double>(audit.first_shown) / static_cast<double>(audit.calls);
    audit.p_value = stats::binomialTestTwoSided(audit.first_shown, audit.calls,
                                                1.0 / static_cast<double>(arms));
    audit.flagged = audit.p_value < 0.05;
  }
  std::vector<bool> noisy(inputs, false);
  for (std::size_t j = 0; j < judges; ++j)
    for (std::size_t i = 0; i < inputs; ++i) {
      const auto& passes = c.first[j][i];
      if (passes.size() == 2 && passes[0] != passes[1]) {
        ++a.audit[j].flips;
        noisy[i] = true;
      }
    }
  a.inputs_with_position_noise =
      static_cast<std::size_t>(std::count(noisy.begin(), noisy.end(), true));
  return c;
}

/// Consensus per input and arm (the mean over judges), wins, each arm's mean and interval over
/// the inputs, and whether every two arms' intervals overlap.
/// The consensus of the judges `use` selects.
void consensus(std::size_t arms, std::size_t inputs, const Collected& c,
               const std::vector<bool>& use, Analysis& a) {
  a.consensus.assign(inputs, std::vector<double>(arms, 0.0));
  a.judged.assign(inputs, false);
  a.arms.resize(arms);
  std::vector<std::vector<double>> per_arm(arms);  // consensus over the inputs judged
  for (std::size_t i = 0; i < inputs; ++i) {
    bool judged = true;
    for (std::size_t arm = 0; arm < arms; ++arm) {
      Mean m;
      for (std::size_t j = 0; j < c.by_judge.size(); ++j)
        if (use[j])
          if (const auto v = c.by_judge[j][i][arm].value()) m.add(*v);
      judged = judged && m.n > 0;
      a.consensus[i][arm] = m.value().value_or(0.0);
    }
    if (!judged) continue;
    a.judged[i] = true;
    for (std::size_t arm = 0; arm < arms; ++arm) per_arm[arm].push_back(a.consensus[i][arm]);
    const double top = *std::max_element(a.consensus[i].begin(), a.consensus[i].end());
    const auto at_top = std::count(a.consensus[i].begin(), a.consensus[i].end(), top);
    for (std::size_t arm = 0; arm < arms; ++arm)
      if (a.consensus[i][arm] == top) ++(at_top == 1 ? a.arms[arm].wins : a.arms[arm].ties);
  }
  a.student_t = true;
  for (std::size_t arm = 0; arm < arms; ++arm) {
    const auto& v = per_arm[arm];
    if (v.empty()) continue;
    double s = 0;
    for (double x : v) s += x;
    a.arms[arm].mean = s / static_cast<double>(v.size());
    if (const auto ci = stats::meanInterval95(v, 0.0, 100.0)) {
      a.arms[arm].low = ci->low;
      a.arms[arm].high = ci->high;
    }
  }
  for (std::size_t x = 0; x < arms; ++x)
    for (std::size_t y = x + 1; y < arms; ++y) {
      const auto& p = a.arms[x];
      const auto& q = a.arms[y];
      // Without intervals (one input) nothing tells the two apart.
      const bool overlap = !p.low || !q.low || (*p.low <= *q.high && *q.low <= *p.high);
      a.differences.push_back({x, y, overlap});
    }
}

/// Every two judges: per input (their scores of the arms), then overall (their mean scores of
/// the arms over the inputs).
void agreement(std::size_t arms, std::size_t inputs, const Collected& c, Analysis& a) {
  const auto scoresOf = [&](std::size_t j, std::optional<std::size_t> input) {
    std::vector<double> v(arms, 0.0);
    for (std::size_t arm = 0; arm < arms; ++arm) {
      Mean m;
      for (std::size_t i = 0; i < inputs; ++i)
        if (!input || *input == i)
          if (const auto s = c.by_judge[j][i][arm].value()) m.add(*s);
      v[arm] = m.value().value_or(0.0);
    }
    return v;
  };
  const std::size_t judges = c.by_judge.size();
  for (std::size_t ja = 0; ja < judges; ++ja)
    for (std::size_t jb = ja + 1; jb < judges; ++jb)
      for (std::size_t i = 0; i <= inputs; ++i) {
        const std::optional<std::size_t> input =
            i < inputs ? std::optional<std::size_t>(i) : std::nullopt;
        const auto x = scoresOf(ja, input), y = scoresOf(jb, input);
        PairAgreement pa{ja, jb, input, stats::kendallTauB(x, y), std::nullopt, std::nullopt};
        pa.spearman_rho = stats::spearmanRho(x, y);  // defined over 2 arms, as Kendall's tau
        if (pa.kendall_tau_b) pa.level = levelOf(*pa.kendall_tau_b);
        a.agreement.push_back(pa);
      }
}

}  // namespace

Analysis analyze(std::size_t arms, std::size_t inputs, std::size_t judges,
                 const std::vector<Criterion>& criteria, const std::vector<Call>& calls,
                 bool exclude_biased) {
  Analysis a;
  const Collected c = collect(arms, inputs, judges, criteria, calls, a);
  std::vector<bool> all(judges, true), unflagged(judges, true);
  for (const auto& au : a.audit) unflagged[au.judge] = !au.flagged;
  const bool any_flagged = std::find(unflagged.begin(), unflagged.end(), false) != unflagged.end();
  const bool any_left = std::find(unflagged.begin(), unflagged.end(), true) != unflagged.end();
  const bool exclude = exclude_biased && any_flagged && any_left;
  consensus(arms, inputs, c, exclude ? unflagged : all, a);
  if (exclude)
    for (std::size_t j = 0; j < judges; ++j)
      if (!unflagged[j]) a.excluded.push_back(j);
  if (any_flagged && any_left) {  // the other view, beside the main one
    Analysis other;
    consensus(arms, inputs, c, exclude ? all : unflagged, other);
    a.arms_other_view = std::move(other.arms);
  }
  agreement(arms, inputs, c, a);
  return a;
}

}  // namespace assay::bakeoff
