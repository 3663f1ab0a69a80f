#include "sinks/tracker.hpp"

#include <doctest/doctest.h>
#include <prometheus/text_serializer.h>

#include <sstream>

using namespace assay;

namespace {
std::string text(prometheus::Registry& r) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, r.Collect());
  return out.str();
}
}  // namespace

TEST_CASE("leniency and drift gauges appear once defined, with the right values") {
  prometheus::Registry reg;
  TrackingOptions o;
  o.window = 500;
  o.min_samples = 100;
  o.baseline_window = 100;
  o.recent_window = 50;
  ScoreTracker t({{"faith_llm", "faithfulness", 1, 4}, {"overlap", "faithfulness", 0, 1}}, o, reg);
  t.refresh();
  CHECK(text(reg).find("assay_judge_max_score_ratio{") == std::string::npos);  // nothing yet

  for (int i = 0; i < 99; ++i) t.record(0, 4);
  t.refresh();
  std::string s = text(reg);
  CHECK(s.find("assay_judge_max_score_ratio{criterion=\"faithfulness\",judge=\"faith_llm\"} 1") !=
        std::string::npos);
  CHECK(s.find("assay_judge_lenient{") == std::string::npos);  // 99 < min_samples
  t.record(0, 7.5e30);                                         // rejected, not counted
  t.record(0, 4);
  t.refresh();
  s = text(reg);
  CHECK(s.find("assay_judge_lenient{criterion=\"faithfulness\",judge=\"faith_llm\"} 1") !=
        std::string::npos);
  CHECK(s.find("assay_score_drift{") == std::string::npos);  // recent window not full
  for (int i = 0; i < 50; ++i) t.record(0, i % 2 ? 2 : 1);
  t.refresh();
  s = text(reg);
  CHECK(s.find("assay_score_drift{criterion=\"faithfulness\",judge=\"faith_llm\"} 1") !=
        std::string::npos);
  CHECK(s.find("assay_score_baseline_mean{criterion=\"faithfulness\",judge=\"faith_llm\"} 4") !=
        std::string::npos);
  CHECK(s.find("judge=\"overlap\"") == std::string::npos);  // no score from it: absent, not 0
  CHECK(s.find("NaN") == std::string::npos);
}
