#include "judges/date_check.hpp"

#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include <cstdio>
#include <vector>

#include "core/json_limits.hpp"
#include "core/log_text.hpp"

namespace assay {
namespace {

constexpr OptionSpec kDateOptions[] = {
    {"pointer", OptionType::kString,
     "JSON Pointer (RFC 6901) to the date in a JSON answer; default: every date in the text"},
    {"day_first", OptionType::kBool,
     "DD/MM/YYYY (true, default) or MM/DD/YYYY (false) for the numeric forms", true, "true"},
    {"min", OptionType::kString, "earliest date allowed, YYYY-MM-DD (inclusive)"},
    {"max", OptionType::kString, "latest date allowed, YYYY-MM-DD (inclusive)"},
};

constexpr Outcome kDateOutcomes[] = {Outcome::kNotApplicable};

/// Dates found in `text`, a date is kept with the bytes it was written in. At most 1,000: a
/// longer list adds nothing to the verdict (the first bad one decides it).
struct Found {
  CalendarDate date;
  std::string_view written;
};

bool digit(char c) { return c >= '0' && c <= '9'; }
bool alnum(char c) { return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// The run of digits at `at` (its length), at most `max` digits counted.
std::size_t digits(std::string_view s, std::size_t at) {
  std::size_t n = 0;
  while (at + n < s.size() && digit(s[at + n])) ++n;
  return n;
}

int number(std::string_view s, std::size_t at, std::size_t n) {
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) v = v * 10 + (s[at + i] - '0');
  return v;
}

/// Linear: each position is looked at a bounded number of times.
std::vector<Found> findDates(std::string_view s, bool day_first) {
  std::vector<Found> out;
  for (std::size_t i = 0; i < s.size() && out.size() < 1000;) {
    if (!digit(s[i]) || (i > 0 && alnum(s[i - 1]))) {
      ++i;
      continue;
    }
    const std::size_t n1 = digits(s, i);
    const std::size_t sep1 = i + n1;
    const auto next_group = [&](std::size_t at, std::size_t lo, std::size_t hi) -> std::size_t {
      const std::size_t n = at < s.size() ? digits(s, at) : 0;
      return n >= lo && n <= hi ? n : 0;
    };
    bool matched = false;
    if (sep1 < s.size() && (s[sep1] == '-' || s[sep1] == '/' || s[sep1] == '.')) {
      const char sep = s[sep1];
      const std::size_t n2 = next_group(sep1 + 1, 1, 2);
      const std::size_t sep2 = sep1 + 1 + n2;
      if (n2 > 0 && sep2 < s.size() && s[sep2] == sep) {
        const bool iso = n1 == 4 && sep != '.';
        const std::size_t n3 = next_group(sep2 + 1, iso ? 1 : 4, iso ? 2 : 4);
        const std::size_t end = sep2 + 1 + n3;
        // A time may follow an ISO date ("2026-12-04T10:30:00Z").
        const bool whole =
            n3 > 0 && (end >= s.size() || !alnum(s[end]) ||
                       (iso && s[end] == 'T' && end + 1 < s.size() && digit(s[end + 1])));
        if (whole && (iso || (n1 >= 1 && n1 <= 2))) {
          CalendarDate d;
          if (iso) {
            d = {number(s, i, 4), number(s, sep1 + 1, n2), number(s, sep2 + 1, n3)};
          } else {
            const int a = number(s, i, n1), b = number(s, sep1 + 1, n2);
            d = {number(s, sep2 + 1, 4), day_first ? b : a, day_first ? a : b};
          }
          out.push_back({d, s.substr(i, end - i)});
          i = end;
          matched = true;
        }
      }
    }
    if (!matched) i += n1;  // the whole digit run: it starts no date
  }
  return out;
}

std::string isoText(const CalendarDate& d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", d.year, d.month, d.day);
  return buf;
}

std::optional<CalendarDate> boundOption(const JudgeOptionValues& v, const char* key) {
  const std::string text = v.getString(key, "");
  if (text.empty()) return std::nullopt;
  const auto d = parseIsoDate(text);
  if (!d || !realDate(*d))
    throw OptionError(key,
                      "expected a real date written YYYY-MM-DD, got '" + logText(text, 40) + "'");
  return d;
}

}  // namespace

bool realDate(const CalendarDate& d) {
  if (d.month < 1 || d.month > 12 || d.day < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (d.year % 4 == 0 && d.year % 100 != 0) || d.year % 400 == 0;
  return d.day <= kDays[d.month - 1] + (d.month == 2 && leap ? 1 : 0);
}

std::optional<CalendarDate> parseIsoDate(std::string_view t) {
  if (t.size() != 10 || t[4] != '-' || t[7] != '-') return std::nullopt;
  for (const std::size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!digit(t[i])) return std::nullopt;
  return CalendarDate{number(t, 0, 4), number(t, 5, 2), number(t, 8, 2)};
}

const JudgeDescriptor DateValidJudge::kDescriptor{
    "date_valid",
    JudgeKind::kCheck,
    "valid_date",
    0.0,
    1.0,
    kPassFailBuckets,
    kDateOptions,
    CostClass::kCpuMicroseconds,
    "the dates in the answer (or at a JSON Pointer) are real calendar dates, within [min, max]",
    kDateOutcomes};

std::unique_ptr<Judge> DateValidJudge::create(const JudgeOptionValues& values) {
  DateCheckOptions o;
  o.pointer = values.getString("pointer", "");
  if (!o.pointer.empty() && (o.pointer.front() != '/' ||
                             !rapidjson::Pointer(o.pointer.c_str(), o.pointer.size()).IsValid()))
    throw OptionError("pointer", "expected a JSON Pointer such as /answer/date (RFC 6901)");
  o.day_first = values.getBool("day_first", true);
  o.min = boundOption(values, "min");
  o.max = boundOption(values, "max");
  if (o.min && o.max && *o.max < *o.min)
    throw OptionError("max", "is before min (" + isoText(*o.min) + ")");
  return std::make_unique<DateValidJudge>(std::move(o));
}

std::string DateValidJudge::problem(const CalendarDate& d, std::string_view written) const {
  const std::string shown = "'" + logText(written, 40) + "'";
  if (!realDate(d)) return shown + " is not a calendar date";
  if (options_.min && d < *options_.min) return shown + " is before min " + isoText(*options_.min);
  if (options_.max && *options_.max < d) return shown + " is after max " + isoText(*options_.max);
  return "";
}

Verdict DateValidJudge::judge(const Event& e) const {
  std::string_view text = e.answer;
  std::string value;  // the pointer's string
  if (!options_.pointer.empty()) {
    if (const auto shape = jsonShapeProblem(e.answer))
      return Verdict::check(false, "not accepted as JSON: " + shape->message());
    rapidjson::Document d;
    d.Parse(e.answer.data(), e.answer.size());
    if (d.HasParseError()) return Verdict::check(false, "the answer is not JSON");
    const auto* at = rapidjson::Pointer(options_.pointer.c_str(), options_.pointer.size()).Get(d);
    if (at == nullptr) return Verdict::check(false, "no value at " + logText(options_.pointer, 80));
    if (!at->IsString())
      return Verdict::check(false,
                            "the value at " + logText(options_.pointer, 80) + " is not a string");
    value.assign(at->GetString(), at->GetStringLength());
    text = value;
  }
  const auto found = findDates(text, options_.day_first);
  if (!options_.pointer.empty()) {
    // One date, at the start, with at most a time after it ("2026-12-04T10:00:00Z").
    const bool one = found.size() == 1 && found[0].written.data() == text.data() &&
                     (found[0].written.size() == text.size() ||
                      text[found[0].written.size()] == 'T' || text[found[0].written.size()] == ' ');
    if (!one)
      return Verdict::check(false, "the value at " + logText(options_.pointer, 80) +
                                       " is not one date ('" + logText(text, 40) + "')");
  } else if (found.empty()) {
    Verdict v = Verdict::fail(Outcome::kNotApplicable);
    v.evidence = "no date in the answer";
    return v;
  }
  for (const auto& f : found)
    if (auto why = problem(f.date, f.written); !why.empty()) return Verdict::check(false, why);
  return Verdict::check(
      true, found.size() == 1 ? "1 date, real" : std::to_string(found.size()) + " dates, all real");
}

}  // namespace assay
