#include "cli/bakeoff/report.hpp"

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace assay::bakeoff {
namespace {

std::string fixed(double v, int digits = 1) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

std::string money(double v) { return fixed(v, v < 1 ? 4 : 2); }

std::string interval(const ArmSummary& a) {
  return a.low ? "[" + fixed(*a.low) + ", " + fixed(*a.high) + "]" : "(one input: none)";
}

std::string judgeModels(const BakeoffConfig& c) {
  std::string s;
  for (std::size_t j = 0; j < c.judges.size(); ++j)
    s += (j ? ", " : "") + c.judges[j].name + " (" + c.judges[j].at.model + ")";
  return s;
}

std::size_t judgedInputs(const ReportInput& in) { return in.result.analysis.inputsJudged(); }

/// The ids of the inputs left out: an arm without output, or no judge that scored every arm.
std::string unjudged(const ReportInput& in) {
  std::string ids;
  for (std::size_t i = 0; i < in.config.inputs.size(); ++i)
    if (!in.result.analysis.judged[i]) ids += (ids.empty() ? "" : ", ") + in.config.inputs[i].id;
  return ids;
}

std::string plural(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string intervalNote(const ReportInput& in) {
  const auto n = judgedInputs(in);
  if (n < 2) return plural(n, "input", "inputs") + " judged: no interval.";
  return "95 % intervals over the " + std::to_string(n) + " inputs judged: Student's t with " +
         plural(n - 1, "degree", "degrees") + " of freedom" +
         (n < 30 ? " (with so few inputs the large-sample 1.96 would be too narrow)" : "") +
         ", cut to the 0–100 scale.";
}

const PairAgreement* overall(const Analysis& a, std::size_t x, std::size_t y) {
  for (const auto& p : a.agreement)
    if (p.judge_a == x && p.judge_b == y && !p.input) return &p;
  return nullptr;
}

std::string opt(const std::optional<double>& v, int digits = 3) {
  return v ? fixed(*v, digits) : "n/a";
}

/// The ranking of arms by mean, best first.
std::vector<std::size_t> ranking(const Analysis& a) {
  std::vector<std::size_t> order(a.arms.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return a.arms[x].mean > a.arms[y].mean; });
  return order;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  return out;
}

}  // namespace

std::vector<std::vector<double>> criterionMeans(const ReportInput& in) {
  const auto arms = in.config.arms.size(), criteria = in.config.criteria.size();
  std::vector<std::vector<double>> sum(arms, std::vector<double>(criteria, 0.0));
  std::vector<std::size_t> n(arms, 0);
  for (const auto& call : in.result.calls)
    for (std::size_t a = 0; a < arms; ++a) {
      for (std::size_t c = 0; c < criteria; ++c) sum[a][c] += call.scores[a][c];
      ++n[a];
    }
  for (std::size_t a = 0; a < arms; ++a)
    for (auto& v : sum[a]) v = n[a] ? v / static_cast<double>(n[a]) : 0.0;
  return sum;
}

/// With a judge the position audit flags: the consensus the other way (without it, or with it
/// under exclude_biased), one line under the consensus table; "" otherwise.
std::string otherView(const ReportInput& in) {
  const auto& c = in.config;
  const auto& a = in.result.analysis;
  if (a.arms_other_view.empty()) return "";
  std::ostringstream md;
  std::string flagged;
  for (const auto& au : a.audit)
    if (au.flagged) flagged += (flagged.empty() ? "" : ", ") + c.judges[au.judge].name;
  md << "**Position bias** (" << flagged << ", see the position audit): "
     << (a.excluded.empty() ? "the consensus above includes it; without it: "
                            : "left out of the consensus above (exclude_biased); with it: ");
  for (std::size_t arm = 0; arm < c.arms.size(); ++arm)
    md << (arm ? ", " : "") << c.arms[arm].name << " " << fixed(a.arms_other_view[arm].mean) << " "
       << interval(a.arms_other_view[arm]);
  md << ".\n\n";
  return md.str();
}

std::string markdownReport(const ReportInput& in) {
  const auto& c = in.config;
  const auto& r = in.result;
  const auto& a = r.analysis;
  std::ostringstream md;
  md << "# Bakeoff: " << c.name << "\n\n"
     << c.arms.size() << " arms × " << plural(c.inputs.size(), "input", "inputs") << ", "
     << c.judges.size() << " judges (" << judgeModels(c) << "), " << c.passes
     << (c.passes == 1 ? " pass" : " passes") << ", seed " << in.seed << ". Spent €" << money(r.eur)
     << " ($" << money(r.usd) << ") in " << r.records.size() << " calls (estimated €"
     << money(in.estimate.eur) << ").\n";
  if (r.judge_failures || r.generation_failures)
    md << "\n**Failed calls: " << r.generation_failures << " generations, " << r.judge_failures
       << " judge calls** (left out; the JSON report lists their errors).\n";
  if (judgedInputs(in) < c.inputs.size())
    md << "\n**Inputs not judged** (an arm had no output, or no judge scored every arm): "
       << unjudged(in) << ".\n";
  if (judgedInputs(in) == 0) {
    md << "\nNo input was judged: no result.\n";
    return md.str();
  }
  md << "\n## Consensus\n\n| rank | arm | mean (0–100) | 95 % interval | wins | ties |\n"
     << "|---|---|---|---|---|---|\n";
  std::size_t rank = 1;
  for (const auto arm : ranking(a))
    md << "| " << rank++ << " | " << c.arms[arm].name << " | " << fixed(a.arms[arm].mean) << " | "
       << interval(a.arms[arm]) << " | " << a.arms[arm].wins << " | " << a.arms[arm].ties << " |\n";
  md << "\nThe mean of each arm's weighted score (criteria weights), averaged over judges"
     << (c.passes == 2 ? " and passes" : "") << ". " << intervalNote(in) << "\n\n";
  md << otherView(in);
  for (const auto& d : a.differences)
    md << "- " << c.arms[d.arm_a].name << " vs " << c.arms[d.arm_b].name << ": "
       << (d.overlap ? "no significant difference (the intervals overlap)"
                     : (a.arms[d.arm_a].mean > a.arms[d.arm_b].mean ? c.arms[d.arm_a].name
                                                                    : c.arms[d.arm_b].name) +
                           std::string(" is better (the intervals do not overlap)"))
       << "\n";
  md << "\n## Per criterion (mean over judges and inputs)\n\n| arm |";
  for (const auto& cr : c.criteria) md << " " << cr.name << " (" << cr.weight << ") |";
  md << "\n|---|";
  for (std::size_t i = 0; i < c.criteria.size(); ++i) md << "---|";
  md << "\n";
  const auto means = criterionMeans(in);
  for (std::size_t arm = 0; arm < c.arms.size(); ++arm) {
    md << "| " << c.arms[arm].name << " |";
    for (double v : means[arm]) md << " " << fixed(v) << " |";
    md << "\n";
  }
  md << "\n## Agreement between judges\n\n| judges | Kendall tau-b | Spearman rho | level |\n"
     << "|---|---|---|---|\n";
  for (std::size_t x = 0; x < c.judges.size(); ++x)
    for (std::size_t y = x + 1; y < c.judges.size(); ++y)
      if (const auto* p = overall(a, x, y))
        md << "| " << c.judges[x].name << " – " << c.judges[y].name << " (overall) | "
           << opt(p->kendall_tau_b) << " | " << opt(p->spearman_rho) << " | "
           << (p->level ? levelName(*p->level) : "n/a") << " |\n";
  md << "\nPer input (the arms as each judge ranked them): ";
  std::size_t high = 0, moderate = 0, low = 0, none = 0;
  for (const auto& p : a.agreement) {
    if (!p.input) continue;
    if (!p.level)
      ++none;
    else
      ++(*p.level == Level::kHigh ? high : *p.level == Level::kModerate ? moderate : low);
  }
  md << high << " high, " << moderate << " moderate, " << low << " low"
     << (none ? ", " + std::to_string(none) + " n/a (a judge tied every arm, or did not answer)"
              : "")
     << " (high: tau-b ≥ 0.7, moderate ≥ 0.4).\n";
  md << "\n## Position audit\n\n| judge | single first places | won by the output shown first | "
        "share (healthy ≈ "
     << fixed(1.0 / static_cast<double>(c.arms.size()), 2) << ") | p (exact binomial) | flag |"
     << (c.passes == 2 ? " flips over 2 passes |" : "") << "\n|---|---|---|---|---|---|"
     << (c.passes == 2 ? "---|" : "") << "\n";
  for (const auto& au : a.audit) {
    md << "| " << c.judges[au.judge].name << " | " << au.calls << " | " << au.first_shown << " | "
       << (au.calls ? fixed(au.share, 2) : "n/a") << " | "
       << (au.calls ? fixed(au.p_value, 4) : "n/a") << " | "
       << (au.flagged ? "**position bias**"
           : au.calls ? "ok"
                      : "no single first place")
       << " |";
    if (c.passes == 2) md << " " << au.flips << " |";
    md << "\n";
  }
  if (c.passes == 2)
    md << "\nA flip is an input whose first place changed when the order was reversed: position "
          "noise, not signal. Inputs with a flip for some judge: "
       << a.inputs_with_position_noise << " of " << judgedInputs(in) << ".\n";
  return md.str();
}

namespace {

/// The JSON report's writer: one method per section.
class JsonReport {
 public:
  explicit JsonReport(const ReportInput& in) : in_(in), w_(buf_) {}

  std::string write() {
    const auto& c = in_.config;
    w_.StartObject();
    w_.Key("name");
    s(c.name);
    w_.Key("seed");
    w_.Uint64(in_.seed);
    w_.Key("passes");
    w_.Int(c.passes);
    criteria();
    money();
    arms();
    agreement();
    audit();
    consensus();
    calls();
    w_.EndObject();
    return std::string(buf_.GetString(), buf_.GetSize()) + "\n";
  }

 private:
  void s(const std::string& v) { w_.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size())); }
  void optional(const std::optional<double>& v) {
    if (v)
      w_.Double(*v);
    else
      w_.Null();
  }

  void criteria() {
    w_.Key("criteria");
    w_.StartArray();
    for (const auto& cr : in_.config.criteria) {
      w_.StartObject();
      w_.Key("name");
      s(cr.name);
      w_.Key("description");
      s(cr.description);
      w_.Key("weight");
      w_.Double(cr.weight);
      w_.EndObject();
    }
    w_.EndArray();
  }

  void money() {
    const auto& r = in_.result;
    w_.Key("estimate");
    w_.StartObject();
    w_.Key("calls");
    w_.Uint64(in_.estimate.calls);
    w_.Key("usd");
    w_.Double(in_.estimate.usd);
    w_.Key("eur");
    w_.Double(in_.estimate.eur);
    w_.EndObject();
    w_.Key("spent");
    w_.StartObject();
    w_.Key("usd");
    w_.Double(r.usd);
    w_.Key("eur");
    w_.Double(r.eur);
    w_.Key("calls");
    w_.Uint64(r.records.size());
    w_.Key("failed_generations");
    w_.Uint64(r.generation_failures);
    w_.Key("failed_judge_calls");
    w_.Uint64(r.judge_failures);
    w_.EndObject();
  }

  void arms() {
    const auto& c = in_.config;
    const auto& a = in_.result.analysis;
    const auto means = criterionMeans(in_);
    w_.Key("arms");
    w_.StartArray();
    for (std::size_t arm = 0; arm < c.arms.size(); ++arm) {
      const auto& sum = a.arms[arm];
      w_.StartObject();
      w_.Key("name");
      s(c.arms[arm].name);
      w_.Key("kind");
      s(!c.arms[arm].live() ? "recorded" : c.arms[arm].steps.size() == 1 ? "live" : "workflow");
      w_.Key("mean");
      w_.Double(sum.mean);
      w_.Key("ci95_low");
      optional(sum.low);
      w_.Key("ci95_high");
      optional(sum.high);
      w_.Key("wins");
      w_.Uint64(sum.wins);
      w_.Key("ties");
      w_.Uint64(sum.ties);
      w_.Key("criteria");
      w_.StartObject();
      for (std::size_t k = 0; k < c.criteria.size(); ++k) {
        w_.Key(c.criteria[k].name.c_str());
        w_.Double(means[arm][k]);
      }
      w_.EndObject();
      w_.Key("outputs");
      w_.StartArray();
      for (const auto& o : in_.result.outputs[arm])
        if (o)
          s(*o);
        else
          w_.Null();
      w_.EndArray();
      w_.EndObject();
    }
    w_.EndArray();
    w_.Key("differences");
    w_.StartArray();
    for (const auto& d : a.differences) {
      w_.StartObject();
      w_.Key("a");
      s(c.arms[d.arm_a].name);
      w_.Key("b");
      s(c.arms[d.arm_b].name);
      w_.Key("no_significant_difference");
      w_.Bool(d.overlap);
      w_.EndObject();
    }
    w_.EndArray();
  }

  void agreement() {
    const auto& c = in_.config;
    w_.Key("agreement");
    w_.StartArray();
    for (const auto& p : in_.result.analysis.agreement) {
      w_.StartObject();
      w_.Key("judges");
      w_.StartArray();
      s(c.judges[p.judge_a].name);
      s(c.judges[p.judge_b].name);
      w_.EndArray();
      w_.Key("input");
      if (p.input)
        s(c.inputs[*p.input].id);
      else
        w_.Null();
      w_.Key("kendall_tau_b");
      optional(p.kendall_tau_b);
      w_.Key("spearman_rho");
      optional(p.spearman_rho);
      w_.Key("level");
      if (p.level)
        s(levelName(*p.level));
      else
        w_.Null();
      w_.EndObject();
    }
    w_.EndArray();
  }

  void audit() {
    w_.Key("position_audit");
    w_.StartArray();
    for (const auto& au : in_.result.analysis.audit) {
      w_.StartObject();
      w_.Key("judge");
      s(in_.config.judges[au.judge].name);
      w_.Key("calls");
      w_.Uint64(au.calls);
      w_.Key("first_shown_won");
      w_.Uint64(au.first_shown);
      w_.Key("share");
      w_.Double(au.share);
      w_.Key("p_value");
      w_.Double(au.p_value);
      w_.Key("flagged");
      w_.Bool(au.flagged);
      w_.Key("flips");
      w_.Uint64(au.flips);
      w_.EndObject();
    }
    w_.EndArray();
  }

  void consensus() {
    const auto& c = in_.config;
    const auto& a = in_.result.analysis;
    w_.Key("excluded_judges");  // exclude_biased: the flagged judges left out of the consensus
    w_.StartArray();
    for (const auto j : a.excluded) s(c.judges[j].name);
    w_.EndArray();
    w_.Key("consensus_other_view");  // with a flagged judge: the arms' means the other way
    if (a.arms_other_view.empty()) {
      w_.Null();
    } else {
      w_.StartObject();
      for (std::size_t arm = 0; arm < c.arms.size(); ++arm) {
        w_.Key(c.arms[arm].name.c_str());
        w_.Double(a.arms_other_view[arm].mean);
      }
      w_.EndObject();
    }
    w_.Key("consensus");
    w_.StartArray();
    for (std::size_t i = 0; i < a.consensus.size(); ++i) {
      w_.StartObject();
      w_.Key("input");
      s(c.inputs[i].id);
      w_.Key("scores");
      if (!a.judged[i]) {  // not judged: no score, never a 0
        w_.Null();
        w_.EndObject();
        continue;
      }
      w_.StartObject();
      for (std::size_t arm = 0; arm < c.arms.size(); ++arm) {
        w_.Key(c.arms[arm].name.c_str());
        w_.Double(a.consensus[i][arm]);
      }
      w_.EndObject();
      w_.EndObject();
    }
    w_.EndArray();
  }

  void calls() {
    w_.Key("calls");
    w_.StartArray();
    for (const auto& rec : in_.result.records) {
      w_.StartObject();
      w_.Key("role");
      s(rec.role);
      w_.Key("who");
      s(rec.who);
      w_.Key("model");
      s(rec.model);
      w_.Key("input");
      s(rec.input_id);
      if (rec.role == "judge") {
        w_.Key("pass");
        w_.Int(rec.pass);
        w_.Key("order");
        w_.StartArray();
        for (const auto arm : rec.order) s(in_.config.arms[arm].name);
        w_.EndArray();
      }
      if (!rec.scores.empty()) {  // by arm, then criterion: every statistic can be redone
        w_.Key("scores");
        w_.StartObject();
        for (std::size_t arm = 0; arm < rec.scores.size(); ++arm) {
          w_.Key(in_.config.arms[arm].name.c_str());
          w_.StartObject();
          for (std::size_t k = 0; k < rec.scores[arm].size(); ++k) {
            w_.Key(in_.config.criteria[k].name.c_str());
            w_.Double(rec.scores[arm][k]);
          }
          w_.EndObject();
        }
        w_.EndObject();
      }
      w_.Key("ok");
      w_.Bool(rec.ok);
      if (!rec.ok) {
        w_.Key("error");
        s(rec.error);
      }
      w_.Key("prompt_tokens");
      w_.Int64(rec.prompt_tokens);
      w_.Key("completion_tokens");
      w_.Int64(rec.completion_tokens);
      w_.Key("eur");
      w_.Double(rec.eur);
      w_.Key("seconds");
      w_.Double(rec.seconds);
      w_.Key("attempts");
      w_.Int(rec.attempts);
      w_.EndObject();
    }
    w_.EndArray();
  }

  const ReportInput& in_;
  rapidjson::StringBuffer buf_;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w_;
};

}  // namespace

std::string jsonReport(const ReportInput& in) { return JsonReport(in).write(); }

namespace {

/// The arms' means and intervals on a 0–100 axis, best first, as an inline SVG.
std::string intervalChart(const ReportInput& in) {
  const auto& a = in.result.analysis;
  const int left = 170, width = 480, row = 34, top = 30;
  const auto order = ranking(a);
  const int height = top + row * static_cast<int>(order.size()) + 30;
  const auto x = [&](double v) { return left + v / 100.0 * width; };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 40 << "\" height=\""
      << height << "\" role=\"img\" aria-label=\"arms' 95 % intervals\">\n";
  for (int t = 0; t <= 100; t += 20)
    svg << "<line x1=\"" << x(t) << "\" y1=\"" << top - 10 << "\" x2=\"" << x(t) << "\" y2=\""
        << height - 25 << "\" stroke=\"#ddd\"/><text x=\"" << x(t) << "\" y=\"" << height - 8
        << "\" text-anchor=\"middle\" font-size=\"12\">" << t << "</text>\n";
  int y = top;
  for (const auto arm : order) {
    const auto& s = a.arms[arm];
    svg << "<text x=\"" << left - 10 << "\" y=\"" << y + 5
        << "\" text-anchor=\"end\" font-size=\"14\">" << escape(in.config.arms[arm].name)
        << "</text>\n";
    if (s.low)
      svg << "<line class=\"ci\" x1=\"" << x(*s.low) << "\" y1=\"" << y << "\" x2=\"" << x(*s.high)
          << "\" y2=\"" << y << "\" stroke=\"#1f6fb2\" stroke-width=\"6\""
          << " stroke-linecap=\"round\"/>\n";
    svg << "<circle cx=\"" << x(s.mean) << "\" cy=\"" << y
        << "\" r=\"7\" fill=\"#d1495b\"/><text x=\"" << x(s.mean) << "\" y=\"" << y - 11
        << "\" text-anchor=\"middle\" font-size=\"12\">" << fixed(s.mean) << "</text>\n";
    y += row;
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace

std::string htmlReport(const ReportInput& in) {
  const auto& c = in.config;
  const auto& r = in.result;
  const auto& a = r.analysis;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>Bakeoff: " << escape(c.name) << "</title>\n<style>"
    << "body{font-family:sans-serif;margin:2em;max-width:60em;color:#222}"
    << "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 10px;"
    << "text-align:left}th{background:#f3f3f3}.flag{color:#b00;font-weight:bold}"
    << ".ok{color:#070}.note{color:#555;font-size:90%}</style></head><body>\n"
    << "<h1>Bakeoff: " << escape(c.name) << "</h1>\n<p>" << c.arms.size() << " arms × "
    << plural(c.inputs.size(), "input", "inputs") << ", " << c.judges.size() << " judges ("
    << escape(judgeModels(c)) << "), " << c.passes << (c.passes == 1 ? " pass" : " passes")
    << ", seed " << in.seed << ". Spent €" << money(r.eur) << " in " << r.records.size()
    << " calls (estimated €" << money(in.estimate.eur) << ").</p>\n";
  if (r.judge_failures || r.generation_failures)
    h << "<p class=\"flag\">Failed calls: " << r.generation_failures << " generations, "
      << r.judge_failures << " judge calls (left out; the JSON report lists their errors).</p>\n";
  if (judgedInputs(in) < c.inputs.size())
    h << "<p class=\"flag\">Inputs not judged: " << escape(unjudged(in)) << ".</p>\n";
  h << "<h2>Consensus</h2>\n"
    << intervalChart(in) << "\n<p class=\"note\">" << escape(intervalNote(in))
    << "</p>\n<table><tr><th>arm</th><th>mean</th>"
    << "<th>95 % interval</th><th>wins</th><th>ties</th></tr>\n";
  for (const auto arm : ranking(a))
    h << "<tr><td>" << escape(c.arms[arm].name) << "</td><td>" << fixed(a.arms[arm].mean)
      << "</td><td>" << interval(a.arms[arm]) << "</td><td>" << a.arms[arm].wins << "</td><td>"
      << a.arms[arm].ties << "</td></tr>\n";
  h << "</table>\n<ul>\n";
  for (const auto& d : a.differences)
    h << "<li>" << escape(c.arms[d.arm_a].name) << " vs " << escape(c.arms[d.arm_b].name) << ": "
      << (d.overlap
              ? "no significant difference (the intervals overlap)"
              : escape(
                    c.arms[a.arms[d.arm_a].mean > a.arms[d.arm_b].mean ? d.arm_a : d.arm_b].name) +
                    " is better (the intervals do not overlap)")
      << "</li>\n";
  h << "</ul>\n<h2>Per criterion</h2>\n<table><tr><th>arm</th>";
  for (const auto& cr : c.criteria) h << "<th>" << escape(cr.name) << " (" << cr.weight << ")</th>";
  h << "</tr>\n";
  const auto means = criterionMeans(in);
  for (std::size_t arm = 0; arm < c.arms.size(); ++arm) {
    h << "<tr><td>" << escape(c.arms[arm].name) << "</td>";
    for (double v : means[arm]) h << "<td>" << fixed(v) << "</td>";
    h << "</tr>\n";
  }
  h << "</table>\n<h2>Agreement between judges</h2>\n<table><tr><th>judges</th>"
    << "<th>Kendall tau-b</th><th>Spearman rho</th><th>level</th></tr>\n";
  for (const auto& p : a.agreement)
    if (!p.input)
      h << "<tr><td>" << escape(c.judges[p.judge_a].name) << " – "
        << escape(c.judges[p.judge_b].name) << "</td><td>" << opt(p.kendall_tau_b) << "</td><td>"
        << opt(p.spearman_rho) << "</td><td>" << (p.level ? levelName(*p.level) : "n/a")
        << "</td></tr>\n";
  h << "</table>\n<h2>Position audit</h2>\n<table><tr><th>judge</th><th>single first places</th>"
    << "<th>won by the output shown first</th><th>share (healthy ≈ "
    << fixed(1.0 / static_cast<double>(c.arms.size()), 2)
    << ")</th><th>p (exact binomial)</th><th>verdict</th><th>flips</th></tr>\n";
  for (const auto& au : a.audit)
    h << "<tr><td>" << escape(c.judges[au.judge].name) << "</td><td>" << au.calls << "</td><td>"
      << au.first_shown << "</td><td>" << fixed(au.share, 2) << "</td><td>" << fixed(au.p_value, 4)
      << "</td><td class=\"" << (au.flagged ? "flag" : "ok") << "\">"
      << (au.flagged ? "position bias" : "ok") << "</td><td>" << au.flips << "</td></tr>\n";
  h << "</table>\n</body></html>\n";
  return h.str();
}

}  // namespace assay::bakeoff
