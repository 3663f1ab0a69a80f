// check: date_valid (issue 29): the dates an answer gives are real calendar dates, within a
// range when one is configured; in a JSON answer, the date at a JSON Pointer.
#include "judges/date_check.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace assay;

namespace {

Verdict run(const JudgeOptionValues& values, const std::string& answer,
            AnswerFormat format = AnswerFormat::kText) {
  Event e;
  e.id = "d";
  e.question = "When?";
  e.answer = answer;
  e.expected_format = format;
  return DateValidJudge::create(values)->judge(e);
}

JudgeOptionValues opts(std::initializer_list<std::pair<const std::string, OptionValue>> kv) {
  JudgeOptionValues v;
  for (const auto& [k, value] : kv) v.set(k, value);
  return v;
}

}  // namespace

TEST_CASE("real calendar dates: month lengths and Gregorian leap years") {
  CHECK(realDate({2024, 2, 29}));  // divisible by 4
  CHECK_FALSE(realDate({2023, 2, 29}));
  CHECK_FALSE(realDate({1900, 2, 29}));  // by 100, not by 400
  CHECK(realDate({2000, 2, 29}));        // by 400
  CHECK_FALSE(realDate({2024, 4, 31}));
  CHECK(realDate({2024, 12, 31}));
  CHECK_FALSE(realDate({2024, 13, 1}));
  CHECK_FALSE(realDate({2024, 0, 10}));
  CHECK_FALSE(realDate({2024, 5, 0}));
  CHECK(parseIsoDate("2026-12-04") == CalendarDate{2026, 12, 4});
  CHECK_FALSE(parseIsoDate("2026-1-04").has_value());
  CHECK_FALSE(parseIsoDate("2026-12-04T").has_value());
}

TEST_CASE("date_valid in a text answer: every date, in the forms people write") {
  const JudgeOptionValues none;
  auto v = run(none, "The warranty started on 2024-02-29 and ends 28/02/2026.");
  CHECK(v.outcome == Outcome::kOk);
  CHECK(v.passed == true);
  CHECK(v.evidence == "2 dates, all real");
  v = run(none, "Valid until 2024-02-30.");
  CHECK(v.passed == false);
  CHECK(v.evidence == "'2024-02-30' is not a calendar date");
  v = run(none, "Shipped 31.04.2025, delivered 2025-05-02.");
  CHECK(v.passed == false);
  CHECK(v.evidence == "'31.04.2025' is not a calendar date");
  // Day first by default; month first on request.
  CHECK(run(none, "Due 13/01/2026.").passed == true);
  CHECK(run(opts({{"day_first", false}}), "Due 13/01/2026.").passed == false);
  CHECK(run(opts({{"day_first", false}}), "Due 01/13/2026.").passed == true);
  // No date at all: the check does not apply.
  v = run(none, "Two years, from the day of purchase.");
  CHECK(v.outcome == Outcome::kNotApplicable);
  CHECK(v.evidence == "no date in the answer");
  // Parts of longer numbers and codes are not dates.
  CHECK(run(none, "Order 12024-02-30 and version 1.2.3.").outcome == Outcome::kNotApplicable);
  CHECK(run(none, "Call at 2026-12-04T10:30:00Z.").passed == true);
}

TEST_CASE("date_valid within [min, max]") {
  const auto range = opts({{"min", std::string("2020-01-01")}, {"max", std::string("2030-12-31")}});
  CHECK(run(range, "From 2020-01-01 to 2030-12-31.").passed == true);
  auto v = run(range, "Until 2031-05-01.");
  CHECK(v.passed == false);
  CHECK(v.evidence == "'2031-05-01' is after max 2030-12-31");
  v = run(range, "Since 31/12/2019.");
  CHECK(v.evidence == "'31/12/2019' is before min 2020-01-01");
}

TEST_CASE("date_valid at a JSON Pointer of a JSON answer") {
  const auto at = opts({{"pointer", std::string("/order/delivery")}});
  CHECK(run(at, R"({"order": {"delivery": "2026-02-28"}})", AnswerFormat::kJson).passed == true);
  CHECK(run(at, R"({"order": {"delivery": "2026-02-28T09:00:00+01:00"}})").passed == true);
  auto v = run(at, R"({"order": {"delivery": "2026-02-29"}})");
  CHECK(v.evidence == "'2026-02-29' is not a calendar date");
  v = run(at, R"({"order": {}})");
  CHECK(v.passed == false);
  CHECK(v.evidence == "no value at /order/delivery");
  v = run(at, R"({"order": {"delivery": 20260228}})");
  CHECK(v.evidence == "the value at /order/delivery is not a string");
  v = run(at, R"({"order": {"delivery": "soon, 2026-02-28"}})");
  CHECK(v.evidence.find("is not one date") != std::string::npos);
  v = run(at, "not json");
  CHECK(v.evidence == "the answer is not JSON");
}

TEST_CASE("date_valid options are checked at load") {
  const auto key = [](const JudgeOptionValues& v) {
    try {
      (void)DateValidJudge::create(v);
    } catch (const OptionError& e) {
      return e.key;
    }
    return std::string();
  };
  CHECK(key(opts({{"pointer", std::string("order/delivery")}})) == "pointer");
  CHECK(key(opts({{"min", std::string("2024-02-30")}})) == "min");
  CHECK(key(opts({{"max", std::string("31/12/2030")}})) == "max");
  CHECK(key(opts({{"min", std::string("2030-01-01")}, {"max", std::string("2020-01-01")}})) ==
        "max");
  CHECK(key(opts({{"min", std::string("2020-01-01")}})).empty());
}
