// `assay calibrate --judgments FILE --judge NAME` (docs/calibration.md, "From assayd's
// judgments file"): the judge's scores from assayd's judgments file, the human scores from an
// events file (numbers at JSON Pointers), a feedback file (annotations) or a CSV / JSON Lines
// table, joined by event id. Each becomes a Table with a column for the judge, then the same rules
// as a calibration table (fillFromTable).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cli/calibrate_table.hpp"
#include "core/json_limits.hpp"
#include "core/judgment.hpp"
#include "core/log_text.hpp"

namespace assay::calibrate_detail {

namespace {

/// The judge's verdict on one event: a score, or the outcome that stood for one.
struct JudgeVerdict {
  std::optional<double> score;
  std::string outcome;
};

/// One judge's verdicts in a judgments file: the last judgment of each id (the JSON Lines sink
/// appends across runs and Kafka may redeliver), as `assay report` reads them.
struct JudgeScores {
  std::string name, criterion;
  std::optional<double> min, max;  ///< the judge's scale, from its verdicts
  std::string versions;            ///< the judge versions read, for the output
  /// Every id of the file; nullopt when its last judgment has no verdict of the judge.
  std::unordered_map<std::string, std::optional<JudgeVerdict>> by_id;

  const JudgeVerdict* find(const std::string& id) const {
    const auto it = by_id.find(id);
    return it == by_id.end() || !it->second ? nullptr : &*it->second;
  }
};

/// Calls f(line number, trimmed non-empty line) for every line of `text`.
template <typename F>
void forEachLine(std::string_view text, F&& f) {
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (number == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (!line.empty()) f(number, line);
  }
}

/// Parses one line into `d` (numbers kept as their text when `numbers_as_strings`); the reason
/// when it is not a JSON object.
std::string parseObject(std::string_view line, rapidjson::Document& d, bool numbers_as_strings) {
  if (const auto shape = jsonShapeProblem(line)) return "not JSON (" + shape->message() + ")";
  if (numbers_as_strings)
    d.Parse<rapidjson::kParseNumbersAsStringsFlag>(line.data(), line.size());
  else
    d.Parse(line.data(), line.size());
  if (d.HasParseError())
    return fmt::format("not JSON ({} at offset {})", rapidjson::GetParseError_En(d.GetParseError()),
                       d.GetErrorOffset());
  if (!d.IsObject()) return "not a JSON object";
  return {};
}

void readVerdict(const VerdictRecord& v, JudgeScores& j, JudgeVerdict& out) {
  if (j.criterion.empty()) j.criterion = v.criterion;
  if (!j.min && v.min) j.min = v.min;
  if (!j.max && v.max) j.max = v.max;
  out.score = v.score;
  out.outcome = v.outcome;
  if (!out.score && out.outcome == "ok") out.outcome = "no score";
}

/// A judge's verdicts of more than one version, unless one is chosen or they are pooled: an
/// error naming each version with its count and the fields that changed.
void checkOneVersion(
    const std::string& path, const std::string& judge,
    const std::vector<std::pair<std::string, std::size_t>>& versions,
    const std::map<std::string, std::vector<std::pair<std::string, std::string>>>& fields) {
  if (versions.size() < 2) return;
  std::string list;
  for (const auto& [v, n] : versions)
    list += fmt::format("{}{} ({} verdicts)", list.empty() ? "" : ", ",
                        v.empty() ? "unversioned" : logText(v, 40), n);
  const auto changed =
      changedFields(fields.at(versions.front().first), fields.at(versions.back().first));
  throw CalibrateError(fmt::format(
      "{}: judge '{}' has verdicts of {} versions: {}{}; a calibration is of one version: "
      "choose one with --judge-version VERSION, or pool them with --across-versions",
      path, judge, versions.size(), list,
      changed.empty() ? "" : fmt::format(" (changed: {})", fmt::join(changed, ", "))));
}

JudgeScores readJudgeScores(const std::string& path, const std::string& judge,
                            const std::string& version, bool across) {
  JudgeScores j;
  j.name = judge;
  std::set<std::string> judges;
  std::size_t lines = 0, with_verdict = 0;
  std::unordered_map<std::string, std::string> version_of;  // id → its verdict's version
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> fields;
  std::vector<std::string> order;  // versions in order of first appearance
  std::set<std::string> all_seen;  // every version of the judge in the file, for an error
  std::string all_versions;
  forEachLine(readInputFile(path), [&](std::size_t, std::string_view line) {
    ++lines;
    JudgmentRecord d;
    if (readJudgmentLine(line, d) || !d.id || !d.verdicts_array) return;
    std::optional<JudgeVerdict> mine;
    for (const auto& v : d.verdicts) {
      judges.insert(v.judge);
      if (v.judge == judge && all_seen.insert(v.version).second)
        all_versions += (all_versions.empty() ? "" : ", ") +
                        (v.version.empty() ? std::string("unversioned") : logText(v.version, 40));
      if (v.judge != judge || mine) continue;
      if (!version.empty() &&
          (version == "unversioned" ? !v.version.empty() : v.version != version))
        continue;
      mine.emplace();
      readVerdict(v, j, *mine);
      version_of[*d.id] = v.version;
      if (fields.try_emplace(v.version, v.version_fields).second) order.push_back(v.version);
    }
    if (!mine) version_of.erase(*d.id);
    j.by_id[*d.id] = std::move(mine);
  });
  if (!across) {  // the versions of the last verdict of each id, in order of first appearance
    std::map<std::string, std::size_t> count;
    for (const auto& [id, v] : version_of) ++count[v];
    std::vector<std::pair<std::string, std::size_t>> versions;
    for (const auto& v : order)
      if (count[v] > 0) versions.emplace_back(v, count[v]);
    // Verdicts written before versions existed go with the one version written since.
    if (versions.size() == 2 && (versions[0].first.empty() || versions[1].first.empty()))
      versions.erase(versions[0].first.empty() ? versions.begin() : versions.begin() + 1);
    checkOneVersion(path, judge, versions, fields);
  }
  for (const auto& v : order)
    j.versions += (j.versions.empty() ? "" : ", ") +
                  (v.empty() ? std::string("unversioned") : logText(v, 40));
  for (const auto& [id, v] : j.by_id) with_verdict += v ? 1 : 0;
  if (j.by_id.empty())
    throw CalibrateError(fmt::format(
        "{}: holds no judgment ({} non-empty lines, none a judgment object with id and verdicts)",
        path, lines));
  if (with_verdict == 0) {
    std::string names;
    for (const auto& n : judges) names += (names.empty() ? "" : ", ") + n;
    if (!version.empty() && judges.count(judge))
      throw CalibrateError(
          fmt::format("{}: no verdict of judge '{}' of version {} (its versions: {})", path, judge,
                      version, all_versions.empty() ? "none" : all_versions));
    throw CalibrateError(fmt::format("{}: no verdict of judge '{}' in {} judgments (judges: {})",
                                     path, judge, j.by_id.size(), names));
  }
  return j;
}

/// A JSON value as a table cell (numbers parsed as strings keep their text).
Cell cellOf(const rapidjson::Value* v) {
  Cell c;
  if (!v || v->IsNull()) return c;
  c.present = true;
  if (v->IsString())
    c.text.assign(v->GetString(), v->GetStringLength());
  else if (v->IsBool())
    c.text = v->GetBool() ? "true" : "false";
  else
    c.scalar = false;
  return c;
}

/// The judge's cell of the row of event `id`, or the row's error when the judge did not score
/// it; false when the judge has no verdict for the id (the row is left out).
bool addJudgeCell(const JudgeScores& j, const std::string& id, Record& r, CalibrationData& d) {
  const JudgeVerdict* v = j.find(id);
  if (!v) {
    ++d.not_judged;
    return false;
  }
  if (!v->score)
    r.error = fmt::format("judge '{}' has no score for id '{}' ({})", j.name, id, v->outcome);
  else
    r.cells.push_back(Cell{true, true, fmt::format("{}", *v->score)});
  return true;
}

/// One JSON Lines record that must be an object with a string "id": false with `r.error` set
/// otherwise (`r.line` is set either way).
bool parseWithId(std::size_t number, std::string_view line, rapidjson::Document& doc, Record& r) {
  r.line = number;
  r.error = parseObject(line, doc, true);
  if (r.error.empty() && !(doc.HasMember("id") && doc["id"].IsString()))
    r.error = "no string \"id\"";
  return r.error.empty();
}

/// Events: one row per event the judge has a verdict for; columns id, the judge, each pointer.
Table eventsTable(const std::string& path, const JudgeScores& j,
                  const std::vector<std::string>& pointers, CalibrationData& d) {
  Table t;
  t.csv = false;
  t.columns = {"id", j.name};
  t.columns.insert(t.columns.end(), pointers.begin(), pointers.end());
  std::vector<rapidjson::Pointer> ptrs;
  ptrs.reserve(pointers.size());
  for (const auto& p : pointers) ptrs.emplace_back(p.c_str());
  forEachLine(readInputFile(path), [&](std::size_t number, std::string_view line) {
    Record r;
    rapidjson::Document doc;
    if (!parseWithId(number, line, doc, r)) return t.records.push_back(std::move(r));
    const std::string id = doc["id"].GetString();
    r.cells.push_back(Cell{true, true, id});
    if (!addJudgeCell(j, id, r, d)) return;
    if (r.error.empty())
      for (const auto& p : ptrs) r.cells.push_back(cellOf(p.Get(doc)));
    t.records.push_back(std::move(r));
  });
  return t;
}

/// Feedback: one row per annotation of the judge's criterion on an event it has a verdict for;
/// columns id, the judge, annotator, annotation. Ratings and other criteria are left out.
Table feedbackTable(const std::string& path, const JudgeScores& j, CalibrationData& d) {
  Table t;
  t.csv = false;
  t.columns = {"id", j.name, "annotator", "value"};
  std::map<std::pair<std::string, std::string>, std::size_t> first_line;
  std::size_t other = 0;
  forEachLine(readInputFile(path), [&](std::size_t number, std::string_view line) {
    Record r;
    rapidjson::Document doc;
    if (!parseWithId(number, line, doc, r)) return t.records.push_back(std::move(r));
    const auto text = [&](const char* key) {
      return doc.HasMember(key) && doc[key].IsString() ? std::string(doc[key].GetString())
                                                       : std::string();
    };
    if (text("kind") != "annotation" || text("criterion") != j.criterion) return void(++other);
    const std::string id = text("id");
    const std::string annotator = text("annotator").empty() ? "unknown" : text("annotator");
    r.cells.push_back(Cell{true, true, id});
    if (!addJudgeCell(j, id, r, d)) return;
    const auto [at, fresh] = first_line.emplace(std::make_pair(id, annotator), number);
    if (!fresh)
      r.error = fmt::format("annotator '{}' annotated id '{}' again (first on line {}; kept)",
                            annotator, id, at->second);
    if (r.error.empty()) {
      r.cells.push_back(Cell{true, true, annotator});
      r.cells.push_back(cellOf(doc.HasMember("value") ? &doc["value"] : nullptr));
    }
    t.records.push_back(std::move(r));
  });
  if (other > 0)
    d.input_notes.push_back(fmt::format(
        "{} feedback lines left out: ratings, or annotations of another criterion than {}", other,
        j.criterion));
  return t;
}

/// A CSV or JSON Lines table of human scores whose item column holds the event id; the judge's
/// column is added from the judgments.
Table inputTable(const CalibrateOptions& o, const JudgeScores& j, CalibrationData& d) {
  Table t = parseTable(readInputFile(o.input_path), d.format, o.input_path);
  const std::string& id_column = o.item_columns.at(0);
  const auto id_it = std::find(t.columns.begin(), t.columns.end(), id_column);
  if (id_it == t.columns.end())
    throw CalibrateError(
        fmt::format("{}: no column '{}' (the event id; --item names it)", o.input_path, id_column));
  if (std::find(t.columns.begin(), t.columns.end(), j.name) != t.columns.end())
    throw CalibrateError(
        fmt::format("{}: has a column '{}' already; the judge's scores come from the judgments",
                    o.input_path, j.name));
  const auto id_index = static_cast<std::size_t>(std::distance(t.columns.begin(), id_it));
  t.columns.push_back(j.name);
  std::vector<Record> kept;
  for (auto& r : t.records) {
    if (r.error.empty() && r.cells[id_index].present && r.cells[id_index].scalar &&
        !r.cells[id_index].text.empty()) {
      std::string id = r.cells[id_index].text;
      id.erase(0, id.find_first_not_of(" \t"));
      id.erase(id.find_last_not_of(" \t") + 1);
      if (!addJudgeCell(j, id, r, d)) continue;
    } else if (r.error.empty()) {
      r.cells.emplace_back();  // the empty id is the row's error (fillFromTable)
    }
    kept.push_back(std::move(r));
  }
  t.records = std::move(kept);
  return t;
}

}  // namespace

CalibrationData loadWithJudgments(const CalibrateOptions& o) {
  const JudgeScores j =
      readJudgeScores(o.judgments_path, o.judge_column, o.judge_version, o.across_versions);
  CalibrationData d;
  d.judgments_source = o.judgments_path;
  d.judge_versions = j.versions;
  d.judge_criterion = j.criterion;
  for (const auto& [id, v] : j.by_id) {
    d.judged += v ? 1 : 0;
    d.scored += v && v->score ? 1 : 0;
  }
  CalibrateOptions p = o;  // the table's columns
  p.scale_of_judge = !o.min_score || !o.max_score;
  if (!p.min_score) p.min_score = j.min;
  if (!p.max_score) p.max_score = j.max;
  if (p.min_score && p.max_score && !(*p.min_score < *p.max_score))
    throw CalibrateError(fmt::format("the scale {:g}..{:g} is empty (judge '{}' scores {}..{})",
                                     *p.min_score, *p.max_score, j.name,
                                     j.min ? fmt::format("{:g}", *j.min) : "?",
                                     j.max ? fmt::format("{:g}", *j.max) : "?"));
  Table t;
  if (!o.events_path.empty()) {
    if (p.human_columns.empty()) p.human_columns = {"/labels/" + j.criterion};
    for (const auto& h : p.human_columns)
      if (h.empty() || h.front() != '/' || !rapidjson::Pointer(h.c_str()).IsValid())
        throw CalibrateError("--human '" + h +
                             "' is not a JSON Pointer (e.g. /labels/faithfulness)");
    p.item_columns = {"id"};
    d.source = o.events_path;
    d.format = CalibrateFormat::kJsonl;
    t = eventsTable(o.events_path, j, p.human_columns, d);
  } else if (!o.feedback_path.empty()) {
    p.item_columns = {"id"};
    p.annotator_column = "annotator";
    p.human_columns = {"value"};
    d.source = o.feedback_path;
    d.format = CalibrateFormat::kJsonl;
    t = feedbackTable(o.feedback_path, j, d);
  } else {
    if (p.item_columns.empty()) p.item_columns = {"id"};
    if (p.item_columns.size() != 1)
      throw CalibrateError("--item names one column with --judgments: the event id");
    d.source = o.input_path;
    d.format = resolveFormat(o.format, o.input_path);
    t = inputTable(p, j, d);
  }
  if (t.records.empty())
    throw CalibrateError(fmt::format(
        "{}: no row of an event judge '{}' has a verdict for ({} left out; the judgments hold "
        "{} ids)",
        d.source, j.name, d.not_judged, j.by_id.size()));
  fillFromTable(t, p, d);
  return d;
}

}  // namespace assay::calibrate_detail
