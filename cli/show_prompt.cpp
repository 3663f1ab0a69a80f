#include "cli/show_prompt.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <sstream>

#include "config/loader.hpp"
#include "core/bounded_file.hpp"
#include "judges/llm/llm_judge.hpp"
#include "judges/llm/pricing.hpp"
#include "judges/llm/prompt.hpp"
#include "judges/llm/provider.hpp"
#include "judges/redaction.hpp"
#include "sources/event_parser.hpp"

namespace assay::cli {
namespace {

/// An event that shows where each input goes: placeholders for every field a rubric may read.
Event sampleEvent(const Config& c) {
  Event e;
  e.id = "sample";
  e.question = "<the question>";
  e.contexts = {{"doc-1", "<the first retrieved passage>", "<its source>"},
                {"doc-2", "<the second retrieved passage>", ""}};
  e.answer = "<the answer to judge>";
  e.reference = "<the reference answer>";
  for (const auto& p : c.events.extra) e.fields.emplace_back(p, "<the event's value at " + p + ">");
  return e;
}

/// The event of `o.id` in `o.events_path`, or its first line that parses.
Event eventFromFile(const ShowPromptOptions& o, const Config& c) {
  std::string text;
  if (const auto why = readRegularFile(o.events_path, kMaxDataFileBytes, text); !why.empty())
    throw ShowPromptError(o.events_path + " " + why);
  const EventParser parser(c.events, c.limits.max_event_bytes);
  std::istringstream lines(text);
  std::string line, first_error;
  for (std::size_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Event e;
    const auto r = parser.parse(line, o.events_path + ":" + std::to_string(n), e);
    if (!r.ok) {
      if (first_error.empty())
        first_error =
            fmt::format("{}:{}: {} ({})", o.events_path, n, invalidReasonName(r.reason), r.detail);
      continue;
    }
    if (!o.id || e.id == *o.id) return e;
  }
  if (o.id) throw ShowPromptError(o.events_path + ": no event with id '" + *o.id + "'");
  throw ShowPromptError(o.events_path + ": no line is an event" +
                        (first_error.empty() ? "" : "; the first: " + first_error));
}

std::string schemaOf(const rapidjson::Document& body) {
  const rapidjson::Value* v = nullptr;
  if (body.HasMember("response_format") && body["response_format"].HasMember("json_schema"))
    v = &body["response_format"]["json_schema"]["schema"];
  else if (body.HasMember("tools") && body["tools"].IsArray() && !body["tools"].Empty())
    v = &body["tools"][0]["input_schema"];
  if (!v) return "none (JSON mode: the system message asks for the object)";
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  v->Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

void printJudge(const JudgeConfig& jc, const llm::LlmJudgeSettings& s, const Event& e,
                const ShowPromptOptions& o, std::ostream& out) {
  const auto& r = s.rubric;
  if (!o.body)
    out << fmt::format("## {} (criterion {}{}, scale {}-{}, {} {})\n\n", jc.name, r.criterion,
                       r.custom ? ", your own" : ", built in", r.minScore(), r.maxScore(),
                       s.provider == llm::Provider::kAnthropic ? "anthropic" : "openai", s.model);
  // The same outcomes as the judge's before any call: no request is printed for them.
  const auto missing = llm::missingInput(r, e);
  const auto prompt = missing ? std::nullopt : llm::buildPrompt(r, e, s.max_input_tokens);
  if (!prompt) {
    if (!o.body)
      out << fmt::format("no call for this event: {} (outcome {})\n\n",
                         missing ? missing->second : llm::tooLongText(r),
                         outcomeName(missing ? missing->first : Outcome::kContextTooLong));
    return;
  }
  const auto req = llm::buildRequest(s.provider, s.endpoint, "", s.model, *prompt, s.max_tokens,
                                     llm::replyFormatOf(s));
  if (o.body) {
    out << req.body << "\n";
    return;
  }
  const auto worst = llm::costEur(
      llm::costUsd(s.price, llm::estimateUsage(prompt->estimated_tokens, s.max_tokens)),
      s.usd_to_eur);
  out << fmt::format(
      "POST {}\nprompt: about {} tokens (system {}); at most {} out (max_tokens); one call costs "
      "at most {:.6f} EUR\n",
      req.url, prompt->estimated_tokens, llm::estimateTokens(prompt->system), s.max_tokens, worst);
  if (prompt->contexts_truncated)
    out << fmt::format("contexts: {} of {} kept (max_input_tokens {})\n", prompt->contexts_used,
                       prompt->contexts_total, s.max_input_tokens);
  rapidjson::Document body;
  body.Parse(req.body.c_str());
  out << "\n### system message\n\n"
      << prompt->system << "\n\n### user message\n\n"
      << prompt->user << "\n\n### reply schema\n\n"
      << schemaOf(body) << "\n\n";
}

}  // namespace

ShowPromptOptions parseShowPromptArgs(const std::vector<std::string>& args) {
  ShowPromptOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--body") {
      o.body = true;
      continue;
    }
    if (a != "--config" && a != "--judge" && a != "--events" && a != "--id")
      throw ShowPromptError("unknown argument '" + a + "'");
    if (i + 1 >= args.size()) throw ShowPromptError(a + " needs a value");
    const std::string& v = args[++i];
    if (a == "--config")
      o.config_path = v;
    else if (a == "--judge")
      o.judges.push_back(v);
    else if (a == "--events")
      o.events_path = v;
    else
      o.id = v;
  }
  if (o.config_path.empty()) throw ShowPromptError("--config ASSAYD.yaml is required");
  if (o.id && o.events_path.empty()) throw ShowPromptError("--id needs --events FILE");
  return o;
}

int runShowPrompt(const ShowPromptOptions& o, std::ostream& out) {
  const LoadResult res = loadConfigFile(o.config_path);
  if (!res.ok()) throw ShowPromptError(res.refusal());
  const Config& c = res.config;
  std::vector<const JudgeConfig*> chosen;
  std::string llm_names;
  for (const auto& jc : c.judges) {
    if (jc.factory->descriptor->kind != JudgeKind::kLlm) continue;
    llm_names += (llm_names.empty() ? "" : ", ") + jc.name;
    if (o.judges.empty() || std::find(o.judges.begin(), o.judges.end(), jc.name) != o.judges.end())
      chosen.push_back(&jc);
  }
  for (const auto& name : o.judges)
    if (std::none_of(chosen.begin(), chosen.end(),
                     [&](const JudgeConfig* jc) { return jc->name == name; }))
      throw ShowPromptError("no LLM judge named '" + name + "' in " + o.config_path + " (" +
                            (llm_names.empty() ? "it has none" : "its LLM judges: " + llm_names) +
                            ")");
  if (chosen.empty()) throw ShowPromptError(o.config_path + " has no LLM judge (kind: llm)");
  Event e = o.events_path.empty() ? sampleEvent(c) : eventFromFile(o, c);
  if (!c.redact.detectors.empty() || !c.redact.patterns.empty()) {
    const Redactor redactor(c.redact);
    Redactor::Session session(redactor);
    e = redactor.redact(e, session);
  }
  if (!o.body)
    out << fmt::format("# The requests of {}'s LLM judges for event '{}'{}\n\n", o.config_path,
                       e.id, o.events_path.empty() ? " (a sample with placeholders)" : "");
  for (const JudgeConfig* jc : chosen) {
    JudgeContext ctx;
    ctx.name = jc->name;
    ctx.budget = &c.budget;
    printJudge(*jc, llm::llmSettingsFrom(jc->values, ctx), e, o, out);
  }
  return 0;
}

}  // namespace assay::cli
