// The claim_support features (judges/claim_support.hpp, kClaimFeatureNames) of every event of a
// JSON Lines file, one JSON object a line: {"id", "source", "label", "outcome", "features"}.
// scripts/train_claim_support reads them to fit the learned combination; "label" is
// labels.hallucinated (true, false or null), "source" labels.source_dataset.
//   assay_claim_features EVENTS.jsonl > FEATURES.jsonl
//   assay_claim_features --names      (the feature names, a JSON array, in order)
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/json_limits.hpp"
#include "judges/abstention.hpp"
#include "judges/claim_support.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: assay_claim_features EVENTS.jsonl\n";
    return 2;
  }
  if (std::string_view(argv[1]) == "--names") {
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartArray();
    for (const auto name : assay::kClaimFeatureNames)
      w.String(name.data(), static_cast<rapidjson::SizeType>(name.size()));
    w.EndArray();
    std::cout << buf.GetString() << "\n";
    return 0;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << argv[1] << ": cannot be opened\n";
    return 2;
  }
  std::size_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    rapidjson::Document d;
    if (assay::jsonShapeProblem(line) || d.Parse(line.c_str()).HasParseError() || !d.IsObject() ||
        !d.HasMember("id") || !d["id"].IsString()) {
      std::cerr << argv[1] << ":" << number << ": not an event\n";
      return 1;
    }
    const auto str = [&](const rapidjson::Value& v, const char* key) {
      return v.HasMember(key) && v[key].IsString() ? std::string(v[key].GetString()) : "";
    };
    std::vector<std::string_view> contexts;
    if (d.HasMember("contexts") && d["contexts"].IsArray())
      for (const auto& c : d["contexts"].GetArray())
        if (c.IsObject() && c.HasMember("text") && c["text"].IsString() &&
            c["text"].GetStringLength() > 0)
          contexts.emplace_back(c["text"].GetString(), c["text"].GetStringLength());
    const std::string question = str(d, "question"), answer = str(d, "answer");
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    w.Key("id");
    w.String(d["id"].GetString());
    const rapidjson::Value* labels =
        d.HasMember("labels") && d["labels"].IsObject() ? &d["labels"] : nullptr;
    w.Key("source");
    w.String(labels ? str(*labels, "source_dataset").c_str() : "");
    w.Key("label");
    if (labels && labels->HasMember("hallucinated") && (*labels)["hallucinated"].IsBool())
      w.Bool((*labels)["hallucinated"].GetBool());
    else
      w.Null();
    w.Key("outcome");
    if (contexts.empty()) {
      w.String("no_context");
    } else {
      const auto detail = assay::claimSupport(question, answer, contexts);
      w.String(detail.abstained ? "abstained" : detail.empty ? "empty_input" : "ok");
      if (!detail.abstained && !detail.empty) {
        w.Key("features");
        w.StartArray();
        for (const double x : detail.features) w.Double(x);
        w.EndArray();
      }
    }
    w.EndObject();
    std::cout << buf.GetString() << "\n";
  }
  return 0;
}
