// claim_support's learned combination (judges/claim_support_model.hpp): the C++ scores equal
// the Python model's (scripts/train_claim_support) on dev events; a weights file that is
// missing, truncated, of another version or with a non-finite number is refused whole.
#include "judges/claim_support_model.hpp"

#include <doctest/doctest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "judges/claim_support.hpp"
#include "tests/test_paths.hpp"

namespace assay {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Event eventOf(const rapidjson::Value& d) {
  Event e;
  e.id = d["id"].GetString();
  e.question = d["question"].GetString();
  e.answer = d["answer"].GetString();
  for (const auto& c : d["contexts"].GetArray())
    e.contexts.push_back(Context{c["id"].GetString(), c["text"].GetString(), ""});
  return e;
}

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("assay_claim_model_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = (path / name).string();
    std::ofstream(p) << text;
    return p;
  }
};

std::unique_ptr<Judge> create(const std::map<std::string, std::string>& options) {
  JudgeOptionValues v;
  for (const auto& [key, value] : options) v.set(key, value);
  return ClaimSupportJudge::create(v);
}

}  // namespace

TEST_CASE("claim_support model: the C++ scores equal the Python model's on 30 dev events") {
  rapidjson::Document pins;
  pins.Parse(
      readAll(std::string(test::kTestDataDir) + "/judges/data/claim_support_pins.json").c_str());
  REQUIRE(pins.IsArray());
  REQUIRE(pins.Size() == 30);
  std::map<std::string, double> want;
  for (const auto& p : pins.GetArray()) want[p["id"].GetString()] = p["score"].GetDouble();
  const auto judge = create({});
  std::ifstream dev(std::string(test::kSharedDataDir) + "/rag_events_dev.jsonl");
  int compared = 0;
  for (std::string line; std::getline(dev, line);) {
    rapidjson::Document d;
    d.Parse(line.c_str());
    const auto it = want.find(d["id"].GetString());
    if (it == want.end()) continue;
    const std::string id = it->first;
    CAPTURE(id);
    const Verdict v = judge->judge(eventOf(d));
    REQUIRE(v.score.has_value());
    CHECK(*v.score == doctest::Approx(it->second).epsilon(1e-12));
    ++compared;
  }
  CHECK(compared == 30);
}

TEST_CASE("claim_support model: the built-in weights, pinned with the judge's version salt") {
  // Retrained weights change every claim_support score: bump the descriptor's version_salt
  // ("learned-2", judges/claim_support.cpp) with this digest, so that a new version starts.
  const auto& m = builtinClaimSupportModel();
  CHECK(m.digest == 0xe96c5d8b02cb46e0ULL);
  CHECK(ClaimSupportJudge::kDescriptor.version_salt == "learned-2");
  CHECK(m.feature.size() == 4);
  CHECK(kClaimFeatureNames[m.feature[0]] == "formula");
  // The formula's weight is negative: a higher formula, a lower P(hallucinated).
  CHECK(m.coef[0] < 0);
  // Scores stay in [0, 1] at the features' extremes.
  std::array<double, kClaimFeatureCount> x{};
  CHECK(m.score(x) > 0);
  x.fill(1e300);
  CHECK(m.score(x) >= 0);
  CHECK(m.score(x) <= 1);
}

TEST_CASE("claim_support model: a bad weights file is refused whole, with its path and reason") {
  TempDir dir;
  const std::string good(builtinClaimSupportModelText());
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  // A one-feature model with these numbers.
  const auto model = [](const std::string& mean, const std::string& scale, const std::string& coef,
                        const std::string& intercept) {
    return R"({"format": "assay-claim-support-model", "version": 1, "features": ["formula"], )"
           R"("mean": [)" +
           mean + R"(], "scale": [)" + scale + R"(], "coef": [)" + coef + R"(], "intercept": )" +
           intercept + "}";
  };
  CHECK_NOTHROW(parseClaimSupportModel(model("0.5", "0.3", "-2", "1"), "ok"));
  const std::string missing = (dir.path / "missing.json").string();
  const std::pair<std::string, std::string> bad[] = {
      {missing, "cannot be opened"},
      {dir.write("truncated.json", good.substr(0, good.size() / 2)), "not JSON at byte"},
      {dir.write("v2.json", replaced("\"version\": 1", "\"version\": 2")), "\"version\" is not 1"},
      {dir.write("format.json", replaced("assay-claim-support-model", "other")),
       "\"format\" is not"},
      {dir.write("nan.json", replaced("\"intercept\": ", "\"intercept\": NaN, \"x\": ")),
       "not JSON"},
      {dir.write("huge.json", replaced("\"intercept\": ", "\"intercept\": 1e999, \"x\": ")),
       "not JSON"},
      {dir.write("feature.json", replaced("\"formula\"", "\"formulaX\"")),
       "'formulaX' is not a claim_support feature"},
      {dir.write("count.json", replaced("\"coef\": [", "\"coef\": [1, ")), "\"coef\" has 5"},
      {dir.write("deep.json", std::string(10000, '[')), "nested deeper"},
      {dir.path.string(), "not a regular file"},
      {dir.write("hugemean.json", model("1e308", "1", "1", "0")), "\"mean\"[0] is outside"},
      {dir.write("denorm.json", model("0", "5e-324", "1", "0")), "\"scale\"[0] is outside"},
      {dir.write("bigcoef.json", model("0", "1", "-1e7", "0")), "\"coef\"[0] is outside"},
      {dir.write("bigb.json", model("0", "1", "1", "1e7")), "\"intercept\" is outside"},
      {dir.write("dupkey.json", replaced("\"version\": 1", "\"version\": 1, \"version\": 1")),
       "the key \"version\" appears twice"},
  };
  for (const auto& [path, why] : bad) {
    const std::string expected = path + ": ";
    const std::string reason = why;
    CAPTURE(expected);
    CAPTURE(reason);
    try {
      (void)create({{"weights", path}});
      FAIL("accepted");
    } catch (const OptionError& e) {
      CHECK(e.key == "weights");
      const std::string what = e.what();
      CHECK(what.find(expected) != std::string::npos);
      CHECK(what.find(reason) != std::string::npos);
    }
  }
  // A good file: its own copy scores as the built-in; the formula is the hand-set score.
  const auto copy = dir.write("copy.json", good);
  const auto learned = create({{"weights", copy}});
  Event e;
  e.question = "How long is the warranty?";
  e.answer = "It lasts two years.";
  e.contexts.push_back(Context{"1", "The warranty lasts two years.", ""});
  CHECK(learned->judge(e).score == create({})->judge(e).score);
  CHECK(*create({{"combination", "formula"}})->judge(e).score == 1.0);
  CHECK(*learned->judge(e).score < 1.0);  // a probability, never quite 1
  CHECK_THROWS_AS(create({{"combination", "best"}}), OptionError);
  CHECK_THROWS_AS(create({{"combination", "formula"}, {"weights", copy}}), OptionError);
  // The version sees the file's bytes, not only its path.
  JudgeOptionValues v;
  v.set("weights", copy);
  const auto before = judgeVersion(ClaimSupportJudge::kDescriptor, v);
  dir.write("copy.json", replaced("\"intercept\": ", "\"intercept\": 0.5, \"x\": "));
  CHECK(judgeVersion(ClaimSupportJudge::kDescriptor, v) != before);

  // Read once (JudgeOptionValues::readFiles, as the config loader does): a file replaced after
  // the read changes neither the version nor the judge built from these values.
  dir.write("once.json", good);
  JudgeOptionValues once;
  once.set("weights", (dir.path / "once.json").string());
  once.readFiles(ClaimSupportJudge::kDescriptor.options);
  const auto read_version = judgeVersion(ClaimSupportJudge::kDescriptor, once);
  dir.write("once.json", "{\"format\": \"truncat");
  CHECK(judgeVersion(ClaimSupportJudge::kDescriptor, once) == read_version);
  const auto judge = ClaimSupportJudge::create(once);
  CHECK(judge->judge(e).score == create({})->judge(e).score);
  // A copy of the values shares the bytes; a fresh read sees the broken file and refuses it.
  const JudgeOptionValues copied = once;
  CHECK(judgeVersion(ClaimSupportJudge::kDescriptor, copied) == read_version);
  once.readFiles(ClaimSupportJudge::kDescriptor.options);
  CHECK(judgeVersion(ClaimSupportJudge::kDescriptor, once) != read_version);
  CHECK_THROWS_AS(ClaimSupportJudge::create(once), OptionError);
  // A file that cannot be read is refused with its path and reason.
  JudgeOptionValues absent;
  absent.set("weights", (dir.path / "absent.json").string());
  absent.readFiles(ClaimSupportJudge::kDescriptor.options);
  try {
    (void)ClaimSupportJudge::create(absent);
    FAIL("accepted");
  } catch (const OptionError& err) {
    CHECK(std::string(err.what()).find("absent.json: cannot be opened") != std::string::npos);
  }
}

}  // namespace assay
