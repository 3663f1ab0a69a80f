// `kind: llm` judges in the judge table: the descriptor, the options (docs/configuration.md,
// "LLM judges") and their checks, the rubric's scale. Adding an option touches this file, the
// settings in llm_judge.hpp and the docs.
#include <arpa/inet.h>
#include <rapidjson/pointer.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "core/edit_distance.hpp"
#include "judges/budget_options.hpp"
#include "judges/llm/http_client.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/secrets.hpp"
#include "judges/services.hpp"

namespace assay::llm {
namespace {

const OptionSpec kOptions[] = {
    {"criterion", OptionType::kString,
     "a built-in rubric (faithfulness, answer_relevancy, completeness, context_relevance), or a "
     "name of your own whose rubric (definition, levels) the rubric option gives"},
    {"provider", OptionType::kString, "openai (any OpenAI-compatible endpoint) or anthropic", true,
     "\"openai\""},
    {"endpoint", OptionType::kString,
     "base URL (default https://api.openai.com/v1, or https://api.anthropic.com)"},
    {"model", OptionType::kString, "the judge model; it needs a price (built in or budget.prices)"},
    {"api_key_env", OptionType::kString, "environment variable that holds the API key", false},
    {"api_key_file", OptionType::kString,
     "file that holds the API key (relative: in $CREDENTIALS_DIRECTORY, systemd's "
     "LoadCredential=); instead of api_key_env",
     false},
    {"daily_limit_eur", OptionType::kNumber,
     "this judge's own cap, euros per local day, 0..1000000 (0 = the global cap only)", false},
    {"max_tokens", OptionType::kInt, "reply cap sent to the API, 16..100000 (default 300)", true,
     "300"},
    {"max_input_tokens", OptionType::kInt,
     "prompt cap, 256..10000000 (default 16000): lower-ranked contexts are dropped to fit", true,
     "16000"},
    {"timeout_ms", OptionType::kInt, "per attempt, 100..600000 (default 30000)", false},
    {"max_in_flight", OptionType::kInt, "concurrent calls, 1..1024 (default 8)", false},
    {"requests_per_minute", OptionType::kNumber, "0 = no limit", false},
    {"tokens_per_minute", OptionType::kNumber, "prompt estimate + max_tokens per call; 0 = none",
     false},
    {"max_retries", OptionType::kInt, "after the first attempt, 0..10 (default 3)", false},
    {"max_retry_wait_ms", OptionType::kInt,
     "a longer Retry-After gives up as rate_limited, 0..3600000 (default 60000)", false},
    {"breaker_max_hold_ms", OptionType::kInt,
     "under limits.when_full: block, how long an open circuit breaker holds a call before it "
     "ends as provider_error, counted from the call's start, 0..3600000 (default 240000; 0 = "
     "no hold; at most timeout_ms + max_retry_wait_ms x (max_retries + 1))",
     false},
    {"ca_file", OptionType::kString, "PEM bundle of a private CA (default: the system store)",
     false},
    {"insecure_http", OptionType::kBool,
     "true allows a plain http:// endpoint on a host other than loopback (key and event text "
     "unencrypted; a warning at start)",
     false},
    {"reply_format", OptionType::kString,
     "json_schema (default: the reply schema as OpenAI json_schema strict, or Anthropic's forced "
     "tool) or json_object (JSON mode, for servers and models without schema support)",
     true, "\"json_schema\""},
    {"score_trimmed", OptionType::kBool,
     "true counts a faithfulness score judged on contexts trimmed to max_input_tokens (default "
     "false: outcome contexts_trimmed)",
     true, "false"},
    {"batch", OptionType::kBool,
     "true sends the calls through the provider's batch API (OpenAI Batch API, Anthropic Message "
     "Batches) at half the list price; verdicts come within the provider's 24 h window",
     false},
    {"batch_max_requests", OptionType::kInt,
     "requests per batch, 1..50000 (default 1000): a batch is submitted when it holds that many",
     false},
    {"batch_max_wait_ms", OptionType::kInt,
     "or this long after its first request, 1000..86400000 (default 600000: 10 minutes)", false},
    {"batch_poll_ms", OptionType::kInt,
     "how often a submitted batch's status is asked, 100..3600000 (default 30000)", false},
    {"batch_max_pending_events", OptionType::kInt,
     "events that may wait for this judge's batch verdicts before consumption pauses, "
     "1..10000000 (default 50000)",
     false},
    {"rubric", OptionType::kTree,
     "{definition?, levels: {SCORE: {name, description}}, inputs?: [question | contexts | answer "
     "| reference | /json/pointer], examples?: [{question, contexts, answer, reference?, "
     "/json/pointer?, score, justification, unsupported_claim?}]}: a criterion of your own "
     "(definition and 2-10 levels required), or a built-in's wording overrides; examples (one "
     "per level at most) replace the built-in ones"},
};

const Outcome kOutcomes[] = {
    Outcome::kNoContext,     Outcome::kNoReference,     Outcome::kNotApplicable,
    Outcome::kSchemaError,   Outcome::kTruncated,       Outcome::kRefused,
    Outcome::kRateLimited,   Outcome::kTimeout,         Outcome::kProviderError,
    Outcome::kSkippedBudget, Outcome::kContextTooLong,  Outcome::kAuthError,
    Outcome::kAbstained,     Outcome::kContextsTrimmed,
};

/// Collects every option error, so that --check-config prints them all at once.
class Errors {
 public:
  template <typename F>
  void check(F&& f) {
    try {
      f();
    } catch (const OptionError& e) {
      add(e.key, e.what());
    }
  }
  void add(std::string key, std::string message) {
    list_.emplace_back(std::move(key), std::move(message));
  }
  void throwIfAny() const {
    if (list_.empty()) return;
    OptionError e(list_[0].first, list_[0].second);
    e.others.assign(list_.begin() + 1, list_.end());
    throw e;
  }

 private:
  std::vector<std::pair<std::string, std::string>> list_;
};

std::string knownCriteria() {
  std::string known;
  for (const auto& c : builtinCriteria()) known += (known.empty() ? "" : ", ") + c;
  return known;
}

/// A scalar tree node as an int in [lo, hi]; nullopt otherwise.
std::optional<int> intIn(const OptionTree& t, int lo, int hi) {
  if (t.kind != OptionTree::Kind::kScalar || t.scalar.empty()) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(t.scalar.c_str(), &end, 10);
  if (*end != '\0' || v < lo || v > hi) return std::nullopt;
  return static_cast<int>(v);
}

std::string scalarOf(const OptionTree* t) {
  return t && t->kind == OptionTree::Kind::kScalar ? t->scalar : std::string();
}

/// Unknown keys of a mapping node; false when `t` is not a mapping.
bool checkKeys(const OptionTree& t, const std::string& path, const std::set<std::string>& known,
               Errors& errors) {
  if (t.kind != OptionTree::Kind::kMap) {
    errors.add(path, "expected a mapping");
    return false;
  }
  for (const auto& e : t.map) {
    const auto& k = e.key;
    if (known.count(k)) continue;
    std::string all;
    for (const auto& n : known) all += " " + n;
    errors.add(path + "." + k, "unknown key (known keys:" + all + ")");
  }
  return true;
}

void rubricLevels(const OptionTree& levels, Rubric& rubric, Errors& errors) {
  const int lo = rubric.minScore(), hi = rubric.maxScore();
  if (levels.kind != OptionTree::Kind::kMap) {
    errors.add("rubric.levels", "expected {score: {name?, description?}}");
    return;
  }
  for (const auto& [key, value] : levels.map) {  // OptionTreeEntry
    const std::string lp = "rubric.levels." + key;
    OptionTree k{OptionTree::Kind::kScalar, key, {}, {}};
    const auto score = intIn(k, lo, hi);
    if (!score) {
      errors.add(lp, "expected a score from " + std::to_string(lo) + " to " + std::to_string(hi));
      continue;
    }
    if (!checkKeys(value, lp, {"name", "description"}, errors)) continue;
    for (auto& level : rubric.levels) {
      if (level.score != *score) continue;
      if (const auto n = scalarOf(value.find("name")); !n.empty()) level.name = n;
      if (const auto d = scalarOf(value.find("description")); !d.empty()) level.description = d;
    }
  }
}

/// Why `text` cannot go into the prompt as rubric text ("" when it can): blank, over
/// `max_bytes`, or holding a control character (newlines and tabs allowed when `multiline`).
std::string textProblem(const std::string& text, std::size_t max_bytes, bool multiline) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "blank";
  if (text.size() > max_bytes) return "over " + std::to_string(max_bytes) + " bytes";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 || u == 0x7f) && !(multiline && (c == '\n' || c == '\t')))
      return "holds a control character";
  }
  return "";
}

/// "3", "3 and 5" or "3, 5 and 6".
std::string listOf(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + std::to_string(v[i]);
  return out;
}

/// The levels of a criterion of the user's own: 2 to 10, consecutive integer scores in
/// [kMinLevelScore, kMaxLevelScore], each with a name and a description.
void customLevels(const OptionTree* levels, Rubric& rubric, Errors& errors) {
  const std::string shape = std::to_string(kMinCustomLevels) + " to " +
                            std::to_string(kMaxCustomLevels) +
                            " levels {SCORE: {name, description}} on consecutive integer scores";
  if (!levels)
    return errors.add("rubric.levels", "missing: a criterion of your own needs " + shape);
  if (levels->kind != OptionTree::Kind::kMap)
    return errors.add("rubric.levels", "expected " + shape);
  if (levels->map.size() > kMaxCustomLevels)  // one error, not one per level
    return errors.add("rubric.levels", "expected " + shape + ", found " +
                                           std::to_string(levels->map.size()) + " levels");
  std::map<int, std::string> seen;  // score → its key as written
  bool bad = false;
  for (const auto& [key, value] : levels->map) {  // OptionTreeEntry
    const std::string lp = "rubric.levels." + key;
    OptionTree k{OptionTree::Kind::kScalar, key, {}, {}};
    const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return c >= '0' && c <= '9';
    });  // no sign, space or base prefix: " 3" and "+3" are not scores
    const int score = digits ? intIn(k, kMinLevelScore, kMaxLevelScore).value_or(-1) : -1;
    if (score < 0) {
      errors.add(lp, "expected an integer score from " + std::to_string(kMinLevelScore) + " to " +
                         std::to_string(kMaxLevelScore));
      bad = true;
      continue;
    }
    if (const auto it = seen.find(score); it != seen.end()) {
      errors.add(lp, "duplicate score " + std::to_string(score) + " (also rubric.levels." +
                         it->second + ")");
      continue;
    }
    seen.emplace(score, key);
    if (!checkKeys(value, lp, {"name", "description"}, errors)) continue;
    RubricLevel level{score, scalarOf(value.find("name")), scalarOf(value.find("description"))};
    if (level.name.empty())
      errors.add(lp + ".name", "missing: each level has a short name (e.g. \"on charter\")");
    else if (const auto why = textProblem(level.name, 200, false); !why.empty())
      errors.add(lp + ".name", why +
                                   ": a level's name is a few words on one line, at most 200 "
                                   "bytes");
    if (level.description.empty())
      errors.add(lp + ".description",
                 "missing: each level says in words what an answer at this level looks like");
    else if (const auto why = textProblem(level.description, 2000, true); !why.empty())
      errors.add(lp + ".description",
                 why + ": a level's description is at most 2000 bytes of text");
    rubric.levels.push_back(std::move(level));
  }
  std::sort(rubric.levels.begin(), rubric.levels.end(),
            [](const RubricLevel& a, const RubricLevel& b) { return a.score < b.score; });
  if (bad) return;
  if (rubric.levels.size() < kMinCustomLevels || rubric.levels.size() > kMaxCustomLevels)
    return errors.add("rubric.levels", "expected " + shape + ", found " +
                                           std::to_string(rubric.levels.size()) + " level(s)");
  std::vector<int> missing;
  for (std::size_t i = 1; i < rubric.levels.size(); ++i)
    for (int g = rubric.levels[i - 1].score + 1; g < rubric.levels[i].score; ++g)
      missing.push_back(g);
  if (!missing.empty())
    errors.add("rubric.levels",
               "the scores run from " + std::to_string(rubric.minScore()) + " to " +
                   std::to_string(rubric.maxScore()) + " with no level for " + listOf(missing) +
                   ": the levels are consecutive integers (renumber them, or add the missing "
                   "level" +
                   (missing.size() > 1 ? "s" : "") + ")");
}

constexpr std::string_view kInputsHelp =
    "question, contexts, answer, reference, or a JSON Pointer into the event such as "
    "/metadata/persona";

/// `rubric.inputs`: the event fields a criterion of the user's own sees (default: question,
/// contexts and answer).
void rubricInputs(const OptionTree* inputs, Rubric& r, Errors& errors) {
  r.needs_question = r.needs_contexts = r.needs_answer = !inputs;
  if (!inputs) return;
  if (inputs->kind != OptionTree::Kind::kList || inputs->list.empty())
    return errors.add("rubric.inputs", "expected a non-empty list of " + std::string(kInputsHelp));
  std::set<std::string> seen;
  for (std::size_t i = 0; i < inputs->list.size(); ++i) {
    const std::string ip = "rubric.inputs[" + std::to_string(i) + "]";
    const std::string v = scalarOf(&inputs->list[i]);
    if (!seen.insert(v).second) {
      errors.add(ip, "'" + v + "' is listed twice");
      continue;
    }
    if (v == "question") {
      r.needs_question = true;
    } else if (v == "contexts") {
      r.needs_contexts = true;
    } else if (v == "answer") {
      r.needs_answer = true;
    } else if (v == "reference") {
      r.needs_reference = true;
    } else if (!v.empty() && v.front() == '/') {
      if (std::any_of(v.begin(), v.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        errors.add(ip, "a JSON Pointer without control characters (NUL, line breaks…)");
      else if (v.size() > 256)
        errors.add(ip, "a JSON Pointer of at most 256 bytes");
      else if (!rapidjson::Pointer(v.c_str(), v.size()).IsValid())
        errors.add(ip, "'" + v + "' is not a JSON Pointer (RFC 6901: '~' is written ~0, '/' ~1)");
      else if (r.fields.size() == kMaxRubricFields)
        errors.add(ip, "at most " + std::to_string(kMaxRubricFields) + " JSON Pointer inputs");
      else
        r.fields.push_back(v);
    } else {
      errors.add(ip, (v.empty() ? std::string("expected") : "unknown input '" + v + "' (one of:") +
                         " " + std::string(kInputsHelp) + (v.empty() ? "" : ")"));
    }
  }
}

void rubricExamples(const OptionTree& examples, Rubric& rubric, Errors& errors) {
  if (rubric.levels.empty()) return;  // the levels' own error says why
  const int lo = rubric.minScore(), hi = rubric.maxScore();
  if (examples.kind != OptionTree::Kind::kList) {
    errors.add("rubric.examples",
               "expected a list of {question, contexts, answer, score, justification, "
               "unsupported_claim?}");
    return;
  }
  rubric.examples.clear();  // configured examples replace the built-in ones
  std::set<std::string> keys = {"question", "contexts", "answer", "score", "justification"};
  if (!rubric.custom || rubric.names_claim) keys.insert("unsupported_claim");
  if (!rubric.custom || rubric.needs_reference) keys.insert("reference");
  keys.insert(rubric.fields.begin(), rubric.fields.end());
  std::set<int> seen;
  for (std::size_t i = 0; i < examples.list.size(); ++i) {
    const auto& ex = examples.list[i];
    const std::string ep = "rubric.examples[" + std::to_string(i) + "]";
    if (!checkKeys(ex, ep, keys, errors)) continue;
    FewShotExample e{.question = scalarOf(ex.find("question")),
                     .contexts = {},
                     .answer = scalarOf(ex.find("answer")),
                     .score = 0,
                     .justification = scalarOf(ex.find("justification")),
                     .reference = scalarOf(ex.find("reference"))};
    for (const auto& f : rubric.fields) {
      const OptionTree* v = ex.find(f);
      e.field_values.push_back(scalarOf(v));
      if (!v)
        errors.add(ep, "missing '" + f + "': an example gives a value for each JSON Pointer input");
      else if (v->kind != OptionTree::Kind::kScalar)
        errors.add(ep + "." + f, "expected the value as text (a string)");
    }
    if (rubric.custom)  // what the criterion does not see would be dropped without a word
      for (const auto& [key, sees] :
           {std::pair<const char*, bool>{"question", rubric.needs_question},
            {"contexts", rubric.needs_contexts}})
        if (!sees && ex.find(key))
          errors.add(ep + "." + key, std::string("this criterion does not see the ") + key +
                                         " (rubric.inputs): the example's would not be shown");
    if (const auto* claim = ex.find("unsupported_claim")) {
      if (!rubric.names_claim)
        errors.add(ep + ".unsupported_claim", "only faithfulness names an unsupported claim; " +
                                                  rubric.criterion + " does not");
      else if (const auto c = scalarOf(claim); !c.empty() && c != "null" && c != "~")
        e.unsupported_claim = c;
    }
    if (const auto* c = ex.find("contexts")) {
      if (c->kind != OptionTree::Kind::kList)
        errors.add(ep + ".contexts", "expected a list of strings");
      else
        for (const auto& t : c->list) {
          if (t.kind != OptionTree::Kind::kScalar)
            errors.add(ep + ".contexts", "expected a list of strings");
          e.contexts.push_back(scalarOf(&t));
        }
    }
    const auto* s = ex.find("score");
    const auto score = s ? intIn(*s, lo, hi) : std::nullopt;
    if (!s)
      errors.add(ep + ".score", "missing");
    else if (!score)
      errors.add(ep + ".score",
                 "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    if (e.answer.empty() && rubric.needs_answer) errors.add(ep + ".answer", "missing");
    e.score = score.value_or(lo);
    if (score.has_value() && !seen.insert(e.score).second)
      errors.add(ep + ".score", "one example per level");
    rubric.examples.push_back(std::move(e));
  }
}

/// A criterion name: a metric label value and a word of the prompt ("Judge only tone").
bool isCriterionName(const std::string& c) {
  return !c.empty() && c.size() <= 64 && std::isalpha(static_cast<unsigned char>(c[0])) &&
         std::all_of(c.begin(), c.end(), [](char ch) {
           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
         });
}

/// The built-in criterion within 2 edits of `criterion` (a typo), or "".
std::string nearBuiltin(const std::string& criterion) {
  for (const auto& b : builtinCriteria())
    if (editDistance(criterion, b) <= 2) return b;
  return "";
}

/// A criterion of the user's own: `rubric.definition`, `rubric.levels`, and optionally
/// `rubric.inputs` and `rubric.examples`.
void customRubric(const std::string& criterion, const OptionTree* tree, Rubric& r, Errors& errors) {
  r = Rubric{};
  r.criterion = criterion;
  r.custom = true;
  const std::string near = nearBuiltin(criterion);
  const std::string hint = near.empty() ? "" : " (did you mean '" + near + "'?)";
  if (!tree)
    return errors.add("criterion", "'" + criterion + "' is not a built-in criterion" + hint +
                                       ": a criterion of your own needs rubric.definition and "
                                       "rubric.levels (the built-in ones: " +
                                       knownCriteria() + ")");
  r.task = scalarOf(tree->find("definition"));
  if (r.task.empty())
    errors.add(tree->find("definition") ? "rubric.definition" : "rubric",
               "rubric.definition is missing: a criterion of your own (" + criterion + ")" + hint +
                   " says in words what is judged");
  else if (const auto why = textProblem(r.task, 8000, true); !why.empty())
    errors.add("rubric.definition", why + ": what is judged, in words, at most 8000 bytes");
  rubricInputs(tree->find("inputs"), r, errors);
  customLevels(tree->find("levels"), r, errors);
  if (const auto* examples = tree->find("examples")) rubricExamples(*examples, r, errors);
}

void readRubric(const JudgeOptionValues& values, Rubric& rubric, Errors& errors) {
  std::string criterion;
  errors.check([&] { criterion = values.getString("criterion", ""); });
  const OptionTree* tree = nullptr;
  errors.check([&] { tree = values.getTree("rubric"); });
  if (tree && !checkKeys(*tree, "rubric", {"definition", "levels", "examples", "inputs"}, errors))
    tree = nullptr;
  const Rubric* builtin = builtinRubric(criterion);
  if (!builtin) {
    if (criterion.empty())
      errors.add("criterion", "missing: a built-in criterion (" + knownCriteria() +
                                  ") or a name of your own with rubric.definition and "
                                  "rubric.levels");
    else if (!isCriterionName(criterion))
      errors.add("criterion",
                 "expected a name of letters, digits and '_', starting with a "
                 "letter, at most 64 bytes (it labels the judge's metrics)");
    else
      return customRubric(criterion, tree, rubric, errors);
    rubric = *builtinRubric("faithfulness");  // so the rest can still be checked
    return;
  }
  rubric = *builtin;
  if (!tree) return;
  if (tree->find("inputs"))
    errors.add("rubric.inputs", "the inputs of the built-in criterion " + criterion +
                                    " are fixed: give a criterion of your own another name to "
                                    "choose what it sees");
  if (const auto* d = tree->find("definition")) {
    if (const auto text = scalarOf(d); !text.empty())
      rubric.task = text;
    else
      errors.add("rubric.definition", "expected the text of what is judged");
  }
  if (const auto* levels = tree->find("levels")) rubricLevels(*levels, rubric, errors);
  if (const auto* examples = tree->find("examples")) rubricExamples(*examples, rubric, errors);
}

}  // namespace

bool isPlainRemoteHttp(std::string_view endpoint) {
  if (endpoint.rfind("http://", 0) != 0) return false;
  std::string_view host = endpoint.substr(7);
  host = host.substr(0, host.find_first_of("/?#"));
  if (const auto at = host.rfind('@'); at != std::string_view::npos) host.remove_prefix(at + 1);
  if (!host.empty() && host.front() == '[') {
    host = host.substr(
        1, host.find(']') == std::string_view::npos ? host.size() - 1 : host.find(']') - 1);
    return host != "::1";
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost") return false;
  in_addr v4{};
  const std::string literal(host);
  return !(inet_pton(AF_INET, literal.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
}

namespace {

/// What is wrong with an http(s):// endpoint ("" when nothing), never quoting it (it may hold
/// a secret): a byte the client never sends (refusedInUrl), credentials before the host, a port
/// that is not 1-65535.
std::string endpointProblem(std::string_view url) {
  if (std::any_of(url.begin(), url.end(), refusedInUrl))
    return "holds a space, a control character or '#' (a fragment): percent-encode it (%20)";
  const auto start = url.find("://") + 3;
  const auto end = url.find_first_of("/?#", start);
  std::string_view authority = url.substr(start, end == std::string_view::npos ? end : end - start);
  if (authority.find('@') != std::string_view::npos)
    return "holds credentials before the host (user:password@): they would be sent to no API "
           "and shown in logs; the API key goes in api_key_env or api_key_file";
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos || close == 1) return "has no host";
    const auto rest = authority.substr(close + 1);
    if (rest.empty()) return "";
    if (rest.front() != ':') return "has characters after the IPv6 address";
    port = rest.substr(1);
  } else {
    const auto colon = authority.find(':');
    if (colon != authority.rfind(':'))
      return "has more than one ':' in its host (an IPv6 address goes in brackets: [::1]:8080)";
    if (colon == 0 || authority.empty()) return "has no host";
    if (colon == std::string_view::npos) return "";
    port = authority.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
    return "has a port that is not a number from 1 to 65535";
  return "";
}

void readEndpoint(const JudgeOptionValues& values, LlmJudgeSettings& s, Errors& errors) {
  std::string provider = "openai";
  errors.check([&] { provider = values.getString("provider", "openai"); });
  if (provider != "openai" && provider != "anthropic")
    errors.add("provider", "expected openai or anthropic");
  s.provider = provider == "anthropic" ? Provider::kAnthropic : Provider::kOpenAi;
  errors.check([&] { s.endpoint = values.getString("endpoint", ""); });
  if (s.endpoint.empty())
    s.endpoint =
        provider == "anthropic" ? "https://api.anthropic.com" : "https://api.openai.com/v1";
  if (s.endpoint.rfind("https://", 0) != 0 && s.endpoint.rfind("http://", 0) != 0)
    errors.add("endpoint", "expected an http:// or https:// URL");
  else if (const auto why = endpointProblem(s.endpoint); !why.empty())
    errors.add("endpoint", why);
  errors.check([&] { s.insecure_http = values.getBool("insecure_http", false); });
  if (isPlainRemoteHttp(s.endpoint) && !s.insecure_http)
    errors.add("endpoint",
               "plain http:// to a host other than loopback would send the API key and the "
               "events' text unencrypted: use https://, or set insecure_http: true");
  errors.check([&] { s.ca_file = values.getString("ca_file", ""); });
  if (!s.ca_file.empty())
    if (const std::string why = caFileProblem(s.ca_file); !why.empty()) errors.add("ca_file", why);
}

void readModel(const JudgeOptionValues& values, const JudgeContext& ctx, LlmJudgeSettings& s,
               Errors& errors) {
  errors.check([&] { s.model = values.getString("model", ""); });
  if (s.model.empty()) {
    errors.add("model", "missing");
    return;
  }
  auto prices = PriceTable::builtin();
  for (const auto& po : ctx.budget->prices)
    prices.set(po.model, ModelPrice{po.input, po.cached_input, po.output, po.cache_write});
  if (const auto price = prices.find(s.model)) {
    s.price = *price;
    return;
  }
  std::string best;  // the closest priced model, within 3 edits: a typo
  std::size_t best_d = 4;
  for (const auto& [name, _] : prices.entries())
    if (const auto d = editDistance(s.model, name); d < best_d) best_d = d, best = name;
  errors.add("model", "no price for model '" + s.model + "'" +
                          (best.empty() ? "" : "; did you mean '" + best + "'? If not, ") +
                          (best.empty() ? ": add" : "add") +
                          " it under budget.prices (USD per million tokens) so the cap can hold");
}

/// api_key_file: read at start-up (an error then); --check-config only warns when the file is
/// meant for the service's credentials or cannot be read from this shell.
void readApiKeyFile(const std::string& file, const JudgeContext& ctx, LlmJudgeSettings& s,
                    Errors& errors) {
  if (!ctx.services && secretFileDeferred(file)) {
    if (ctx.warn)
      ctx.warn("api_key_file",
               "read from $CREDENTIALS_DIRECTORY (systemd's LoadCredential=) when assayd builds "
               "the judge, not by the configuration check");
    return;
  }
  try {
    s.api_key = readSecretFile(file);
  } catch (const SecretContentError& e) {  // read, and wrong for the service too
    errors.add("api_key_file", std::string(e.what()) + " (judge '" + ctx.name + "')");
  } catch (const std::exception& e) {
    if (ctx.services)
      errors.add("api_key_file", std::string(e.what()) + " (judge '" + ctx.name + "')");
    else if (ctx.warn)
      ctx.warn("api_key_file",
               std::string(e.what()) + "; assayd refuses to start unless the service can read it");
  }
}

void readApiKey(const JudgeOptionValues& values, const JudgeContext& ctx, LlmJudgeSettings& s,
                Errors& errors) {
  std::string env, file;
  errors.check([&] { env = values.getString("api_key_env", ""); });
  errors.check([&] { file = values.getString("api_key_file", ""); });
  if (!env.empty() && !file.empty()) {
    errors.add("api_key_file", "give api_key_env or api_key_file, not both");
    return;
  }
  if (!file.empty()) return readApiKeyFile(file, ctx, s, errors);
  if (env.empty()) return;
  if (!isVariableName(env)) {  // a key pasted where its variable's name goes: never echo it
    errors.add("api_key_env",
               "expected the name of an environment variable (letters, digits and _); this "
               "value is not one (it is not printed: it may be the key itself)");
    return;
  }
  const char* key = std::getenv(env.c_str());
  const bool control = key && std::any_of(key, key + std::strlen(key), [](char c) {
                         return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                       });
  if (control) {  // a CR/LF would inject request headers (http_client refuses to send it)
    const std::string why = "environment variable " + variableShown(env) +
                            " holds a line break or another control character: an API key is "
                            "one line (the value is not printed)";
    if (ctx.services)
      errors.add("api_key_env", why);
    else if (ctx.warn)
      ctx.warn("api_key_env", why);
  } else if (key && *key) {
    s.api_key = key;
  } else if (ctx.services) {
    errors.add("api_key_env", "environment variable " + variableShown(env) +
                                  " is not set (judge '" + ctx.name + "')");
  } else if (ctx.warn) {
    ctx.warn("api_key_env", variableShown(env) +
                                " is not set in this environment; assayd refuses to start "
                                "without it");
  }
}

void readLimits(const JudgeOptionValues& v, LlmJudgeSettings& s, Errors& errors) {
  errors.check([&] { s.daily_limit_eur = v.getNumberIn("daily_limit_eur", 0, 0, 1e6); });
  errors.check([&] { s.max_tokens = static_cast<int>(v.getIntIn("max_tokens", 300, 16, 100000)); });
  errors.check(
      [&] { s.max_input_tokens = v.getIntIn("max_input_tokens", 16000, 256, 10'000'000); });
  errors.check([&] { s.timeout = Millis{v.getIntIn("timeout_ms", 30000, 100, 600'000)}; });
  errors.check(
      [&] { s.max_in_flight = static_cast<int>(v.getIntIn("max_in_flight", 8, 1, 1024)); });
  errors.check([&] { s.requests_per_minute = v.getNumberIn("requests_per_minute", 0, 0, 1e7); });
  errors.check([&] { s.tokens_per_minute = v.getNumberIn("tokens_per_minute", 0, 0, 1e10); });
  errors.check(
      [&] { s.retry.max_attempts = static_cast<int>(v.getIntIn("max_retries", 3, 0, 10)) + 1; });
  errors.check([&] {
    s.retry.max_retry_wait = Millis{v.getIntIn("max_retry_wait_ms", 60000, 0, 3'600'000)};
  });
  errors.check([&] { s.score_trimmed = v.getBool("score_trimmed", false); });
  errors.check(
      [&] { s.breaker_hold = Millis{v.getIntIn("breaker_max_hold_ms", 240000, 0, 3'600'000)}; });
  errors.check([&] { s.batch = v.getBool("batch", false); });
  errors.check([&] {
    s.batch_max_requests =
        static_cast<std::size_t>(v.getIntIn("batch_max_requests", 1000, 1, 50000));
  });
  errors.check([&] {
    s.batch_max_wait = Millis{v.getIntIn("batch_max_wait_ms", 600000, 1000, 86'400'000)};
  });
  errors.check([&] { s.batch_poll = Millis{v.getIntIn("batch_poll_ms", 30000, 100, 3'600'000)}; });
  errors.check([&] {
    s.batch_max_pending_events =
        static_cast<std::size_t>(v.getIntIn("batch_max_pending_events", 50000, 1, 10'000'000));
  });
  std::string format = "json_schema";
  errors.check([&] { format = v.getString("reply_format", "json_schema"); });
  if (format != "json_schema" && format != "json_object")
    errors.add("reply_format", "expected json_schema or json_object");
  s.reply_format =
      format == "json_object" ? ReplyFormat::Kind::kJsonObject : ReplyFormat::Kind::kJsonSchema;
}

/// A reasoning model spends hidden reasoning tokens out of max_tokens (max_completion_tokens):
/// the default 300 would cut most verdicts (outcome truncated).
void warnReasoning(const JudgeContext& ctx, const LlmJudgeSettings& s) {
  if (ctx.warn && s.provider == Provider::kOpenAi && isReasoningModel(s.model) &&
      s.max_tokens < 2000)
    ctx.warn("max_tokens", "'" + s.model +
                               "' is a reasoning model: its reasoning tokens count against "
                               "max_tokens (sent as max_completion_tokens); with " +
                               std::to_string(s.max_tokens) +
                               " many replies would be cut (outcome truncated): give it 2000 "
                               "or more");
}

}  // namespace

const JudgeDescriptor LlmJudge::kDescriptor{
    "llm",
    JudgeKind::kLlm,
    "",  // the criterion option chooses the rubric
    1.0,
    4.0,
    {1.0, 2.0, 3.0, 4.0},
    kOptions,
    CostClass::kRemoteCall,
    "LLM-as-a-judge: one criterion per call on a rubric with named levels, temperature 0, "
    "schema-validated JSON verdict, under the daily budget",
    kOutcomes,
    // The prompt template (prompt.cpp): bump with any change of what a call sends.
    "prompt-template-1"};

LlmJudgeSettings llmSettingsFrom(const JudgeOptionValues& values, const JudgeContext& ctx) {
  LlmJudgeSettings s;
  Errors errors;
  s.name = ctx.name;
  s.version = ctx.version;
  readRubric(values, s.rubric, errors);
  readEndpoint(values, s, errors);
  readModel(values, ctx, s, errors);
  readApiKey(values, ctx, s, errors);
  readLimits(values, s, errors);
  errors.throwIfAny();
  warnReasoning(ctx, s);
  if (const auto near = s.rubric.custom ? nearBuiltin(s.rubric.criterion) : "";
      !near.empty() && ctx.warn)
    ctx.warn("criterion", "'" + s.rubric.criterion +
                              "' is a criterion of your own, judged by "
                              "its rubric here; if you meant the built-in '" +
                              near +
                              "' (its examples, and for faithfulness the unsupported claim), "
                              "fix the name");
  s.usd_to_eur = ctx.budget->usd_to_eur;
  s.global_daily_limit_eur = ctx.budget->daily_limit_eur;
  s.tenant_caps = ctx.budget->tenant_caps;
  s.app_caps = ctx.budget->app_caps;
  s.timezone = ctx.budget->timezone;
  s.max_waiting = ctx.max_waiting;
  if (!ctx.hold_when_open) s.breaker_hold = Millis{0};
  // A held call must not outlive its lease in the verdict store (timeout × (attempts + 1) +
  // max_retry_wait × attempts + 10 s): the hold takes the lease's slack, one timeout and the
  // retry waits (270 s with the defaults).
  s.breaker_hold =
      std::min(s.breaker_hold, s.timeout + s.retry.max_retry_wait * s.retry.max_attempts);
  return s;
}

std::unique_ptr<Judge> LlmJudge::create(const JudgeOptionValues& values,
                                        const JudgeContext& context) {
  auto settings = llmSettingsFrom(values, context);
  if (!context.services) return nullptr;
  return std::make_unique<LlmJudge>(std::move(settings), context.services->calls());
}

JudgeInfo LlmJudge::info(const JudgeOptionValues& values) {
  Rubric r;
  Errors ignored;  // the loader reports them (llmSettingsFrom)
  readRubric(values, r, ignored);
  if (r.levels.size() < 2) r = *builtinRubric("faithfulness");
  JudgeInfo i{
      r.criterion, static_cast<double>(r.minScore()), static_cast<double>(r.maxScore()), {}, true,
      r.fields};
  for (const auto& level : r.levels) i.buckets.push_back(level.score);
  return i;
}

}  // namespace assay::llm
