#pragma once
/// `check: date_valid`: the dates an answer gives are real calendar dates, optionally within a
/// range (docs/configuration.md, "Judges"). Pass/fail, in microseconds (linear in the answer).
///
/// Dates read: ISO 8601 calendar dates `YYYY-MM-DD` (also `YYYY/MM/DD`, and with a time after
/// a `T` or a space), and the numeric forms `DD/MM/YYYY`, `DD.MM.YYYY`, `DD-MM-YYYY`, day first
/// unless `day_first: false` (then month first, `MM/DD/YYYY`). A date is real when its month is
/// 1..12 and its day exists in that month (the Gregorian calendar's leap years: divisible by 4,
/// not by 100 unless by 400). With `pointer` (RFC 6901) the answer is a JSON document and the
/// string at that pointer must be one date.
///
/// Verdicts: passed when every date found is real (and within [min, max] when given), with the
/// count in the evidence; failed naming the first that is not ("2024-02-30 is not a calendar
/// date", "2031-05-01 is after max 2030-12-31"); not_applicable when the answer holds no date
/// (without `pointer`); failed when the answer is not JSON, has no value at the pointer, or
/// that value is not a string holding one date.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "judges/judge.hpp"

namespace assay {

/// A calendar date (proleptic Gregorian), compared as (year, month, day).
struct CalendarDate {
  int year = 0, month = 0, day = 0;
  bool operator==(const CalendarDate&) const = default;
  bool operator<(const CalendarDate& o) const {
    return std::tie(year, month, day) < std::tie(o.year, o.month, o.day);
  }
};

/// Whether `d` exists: month 1..12, day 1..the month's length (February 29 in leap years).
bool realDate(const CalendarDate& d);

/// `text` as a whole ISO date "YYYY-MM-DD" (nullopt otherwise; the date may not be real).
std::optional<CalendarDate> parseIsoDate(std::string_view text);

struct DateCheckOptions {
  std::string pointer;                   ///< "" = dates anywhere in the answer's text
  bool day_first = true;                 ///< DD/MM/YYYY (true) or MM/DD/YYYY (false)
  std::optional<CalendarDate> min, max;  ///< inclusive bounds
};

class DateValidJudge final : public Judge {
 public:
  static const JudgeDescriptor kDescriptor;
  /// Throws OptionError naming `pointer` (not an RFC 6901 pointer), `min`/`max` (not a real
  /// ISO date "YYYY-MM-DD") or `max` (before min).
  static std::unique_ptr<Judge> create(const JudgeOptionValues& values);
  explicit DateValidJudge(DateCheckOptions o) : options_(std::move(o)) {}
  Verdict judge(const Event& event) const override;

 private:
  /// "" when `d` passes, else why not.
  std::string problem(const CalendarDate& d, std::string_view written) const;
  DateCheckOptions options_;
};

}  // namespace assay
