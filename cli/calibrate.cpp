#include "cli/calibrate.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ostream>
#include <set>
#include <sstream>

#include "cli/calibrate_table.hpp"
#include "cli/cli_text.hpp"
#include "core/json_limits.hpp"

namespace assay {

using calibrate_detail::Cell;
using calibrate_detail::Record;
using calibrate_detail::Table;

namespace {

using cli::parseDouble;
using cli::split;

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? std::string(sep) : "") + v[i];
  return out;
}

// Column names of --item / --levels: comma-separated, none empty.
std::vector<std::string> nameList(const std::string& flag, const std::string& value) {
  std::vector<std::string> names = split(value, ',');
  for (const auto& n : names)
    if (n.empty()) throw CalibrateError(fmt::format("{} '{}': an empty name", flag, value));
  return names;
}

double number(const std::string& flag, const std::string& value) {
  const auto v = parseDouble(value);
  if (!v) throw CalibrateError(flag + " '" + value + "' is not a number");
  return *v;
}

// RFC 4180; `where` prefixes the line number in the error ("line " or "FILE:").
std::vector<CsvRecord> parseCsvImpl(std::string_view text, const std::string& where) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRecord> records;
  CsvRecord rec;
  std::string field;
  bool in_quotes = false, quoted = false;
  std::size_t line = 1, quote_line = 1;
  rec.line = 1;
  auto endField = [&] {
    rec.fields.push_back(std::move(field));
    field.clear();
    quoted = false;
  };
  auto endRecord = [&] {
    endField();
    const bool blank = rec.fields.size() == 1 && rec.fields[0].empty();
    if (!blank) records.push_back(std::move(rec));
    rec = CsvRecord{};
    rec.line = line;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty() && !quoted) {
      in_quotes = quoted = true;
      quote_line = line;
    } else if (c == ',') {
      endField();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      endRecord();
    } else {
      field += c;
    }
  }
  if (in_quotes)
    throw CalibrateError(fmt::format("{}{}: quoted field not closed", where, quote_line));
  if (!field.empty() || quoted || !rec.fields.empty()) endRecord();
  return records;
}

Table csvTable(std::string_view text, const std::string& source) {
  std::vector<CsvRecord> recs = parseCsvImpl(text, source + ":");
  if (recs.empty()) throw CalibrateError(source + ": empty file (no header line)");
  Table t;
  t.header_line = recs[0].line;
  for (const auto& f : recs[0].fields) t.columns.emplace_back(trim(f));
  for (std::size_t i = 1; i < recs.size(); ++i) {
    Record r;
    r.line = recs[i].line;
    if (recs[i].fields.size() != t.columns.size()) {
      r.error =
          fmt::format("{} fields, the header has {}", recs[i].fields.size(), t.columns.size());
    } else {
      for (auto& f : recs[i].fields) r.cells.push_back(Cell{true, true, std::move(f)});
    }
    t.records.push_back(std::move(r));
  }
  return t;
}

Table jsonlTable(std::string_view text, const std::string& source) {
  Table t;
  t.csv = false;
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<std::pair<std::size_t, Cell>>> rows;
  std::size_t line = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line;
    const std::string_view content =
        trim(line == 1 && raw.substr(0, 3) == "\xEF\xBB\xBF" ? raw.substr(3) : raw);
    if (content.empty()) continue;
    Record r;
    r.line = line;
    rapidjson::Document d;
    const auto shape = jsonShapeProblem(content);
    if (!shape) d.Parse<rapidjson::kParseNumbersAsStringsFlag>(content.data(), content.size());
    std::vector<std::pair<std::size_t, Cell>> cells;
    if (shape) {
      r.error = "not JSON (" + shape->message() + ")";
    } else if (d.HasParseError()) {
      r.error = fmt::format("not JSON ({} at offset {})",
                            rapidjson::GetParseError_En(d.GetParseError()), d.GetErrorOffset());
    } else if (!d.IsObject()) {
      r.error = "not a JSON object";
    } else {
      // Indexing, not a range-for: clang in C++20 finds rapidjson's iterator != ambiguous.
      const auto members = d.MemberBegin();
      for (rapidjson::SizeType k = 0; k < d.MemberCount(); ++k) {
        const auto& m = members[k];
        const std::string name(m.name.GetString(), m.name.GetStringLength());
        const auto [it, added] = index.emplace(name, t.columns.size());
        if (added) t.columns.push_back(name);
        Cell c;
        const auto& v = m.value;
        if (v.IsNull()) {
          c.present = false;
        } else if (v.IsString()) {  // numbers too (kParseNumbersAsStringsFlag: their text)
          c.present = true;
          c.text.assign(v.GetString(), v.GetStringLength());
        } else if (v.IsBool()) {
          c.present = true;
          c.text = v.GetBool() ? "true" : "false";
        } else {
          c.present = true;
          c.scalar = false;
        }
        cells.emplace_back(it->second, std::move(c));
      }
    }
    t.records.push_back(std::move(r));
    rows.push_back(std::move(cells));
  }
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    if (!t.records[i].error.empty()) continue;
    t.records[i].cells.assign(t.columns.size(), Cell{});
    for (auto& [col, cell] : rows[i]) t.records[i].cells[col] = std::move(cell);
  }
  if (t.records.empty()) throw CalibrateError(source + ": empty file (no JSON object)");
  return t;
}

std::size_t columnIndex(const Table& t, const std::string& name, const std::string& source) {
  const auto n = std::count(t.columns.begin(), t.columns.end(), name);
  if (n == 0) {
    if (t.csv)
      throw CalibrateError(fmt::format("{}:{}: no column '{}' (the header has: {})", source,
                                       t.header_line, name, join(t.columns)));
    throw CalibrateError(
        fmt::format("{}: no object has the key '{}' (keys: {})", source, name, join(t.columns)));
  }
  if (n > 1)
    throw CalibrateError(fmt::format("{}:{}: column '{}' appears {} times in the header", source,
                                     t.header_line, name, n));
  return static_cast<std::size_t>(
      std::distance(t.columns.begin(), std::find(t.columns.begin(), t.columns.end(), name)));
}

bool hasColumn(const Table& t, const std::string& name) {
  return std::find(t.columns.begin(), t.columns.end(), name) != t.columns.end();
}

std::string scoreText(double v, const std::vector<std::string>& levels) {
  const double i = std::round(v);
  if (!levels.empty() && i == v && i >= 1 && i <= static_cast<double>(levels.size()))
    return levels[static_cast<std::size_t>(i) - 1];
  return fmt::format("{:g}", v);
}

enum class CellKind { kMissing, kScore, kBad };

struct Converted {
  CellKind kind = CellKind::kMissing;
  double value = 0;
  std::string error;
};

Converted convert(const Cell& c, const std::string& column,
                  const std::vector<std::string>& levels) {
  Converted out;
  if (!c.present) return out;
  if (!c.scalar) {
    out.kind = CellKind::kBad;
    out.error = fmt::format("column '{}': an object or array, not a score", column);
    return out;
  }
  const std::string_view s = trim(c.text);
  if (s.empty()) return out;
  if (!levels.empty()) {
    const auto it = std::find(levels.begin(), levels.end(), s);
    if (it == levels.end()) {
      out.kind = CellKind::kBad;
      out.error =
          fmt::format("column '{}': '{}' is not one of the levels ({})", column, s, join(levels));
      return out;
    }
    out.kind = CellKind::kScore;
    out.value = static_cast<double>(std::distance(levels.begin(), it) + 1);
    return out;
  }
  const auto v = parseDouble(s);
  if (!v) {
    out.kind = CellKind::kBad;
    out.error = fmt::format("column '{}': '{}' is not a number", column, s);
    return out;
  }
  out.kind = CellKind::kScore;
  out.value = *v;
  return out;
}

struct RawRow {
  std::size_t line = 0;
  std::vector<std::string> key;
  double judge = 0;
  std::vector<Annotation> humans;
};

}  // namespace

namespace {

/// The combinations the flags allow (docs/calibration.md, "From assayd's judgments file").
void checkCalibrateArgs(const CalibrateOptions& o, const std::set<std::string>& given) {
  if (!o.judge_version.empty() && o.across_versions)
    throw CalibrateError("--judge-version and --across-versions: give one (a version, or all)");
  if (o.judgments_path.empty()) {
    for (const char* flag : {"--events", "--feedback"})
      if (given.count(flag)) throw CalibrateError(std::string(flag) + " needs --judgments FILE");
    if (o.input_path.empty())
      throw CalibrateError("--input FILE is required (or --judgments FILE --judge NAME)");
  } else {
    if (!given.count("--judge"))
      throw CalibrateError("--judgments needs --judge NAME (the judge to calibrate)");
    const int sources = static_cast<int>(given.count("--events") + given.count("--feedback") +
                                         given.count("--input"));
    if (sources != 1)
      throw CalibrateError(
          "--judgments takes the human scores from one of --events FILE, --feedback FILE or "
          "--input FILE");
    if (!o.levels.empty())
      throw CalibrateError("--levels does not apply with --judgments (the scores are numbers)");
    if (o.input_path.empty())
      for (const char* flag : {"--item", "--annotator", "--format"})
        if (given.count(flag))
          throw CalibrateError(std::string(flag) + " applies to --input only (--events and " +
                               "--feedback name their own columns)");
    if (given.count("--feedback") && given.count("--human"))
      throw CalibrateError("--human does not apply with --feedback (the annotations' values)");
  }
  if (!o.levels.empty() && (o.min_score || o.max_score))
    throw CalibrateError("--min-score/--max-score do not apply with --levels (the scale is 1..k)");
  if (o.min_score && o.max_score && !(*o.min_score < *o.max_score))
    throw CalibrateError("--min-score must be below --max-score");
}

std::size_t nonNegative(const std::string& flag, const std::string& v) {
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size())
    throw CalibrateError(flag + " '" + v + "' is not a non-negative integer");
  return n;
}

}  // namespace

CalibrateOptions parseCalibrateArgs(const std::vector<std::string>& args) {
  CalibrateOptions o;
  static const std::vector<std::string> kFlags = {
      "--input",       "--format",    "--item",      "--judge",     "--human",
      "--annotator",   "--levels",    "--min-score", "--max-score", "--leniency-max-ratio",
      "--min-samples", "--judgments", "--events",    "--feedback",  "--judge-version"};
  std::set<std::string> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--across-versions") {  // the one flag without a value
      o.across_versions = true;
      continue;
    }
    if (std::find(kFlags.begin(), kFlags.end(), a) == kFlags.end())
      throw CalibrateError("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) throw CalibrateError(a + " needs a value");
    const std::string& v = args[++i];
    if (a != "--input" && v.empty()) throw CalibrateError(a + " needs a value");
    given.insert(a);
    if (a == "--input") {
      o.input_path = v;
    } else if (a == "--judgments") {
      o.judgments_path = v;
    } else if (a == "--events") {
      o.events_path = v;
    } else if (a == "--feedback") {
      o.feedback_path = v;
    } else if (a == "--judge-version") {
      o.judge_version = v;
    } else if (a == "--format") {
      if (v == "csv")
        o.format = CalibrateFormat::kCsv;
      else if (v == "jsonl")
        o.format = CalibrateFormat::kJsonl;
      else
        throw CalibrateError("--format '" + v + "': expected csv or jsonl");
    } else if (a == "--item") {
      o.item_columns = nameList(a, v);
    } else if (a == "--judge") {
      o.judge_column = v;
    } else if (a == "--human") {
      o.human_columns.push_back(v);
    } else if (a == "--annotator") {
      o.annotator_column = v;
    } else if (a == "--levels") {
      o.levels = nameList(a, v);
      std::set<std::string> distinct(o.levels.begin(), o.levels.end());
      if (o.levels.size() < 2 || distinct.size() != o.levels.size())
        throw CalibrateError("--levels '" + v + "': give at least two distinct levels");
    } else if (a == "--min-score") {
      o.min_score = number(a, v);
    } else if (a == "--max-score") {
      o.max_score = number(a, v);
    } else if (a == "--leniency-max-ratio") {
      o.leniency_max_ratio = number(a, v);
      if (!(o.leniency_max_ratio >= 0 && o.leniency_max_ratio <= 1))
        throw CalibrateError("--leniency-max-ratio must be in [0, 1]");
    } else if (a == "--min-samples") {
      o.min_samples = nonNegative(a, v);
    }
  }
  checkCalibrateArgs(o, given);
  return o;
}

std::vector<CsvRecord> parseCsv(std::string_view text) { return parseCsvImpl(text, "line "); }

namespace {

/// Where each role's column is in the table.
struct Columns {
  std::vector<std::size_t> items, humans;
  std::size_t judge = 0, annotator = 0;
};

/// Resolves the item, judge, human and annotator columns (defaults: "item", every "human*").
Columns resolveColumns(const Table& t, const CalibrateOptions& o, CalibrationData& d,
                       const std::string& source) {
  Columns c;
  d.item_columns = o.item_columns;
  if (d.item_columns.empty() && (d.long_format || hasColumn(t, "item"))) d.item_columns = {"item"};
  for (const auto& name : d.item_columns) c.items.push_back(columnIndex(t, name, source));
  c.judge = columnIndex(t, d.judge_column, source);
  if (d.long_format) c.annotator = columnIndex(t, d.annotator_column, source);
  d.human_columns = o.human_columns;
  if (d.human_columns.empty()) {
    for (const auto& name : t.columns)
      if (name.rfind("human", 0) == 0 && name != d.judge_column && name != d.annotator_column &&
          std::find(d.item_columns.begin(), d.item_columns.end(), name) == d.item_columns.end())
        d.human_columns.push_back(name);
    if (d.human_columns.empty())
      throw CalibrateError(source +
                           ": no human score column (none is named human*); give --human COL");
  }
  if (d.long_format && d.human_columns.size() != 1)
    throw CalibrateError(
        fmt::format("{}: the long format (--annotator) takes one human score column, not {} ({}); "
                    "give --human COL",
                    source, d.human_columns.size(), join(d.human_columns)));
  for (const auto& name : d.human_columns) c.humans.push_back(columnIndex(t, name, source));
  std::vector<std::size_t> used = c.items;
  used.push_back(c.judge);
  if (d.long_format) used.push_back(c.annotator);
  used.insert(used.end(), c.humans.begin(), c.humans.end());
  std::sort(used.begin(), used.end());
  const auto dup = std::adjacent_find(used.begin(), used.end());
  if (dup != used.end())
    throw CalibrateError(fmt::format(
        "column '{}' is given two roles (item, judge, human, annotator)", t.columns[*dup]));
  return c;
}

/// One record as a row of scores; nullopt with `error` set when the row is skipped.
std::optional<RawRow> rowOf(const Record& rec, const Table& t, const Columns& cols,
                            const CalibrationData& d, std::string& error) {
  RawRow row;
  row.line = rec.line;
  auto text = [&](std::size_t idx) -> std::optional<std::string> {
    const Cell& c = rec.cells[idx];
    if (!c.scalar) {
      error = fmt::format("column '{}': an object or array, not a value", t.columns[idx]);
      return std::nullopt;
    }
    const std::string_view s = c.present ? trim(c.text) : std::string_view{};
    if (s.empty()) {
      error = fmt::format("column '{}' is empty", t.columns[idx]);
      return std::nullopt;
    }
    return std::string(s);
  };
  if (cols.items.empty()) row.key.push_back(fmt::format("line {}", rec.line));
  for (std::size_t idx : cols.items) {
    auto v = text(idx);
    if (!v) return std::nullopt;
    row.key.push_back(std::move(*v));
  }
  const Converted judge = convert(rec.cells[cols.judge], d.judge_column, d.levels);
  if (judge.kind != CellKind::kScore) {
    error = judge.kind == CellKind::kBad ? judge.error
                                         : fmt::format("column '{}' is empty", d.judge_column);
    return std::nullopt;
  }
  row.judge = judge.value;
  if (d.long_format) {
    auto annotator = text(cols.annotator);
    if (!annotator) return std::nullopt;
    const Converted h = convert(rec.cells[cols.humans[0]], d.human_columns[0], d.levels);
    if (h.kind != CellKind::kScore) {
      error = h.kind == CellKind::kBad ? h.error
                                       : fmt::format("column '{}' is empty", d.human_columns[0]);
      return std::nullopt;
    }
    row.humans.push_back(Annotation{std::move(*annotator), h.value});
    return row;
  }
  for (std::size_t k = 0; k < cols.humans.size(); ++k) {
    const Converted h = convert(rec.cells[cols.humans[k]], d.human_columns[k], d.levels);
    if (h.kind == CellKind::kBad) {
      error = h.error;
      return std::nullopt;
    }
    if (h.kind == CellKind::kScore) row.humans.push_back(Annotation{d.human_columns[k], h.value});
  }
  if (row.humans.empty()) {
    error = fmt::format("no human score ({} empty)", join(d.human_columns));
    return std::nullopt;
  }
  return row;
}

/// Sets the scale (the levels', the options', else the data's range) and keeps the rows inside
/// it; the others join `skipped`.
std::vector<RawRow> inScale(std::vector<RawRow>& rows, const CalibrateOptions& o,
                            CalibrationData& d,
                            std::vector<std::pair<std::size_t, std::string>>& skipped) {
  if (!d.levels.empty()) {
    d.min_score = 1;
    d.max_score = static_cast<double>(d.levels.size());
  } else {
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (const auto& r : rows) {
      lo = std::min(lo, r.judge);
      hi = std::max(hi, r.judge);
      for (const auto& h : r.humans) lo = std::min(lo, h.score), hi = std::max(hi, h.score);
    }
    d.min_score = o.min_score.value_or(lo);
    d.max_score = o.max_score.value_or(hi);
  }
  const std::string scale = fmt::format("{:g}..{:g}", d.min_score, d.max_score);
  if (o.scale_of_judge) {
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (const auto& r : rows)
      for (const auto& h : r.humans) lo = std::min(lo, h.score), hi = std::max(hi, h.score);
    if (lo < d.min_score || hi > d.max_score)
      throw CalibrateError(fmt::format(
          "the human scores span {:g}..{:g}, the judge's scale is {}: one scale is needed. Map "
          "the labels onto the judge's (from {:g}..{:g} to {}: {:g} + (x - {:g}) x {:g}), or "
          "give the scale that holds both with --min-score and --max-score (rows outside it "
          "are then skipped)",
          lo, hi, scale, lo, hi, scale, d.min_score, lo,
          hi > lo ? (d.max_score - d.min_score) / (hi - lo) : 1.0));
  }
  std::vector<RawRow> kept;
  for (auto& r : rows) {
    std::string error;
    auto check = [&](double v, const std::string& column) {
      if (error.empty() && (v < d.min_score || v > d.max_score))
        error = fmt::format("column '{}': {:g} is outside the scale {}", column, v, scale);
    };
    check(r.judge, d.judge_column);
    for (const auto& h : r.humans) check(h.score, d.long_format ? d.human_columns[0] : h.annotator);
    if (error.empty())
      kept.push_back(std::move(r));
    else
      skipped.emplace_back(r.line, std::move(error));
  }
  return kept;
}

/// Groups the rows into items (one row per item in the wide format; one per annotator and item
/// in the long format, with the same judge score).
void buildItems(std::vector<RawRow>& rows, CalibrationData& d, const std::string& source) {
  std::map<std::vector<std::string>, std::size_t> by_key;
  std::map<std::pair<std::size_t, std::string>, std::size_t> annotation_line;
  for (auto& r : rows) {
    const std::string key = join(r.key, ",");
    const auto [it, added] = by_key.emplace(r.key, d.items.size());
    if (added) {
      d.items.push_back(CalibrationItem{key, r.line, r.judge, {}});
    } else if (!d.long_format) {
      throw CalibrateError(fmt::format(
          "{}:{}: item '{}' again (first on line {}); in the wide format the item columns ({}) "
          "must name one row per item",
          source, r.line, key, d.items[it->second].line, join(d.item_columns)));
    }
    CalibrationItem& item = d.items[it->second];
    if (d.long_format) {
      if (item.judge != r.judge)
        throw CalibrateError(fmt::format(
            "{}:{}: item '{}' has judge score '{}' here but '{}' on line {} (column '{}'); the "
            "item columns ({}) do not name one item, or the judge's scores differ",
            source, r.line, key, scoreText(r.judge, d.levels), scoreText(item.judge, d.levels),
            item.line, d.judge_column, join(d.item_columns)));
      const auto [at, fresh] =
          annotation_line.emplace(std::make_pair(it->second, r.humans[0].annotator), r.line);
      if (!fresh)
        throw CalibrateError(fmt::format(
            "{}:{}: annotator '{}' rated item '{}' again (first on line {}); the item columns "
            "({}) do not name one item",
            source, r.line, r.humans[0].annotator, key, at->second, join(d.item_columns)));
    }
    for (auto& h : r.humans) item.humans.push_back(std::move(h));
    ++d.rows_used;
  }
  if (d.long_format)
    for (auto& item : d.items)
      std::sort(item.humans.begin(), item.humans.end(),
                [](const Annotation& a, const Annotation& b) { return a.annotator < b.annotator; });
}

}  // namespace

namespace calibrate_detail {

CalibrateFormat resolveFormat(CalibrateFormat format, const std::string& path) {
  if (format != CalibrateFormat::kAuto) return format;
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson" || ext == ".json" ? CalibrateFormat::kJsonl
                                                               : CalibrateFormat::kCsv;
}

Table parseTable(std::string_view text, CalibrateFormat format, const std::string& source) {
  return format == CalibrateFormat::kCsv ? csvTable(text, source) : jsonlTable(text, source);
}

std::string readInputFile(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!std::filesystem::is_regular_file(path, ec) || !in)
    throw CalibrateError("cannot read '" + path + "' (not a readable file)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void fillFromTable(const Table& t, const CalibrateOptions& o, CalibrationData& d) {
  const std::string& source = d.source;
  d.long_format = !o.annotator_column.empty();
  d.judge_column = o.judge_column;
  d.annotator_column = o.annotator_column;
  d.levels = o.levels;
  const Columns cols = resolveColumns(t, o, d, source);
  // Every record to a row of scores, or a skip message; then the scale; then the items.
  std::vector<std::pair<std::size_t, std::string>> skipped;
  std::vector<RawRow> rows;
  for (const Record& rec : t.records) {
    ++d.rows_read;
    std::string error = rec.error;
    std::optional<RawRow> row;
    if (error.empty()) row = rowOf(rec, t, cols, d, error);
    if (row)
      rows.push_back(std::move(*row));
    else
      skipped.emplace_back(rec.line, std::move(error));
  }
  std::vector<RawRow> kept = inScale(rows, o, d, skipped);
  std::stable_sort(skipped.begin(), skipped.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [line, msg] : skipped)
    d.skipped.push_back(fmt::format("{}:{}: {}", source, line, msg));
  if (kept.empty())
    throw CalibrateError(fmt::format("{}: no usable row ({} read, {} skipped{})", source,
                                     d.rows_read, d.skipped.size(),
                                     d.skipped.empty() ? "" : "; first: " + d.skipped[0]));
  buildItems(kept, d, source);
}

}  // namespace calibrate_detail

CalibrationData parseCalibrationInput(std::string_view text, CalibrateFormat format,
                                      const CalibrateOptions& o, const std::string& source) {
  format = calibrate_detail::resolveFormat(format, o.input_path);
  const Table t = calibrate_detail::parseTable(text, format, source);
  CalibrationData d;
  d.source = source;
  d.format = format;
  calibrate_detail::fillFromTable(t, o, d);
  return d;
}

CalibrationData loadCalibrationInput(const CalibrateOptions& o) {
  if (!o.judgments_path.empty()) return calibrate_detail::loadWithJudgments(o);
  return parseCalibrationInput(calibrate_detail::readInputFile(o.input_path), o.format, o,
                               o.input_path);
}

namespace {

bool constant(const std::vector<double>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

std::string whyUndefined(const std::vector<double>& judge, const std::vector<double>& human,
                         std::size_t min_n, const char* unit) {
  if (judge.size() < min_n) return fmt::format("{} {}, fewer than {}", judge.size(), unit, min_n);
  if (constant(judge)) return "the judge gave one score only";
  if (constant(human)) return "every human score is the same";
  return "undefined";
}

CorrelationStat correlate(const std::vector<double>& judge, const std::vector<double>& human,
                          const char* unit) {
  CorrelationStat s;
  s.n = judge.size();
  s.spearman = stats::spearman(judge, human);
  if (!s.spearman) s.spearman_undefined = whyUndefined(judge, human, 3, unit);
  s.kendall_tau_b = stats::kendallTauB(judge, human);
  if (!s.kendall_tau_b) s.kendall_undefined = whyUndefined(judge, human, 2, unit);
  return s;
}

KappaStat kappaStat(const std::vector<int>& a, const std::vector<int>& b) {
  KappaStat k;
  k.n = a.size();
  for (std::size_t i = 0; i < a.size(); ++i) k.agreements += a[i] == b[i] ? 1 : 0;
  k.kappa = stats::cohenKappa(a, b);
  k.quadratic = stats::cohenKappa(a, b, stats::KappaWeights::kQuadratic);
  if (!k.kappa || !k.quadratic)
    k.undefined = k.n == 0 ? "no item rated by both" : "both gave one and the same score only";
  return k;
}

constexpr int kDistributionBins = 10;
constexpr std::size_t kMaxListedValues = 12;  ///< more distinct values (not levels): bins

ScoreDistribution distribution(const std::vector<double>& scores, const CalibrationData& d,
                               const CalibrationThresholds& t, bool binned) {
  ScoreDistribution out;
  std::map<double, std::size_t> counts;
  if (binned) {  // continuous scores: kDistributionBins equal bins, keyed by their lower bound
    out.bin_width = (d.max_score - d.min_score) / kDistributionBins;
    for (int b = 0; b < kDistributionBins; ++b) counts.emplace(d.min_score + b * out.bin_width, 0);
    for (double x : scores) {
      // × bins / range, not ÷ width: 0.7 / 0.1 is 6.999…, 0.7 × 10 / 1 is 7.000…
      const int b = std::clamp(
          static_cast<int>((x - d.min_score) * kDistributionBins / (d.max_score - d.min_score)), 0,
          kDistributionBins - 1);
      ++counts[d.min_score + b * out.bin_width];
    }
  } else {
    for (double x : scores) ++counts[x];
  }
  const bool integers =
      std::all_of(scores.begin(), scores.end(), [](double x) { return std::floor(x) == x; }) &&
      std::floor(d.min_score) == d.min_score && std::floor(d.max_score) == d.max_score;
  if (!binned && (!d.levels.empty() || (integers && d.max_score - d.min_score <= 10))) {
    for (double v = d.min_score; v <= d.max_score; v += 1) counts.emplace(v, 0);
  }
  out.counts.assign(counts.begin(), counts.end());
  // ScoreWindow bins a non-integer scale by its width: it needs max > min.
  if (!scores.empty() && (d.max_score > d.min_score || integers)) {
    stats::ScoreWindow window(scores.size(), d.min_score, d.max_score);
    for (double x : scores) window.add(x);
    out.summary = window.summary(t.leniency_max_ratio, t.min_samples);
  }
  return out;
}

}  // namespace

namespace {

/// Kappa takes categories: each score is its position among all the scores that occur (the
/// same categories, in the same order, as sklearn on the scores themselves).
using Categories = std::map<double, int>;

/// Long format: kappa of each item's first two annotations, and of every annotator pair that
/// shares at least t.min_pair_items items.
void annotatorKappaLong(const CalibrationData& d, const CalibrationThresholds& t,
                        const Categories& category, CalibrationResult& r) {
  std::vector<int> first, second;
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<int>, std::vector<int>>>
      shared;
  for (const auto& item : d.items) {
    if (item.humans.size() < 2) continue;
    first.push_back(category.at(item.humans[0].score));
    second.push_back(category.at(item.humans[1].score));
    for (std::size_t i = 0; i < item.humans.size(); ++i)
      for (std::size_t j = i + 1; j < item.humans.size(); ++j) {
        auto& p = shared[{item.humans[i].annotator, item.humans[j].annotator}];
        p.first.push_back(category.at(item.humans[i].score));
        p.second.push_back(category.at(item.humans[j].score));
      }
  }
  r.first_second = kappaStat(first, second);
  if (r.multi_annotated == 0) r.first_second.undefined = "no item has two annotations";
  std::size_t most = 0;
  for (const auto& [names, scores] : shared) {
    const std::size_t n = scores.first.size();
    if (n > most) {
      most = n;
      r.most_shared = AnnotatorPair{names.first, names.second, KappaStat{}};
      r.most_shared->kappa.n = n;
    }
    if (n >= t.min_pair_items)
      r.pairs.push_back(
          AnnotatorPair{names.first, names.second, kappaStat(scores.first, scores.second)});
  }
  std::stable_sort(r.pairs.begin(), r.pairs.end(),
                   [](const auto& a, const auto& b) { return a.kappa.n > b.kappa.n; });
  r.annotator_kappa = r.first_second.kappa;
  r.annotator_kappa_undefined = r.first_second.undefined;
}

/// Wide format: kappa of every pair of human columns, and their mean.
void annotatorKappaWide(const CalibrationData& d, const Categories& category,
                        CalibrationResult& r) {
  double sum = 0;
  std::size_t defined = 0;
  for (std::size_t i = 0; i < d.human_columns.size(); ++i)
    for (std::size_t j = i + 1; j < d.human_columns.size(); ++j) {
      std::vector<int> a, b;
      for (const auto& item : d.items) {
        const Annotation *x = nullptr, *y = nullptr;
        for (const auto& h : item.humans) {
          if (h.annotator == d.human_columns[i]) x = &h;
          if (h.annotator == d.human_columns[j]) y = &h;
        }
        if (x && y) {
          a.push_back(category.at(x->score));
          b.push_back(category.at(y->score));
        }
      }
      r.pairs.push_back(AnnotatorPair{d.human_columns[i], d.human_columns[j], kappaStat(a, b)});
      if (r.pairs.back().kappa.kappa) {
        sum += *r.pairs.back().kappa.kappa;
        ++defined;
      }
    }
  if (defined > 0)
    r.annotator_kappa = sum / static_cast<double>(defined);
  else
    r.annotator_kappa_undefined = d.human_columns.size() < 2
                                      ? "one human column only"
                                      : "no pair of human columns has a defined kappa";
}

/// The verdict in words (docs/calibration.md, "Verdict rules").
void decide(const CalibrationData& d, const CalibrationThresholds& t, CalibrationResult& r) {
  bool lenient = false, rework = false, insufficient = false;
  if (!r.judge.summary) {
    r.notes.push_back("leniency not assessed: the scale has one value only");
  } else if (r.items < t.min_samples) {
    r.notes.push_back(fmt::format("leniency not assessed: {} items, fewer than --min-samples {}",
                                  r.items, t.min_samples));
  } else if (r.judge.summary->lenient) {
    lenient = true;
    r.reasons.push_back(fmt::format(
        "too lenient: the judge gave the top score ({}) to {:.1f} % of the items, more than "
        "{:.1f} %",
        scoreText(d.max_score, d.levels), 100 * r.judge.summary->top_share,
        100 * t.leniency_max_ratio));
  }
  if (!r.annotator_kappa) {
    r.notes.push_back("annotator agreement not assessed: kappa undefined (" +
                      r.annotator_kappa_undefined + ")");
  } else if (*r.annotator_kappa < t.min_kappa) {
    rework = true;
    r.reasons.push_back(fmt::format(
        "rework the rubric: annotator kappa {:.3f} < {:.2f}; the humans themselves disagree, so "
        "the rubric is ambiguous",
        *r.annotator_kappa, t.min_kappa));
  }
  if (!r.per_item.spearman) {
    insufficient = true;
    r.reasons.push_back("insufficient data: judge-human Spearman (per item) undefined (" +
                        r.per_item.spearman_undefined + ")");
  } else {
    if (r.per_item.spearman->coefficient < t.min_spearman) {
      rework = true;
      r.reasons.push_back(fmt::format("rework the rubric: judge-human Spearman {:.3f} < {:.2f}",
                                      r.per_item.spearman->coefficient, t.min_spearman));
    }
    if (!(r.per_item.spearman->p_value < t.alpha)) {
      rework = true;
      r.reasons.push_back(fmt::format(
          "rework the rubric: judge-human Spearman p = {:.3g} >= {:.2f}; no evidence the judge "
          "follows the humans",
          r.per_item.spearman->p_value, t.alpha));
    }
  }
  if (lenient) r.verdicts.push_back("too lenient");
  if (rework) r.verdicts.push_back("rework the rubric");
  if (insufficient) r.verdicts.push_back("insufficient data");
  if (!r.verdicts.empty()) return;
  r.verdicts.push_back("usable");
  r.reasons.push_back(fmt::format(
      "usable: judge-human Spearman {:.3f} >= {:.2f} with p = {:.3g} < {:.2f}{}{}",
      r.per_item.spearman->coefficient, t.min_spearman, r.per_item.spearman->p_value, t.alpha,
      r.annotator_kappa
          ? fmt::format(", annotator kappa {:.3f} >= {:.2f}", *r.annotator_kappa, t.min_kappa)
          : "",
      r.judge.summary && r.items >= t.min_samples
          ? fmt::format(", top-score share {:.1f} % <= {:.1f} %", 100 * r.judge.summary->top_share,
                        100 * t.leniency_max_ratio)
          : ""));
}

}  // namespace

CalibrationResult computeCalibration(const CalibrationData& d, const CalibrationThresholds& t) {
  CalibrationResult r;
  r.items = d.items.size();
  std::vector<double> judge, mean_human, row_judge, row_human;
  std::set<std::string> annotators;
  std::set<double> values;
  for (const auto& item : d.items) {
    judge.push_back(item.judge);
    values.insert(item.judge);
    double sum = 0;
    for (const auto& h : item.humans) {
      sum += h.score;
      row_judge.push_back(item.judge);
      row_human.push_back(h.score);
      annotators.insert(h.annotator);
      values.insert(h.score);
    }
    mean_human.push_back(sum / static_cast<double>(item.humans.size()));
    if (item.humans.size() >= 2) ++r.multi_annotated;
  }
  r.annotations = row_human.size();
  r.annotators = d.long_format ? annotators.size() : d.human_columns.size();
  r.per_item = correlate(judge, mean_human, "items");
  r.per_annotation = correlate(row_judge, row_human, "annotations");
  Categories category;
  for (double v : values) category.emplace(v, static_cast<int>(category.size()));
  auto codes = [&](const std::vector<double>& v) {
    std::vector<int> c;
    c.reserve(v.size());
    for (double x : v) c.push_back(category.at(x));
    return c;
  };
  r.judge_human = kappaStat(codes(row_judge), codes(row_human));
  if (d.long_format)
    annotatorKappaLong(d, t, category, r);
  else
    annotatorKappaWide(d, category, r);
  // Many distinct values on a scale that is neither levels nor small integers (a lexical
  // judge's [0, 1], a claim-support fraction): equal bins instead of one row per value.
  const bool small_integers =
      std::all_of(values.begin(), values.end(), [](double v) { return std::floor(v) == v; }) &&
      d.max_score - d.min_score <= 10;
  const bool binned = d.levels.empty() && !small_integers && d.max_score > d.min_score &&
                      values.size() > kMaxListedValues;
  r.judge = distribution(judge, d, t, binned);
  r.humans = distribution(row_human, d, t, binned);
  decide(d, t, r);
  return r;
}

namespace {

std::string fixed(const std::optional<double>& v, const std::string& why, int digits = 4) {
  if (!v) return "undefined (" + why + ")";
  return fmt::format("{:.{}f}", *v, digits);
}

std::string percent(std::size_t k, std::size_t n) {
  return n == 0 ? "undefined (n = 0)"
                : fmt::format("{:.1f} % ({} of {})",
                              100.0 * static_cast<double>(k) / static_cast<double>(n), k, n);
}

void printCorrelation(const CorrelationStat& s, std::ostream& out) {
  out << fmt::format(
      "    {:<20}{}\n", "Spearman rho",
      s.spearman ? fmt::format("{:.4f}  (p = {:.3g})", s.spearman->coefficient, s.spearman->p_value)
                 : "undefined (" + s.spearman_undefined + ")");
  out << fmt::format("    {:<20}{}\n", "Kendall tau-b",
                     fixed(s.kendall_tau_b, s.kendall_undefined));
}

std::string kappaLine(const KappaStat& k) {
  if (!k.kappa || !k.quadratic)
    return fmt::format("n = {}, kappa undefined ({}), exact agreement {}", k.n, k.undefined,
                       percent(k.agreements, k.n));
  return fmt::format("n = {}, kappa {:.4f} (quadratic {:.4f}), exact agreement {}", k.n, *k.kappa,
                     *k.quadratic, percent(k.agreements, k.n));
}

}  // namespace

namespace {

void printInput(const CalibrationData& d, const CalibrationResult& r, std::ostream& out) {
  out << fmt::format("assay calibrate: {} ({}, {} format)\n", d.source,
                     d.format == CalibrateFormat::kJsonl ? "JSON Lines" : "CSV",
                     d.long_format ? "long" : "wide");
  out << fmt::format(
      "  {:<13}{}\n", "item",
      d.item_columns.empty() ? "each row (no item column)" : join(d.item_columns, ","));
  if (d.judgments_source.empty())
    out << fmt::format("  {:<13}{}\n", "judge", d.judge_column);
  else
    out << fmt::format(
        "  {:<13}{} in {} (criterion {}; version {}; {} events judged, {} scored; the last "
        "judgment of each id)\n",
        "judge", d.judge_column, d.judgments_source, d.judge_criterion, d.judge_versions, d.judged,
        d.scored);
  out << fmt::format("  {:<13}{}{}\n", "human", join(d.human_columns),
                     d.long_format ? " (annotator: " + d.annotator_column + ")" : "");
  std::string scale = fmt::format("{:g}..{:g}", d.min_score, d.max_score);
  if (!d.levels.empty()) {
    scale += ":";
    for (std::size_t i = 0; i < d.levels.size(); ++i)
      scale += fmt::format(" {}={}", d.levels[i], i + 1);
  }
  out << fmt::format("  {:<13}{}\n", "scale", scale);
  if (!d.judgments_source.empty())
    out << fmt::format(
        "  {:<13}{} rows of events the judge has no verdict for (not sampled, its "
        "rate or run_if)\n",
        "left out", d.not_judged);
  for (const auto& note : d.input_notes) out << fmt::format("  {:<13}{}\n", "", note);
  out << "\n";

  out << fmt::format("{:<15}{} read, {} used, {} skipped\n", "rows", d.rows_read, d.rows_used,
                     d.skipped.size());
  out << fmt::format("{:<15}{} ({} with two or more annotations)\n", "items", r.items,
                     r.multi_annotated);
  out << fmt::format("{:<15}{} by {} annotators\n\n", "annotations", r.annotations, r.annotators);
}

void printJudgeVsHumans(const CalibrationResult& r, std::ostream& out) {
  out << "judge vs humans\n";
  out << fmt::format(
      "  per item: the judge's score vs the mean of the item's human scores (n = {}; the "
      "verdict's)\n",
      r.per_item.n);
  printCorrelation(r.per_item, out);
  out << fmt::format("  per annotation: the judge's score vs each human score (n = {})\n",
                     r.per_annotation.n);
  printCorrelation(r.per_annotation, out);
  out << fmt::format("    {:<20}{}\n", "exact agreement",
                     percent(r.judge_human.agreements, r.judge_human.n));
  out << fmt::format(
      "    {:<20}{}\n\n", "Cohen's kappa",
      r.judge_human.kappa && r.judge_human.quadratic
          ? fmt::format("{:.4f} (quadratic {:.4f})", *r.judge_human.kappa, *r.judge_human.quadratic)
          : "undefined (" + r.judge_human.undefined + ")");
}

void printAnnotators(const CalibrationData& d, const CalibrationResult& r,
                     const CalibrationThresholds& t, std::ostream& out) {
  out << "agreement between annotators (Cohen's kappa)\n";
  if (d.long_format) {
    out << fmt::format(
        "  first vs second annotation of each item with two or more (annotators by name; the "
        "verdict's)\n    {}\n",
        kappaLine(r.first_second));
    if (r.pairs.empty()) {
      out << fmt::format("  annotator pairs sharing at least {} items: none{}\n", t.min_pair_items,
                         r.most_shared
                             ? fmt::format(" (the most: {} and {}, {} items)", r.most_shared->a,
                                           r.most_shared->b, r.most_shared->kappa.n)
                             : "");
    } else {
      out << fmt::format("  annotator pairs sharing at least {} items: {}{}\n", t.min_pair_items,
                         r.pairs.size(),
                         r.pairs.size() > t.max_pairs_listed
                             ? fmt::format(" (the {} sharing the most)", t.max_pairs_listed)
                             : "");
      for (std::size_t i = 0; i < r.pairs.size() && i < t.max_pairs_listed; ++i)
        out << fmt::format("    {} vs {}: {}\n", r.pairs[i].a, r.pairs[i].b,
                           kappaLine(r.pairs[i].kappa));
    }
  } else {
    out << fmt::format(
        "  Light's kappa (mean over the pairs of human columns; the verdict's): {}\n",
        fixed(r.annotator_kappa, r.annotator_kappa_undefined));
    for (const auto& p : r.pairs)
      out << fmt::format("    {} vs {}: {}\n", p.a, p.b, kappaLine(p.kappa));
  }
  out << "\n";
}

void printDistributions(const CalibrationData& d, const CalibrationResult& r, std::ostream& out) {
  // Distributions: one column for the judge (items), one for the humans (annotations).
  std::vector<std::string> labels;
  std::map<double, std::pair<std::size_t, std::size_t>> rows;
  for (const auto& [v, n] : r.judge.counts) rows[v].first = n;
  for (const auto& [v, n] : r.humans.counts) rows[v].second = n;
  std::size_t width = 14;
  const double bin = r.judge.bin_width;
  for (const auto& [v, n] : rows) {
    std::string label = scoreText(v, d.levels);
    if (!d.levels.empty()) label += fmt::format(" ({:g})", v);
    if (bin > 0)
      label = fmt::format("[{:.4g}, {:.4g}{}", v, v + bin, v + 1.5 * bin > d.max_score ? "]" : ")");
    width = std::max(width, label.size() + 4);
    labels.push_back(std::move(label));
  }
  auto cell = [](std::size_t k, std::size_t n) {
    return fmt::format("{:>6} {:>6.1f} %", k,
                       n ? 100.0 * static_cast<double>(k) / static_cast<double>(n) : 0.0);
  };
  out << fmt::format("{:<{}}{:>16}   {:>20}\n", "distributions", width, "judge (items)",
                     "humans (annotations)");
  std::size_t li = 0;
  for (const auto& [v, counts] : rows)
    out << fmt::format("  {:<{}}{:>16}   {:>20}\n", labels[li++], width - 2,
                       cell(counts.first, r.items), cell(counts.second, r.annotations));
  auto summaryRow = [&](const char* name, auto get) {
    auto show = [&](const ScoreDistribution& s) -> std::string {
      return s.summary ? get(*s.summary) : std::string("undefined");
    };
    out << fmt::format("  {:<{}}{:>16}   {:>20}\n", name, width - 2, show(r.judge), show(r.humans));
  };
  summaryRow("mean", [](const stats::WindowSummary& s) { return fmt::format("{:.3f}", s.mean); });
  summaryRow("top share", [](const stats::WindowSummary& s) {
    return fmt::format("{:.1f} %", 100 * s.top_share);
  });
  summaryRow("bottom share", [](const stats::WindowSummary& s) {
    return fmt::format("{:.1f} %", 100 * s.bottom_share);
  });
  summaryRow("distinct",
             [](const stats::WindowSummary& s) { return fmt::format("{}", s.distinct); });
  summaryRow("entropy",
             [](const stats::WindowSummary& s) { return fmt::format("{:.3f}", s.entropy); });
  out << "  (entropy: normalised Shannon entropy over the scale, 0 = one value, 1 = uniform)\n\n";
}

}  // namespace

void printCalibration(const CalibrationData& d, const CalibrationResult& r,
                      const CalibrationThresholds& t, std::ostream& out) {
  printInput(d, r, out);
  printJudgeVsHumans(r, out);
  printAnnotators(d, r, t, out);
  printDistributions(d, r, out);
  out << "verdict: " << join(r.verdicts) << "\n";
  for (const auto& reason : r.reasons) out << "  - " << reason << "\n";
  for (const auto& note : r.notes) out << "  - " << note << "\n";
  out << fmt::format(
      "rules (docs/calibration.md):\n"
      "  too lenient        the judge's top-score share > {:.2f}, over at least {} items\n"
      "  rework the rubric  annotator kappa < {:.2f} (Landis & Koch 1977; McHugh 2012), or\n"
      "                     judge-human Spearman per item < {:.2f} or its p >= {:.2f}\n"
      "  insufficient data  that Spearman is undefined\n"
      "  usable             none of the above\n",
      t.leniency_max_ratio, t.min_samples, t.min_kappa, t.min_spearman, t.alpha);
}

int runCalibrate(const CalibrateOptions& options, std::ostream& out, std::ostream& err) {
  try {
    const CalibrationData data = loadCalibrationInput(options);
    if (!data.skipped.empty()) {
      err << fmt::format("assay calibrate: skipped {} of {} rows{}\n", data.skipped.size(),
                         data.rows_read, data.skipped.size() > 5 ? " (the first 5)" : "");
      for (std::size_t i = 0; i < data.skipped.size() && i < 5; ++i)
        err << "  " << data.skipped[i] << "\n";
    }
    CalibrationThresholds t;
    t.leniency_max_ratio = options.leniency_max_ratio;
    t.min_samples = options.min_samples;
    printCalibration(data, computeCalibration(data, t), t, out);
    return 0;
  } catch (const CalibrateError& e) {
    err << "assay calibrate: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace assay
