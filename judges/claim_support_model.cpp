#include "judges/claim_support_model.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/bounded_file.hpp"
#include "core/json_limits.hpp"
#include "core/log_text.hpp"

namespace assay {
namespace {

constexpr std::size_t kMaxModelBytes = std::size_t{64} * 1024;
constexpr std::string_view kFormat = "assay-claim-support-model";
constexpr int kVersion = 1;

std::vector<double> numbers(const rapidjson::Value& d, const char* key, std::size_t n,
                            const std::string& origin) {
  if (!d.HasMember(key) || !d[key].IsArray())
    throw std::runtime_error(origin + ": \"" + key + "\" is missing or not an array");
  const auto& a = d[key];
  if (a.Size() != n)
    throw std::runtime_error(origin + ": \"" + key + "\" has " + std::to_string(a.Size()) +
                             " numbers for " + std::to_string(n) + " features");
  std::vector<double> out;
  for (const auto& v : a.GetArray()) {
    if (!v.IsNumber() || !std::isfinite(v.GetDouble()))
      throw std::runtime_error(origin + ": \"" + key + "\"[" + std::to_string(out.size()) +
                               "] is not a finite number");
    out.push_back(v.GetDouble());
  }
  return out;
}

}  // namespace

double ClaimSupportModel::score(const std::array<double, kClaimFeatureCount>& x) const {
  double z = intercept;
  for (std::size_t i = 0; i < feature.size(); ++i)
    z += coef[i] * (x[feature[i]] - mean[i]) / scale[i];
  // 1 − σ(z) = σ(−z), written to stay exact for large |z|.
  return z >= 0 ? std::exp(-z) / (1 + std::exp(-z)) : 1 / (1 + std::exp(z));
}

ClaimSupportModel parseClaimSupportModel(std::string_view json, const std::string& origin) {
  if (json.size() > kMaxModelBytes)
    throw std::runtime_error(origin + ": larger than 64 KiB: not a weights file");
  if (const auto shape = jsonShapeProblem(json))
    throw std::runtime_error(origin + ": not JSON (" + shape->message() + ")");
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  if (d.HasParseError())
    throw std::runtime_error(origin + ": not JSON at byte " + std::to_string(d.GetErrorOffset()) +
                             ": " + rapidjson::GetParseError_En(d.GetParseError()) +
                             " (truncated, or a NaN or infinity, which JSON has not)");
  if (!d.IsObject()) throw std::runtime_error(origin + ": not a JSON object");
  for (auto a = d.MemberBegin(); a != d.MemberEnd(); ++a)  // a key twice: which one is meant?
    for (auto b = a + 1; b != d.MemberEnd(); ++b)
      if (a->name == b->name)
        throw std::runtime_error(origin + ": the key \"" + logText(a->name.GetString(), 60) +
                                 "\" appears twice");
  if (!d.HasMember("format") || !d["format"].IsString() ||
      std::string_view(d["format"].GetString(), d["format"].GetStringLength()) != kFormat)
    throw std::runtime_error(origin + ": \"format\" is not \"" + std::string(kFormat) + "\"");
  if (!d.HasMember("version") || !d["version"].IsInt() || d["version"].GetInt() != kVersion)
    throw std::runtime_error(origin + ": \"version\" is not " + std::to_string(kVersion) +
                             " (a weights file of another version of assay)");
  if (!d.HasMember("features") || !d["features"].IsArray() || d["features"].Empty() ||
      d["features"].Size() > kClaimFeatureCount)
    throw std::runtime_error(origin + ": \"features\" must list 1 to " +
                             std::to_string(kClaimFeatureCount) + " feature names");
  ClaimSupportModel m;
  for (const auto& f : d["features"].GetArray()) {
    const std::string_view name =
        f.IsString() ? std::string_view(f.GetString(), f.GetStringLength()) : "";
    const auto* it = std::find(std::begin(kClaimFeatureNames), std::end(kClaimFeatureNames), name);
    if (it == std::end(kClaimFeatureNames))
      throw std::runtime_error(origin + ": \"features\"[" + std::to_string(m.feature.size()) +
                               "]: '" + logText(name, 60) + "' is not a claim_support feature");
    const auto index = static_cast<std::size_t>(it - std::begin(kClaimFeatureNames));
    if (std::find(m.feature.begin(), m.feature.end(), index) != m.feature.end())
      throw std::runtime_error(origin + ": feature '" + std::string(name) + "' is listed twice");
    m.feature.push_back(index);
  }
  const std::size_t n = m.feature.size();
  m.mean = numbers(d, "mean", n, origin);
  m.scale = numbers(d, "scale", n, origin);
  m.coef = numbers(d, "coef", n, origin);
  // Bounded so that the sum cannot overflow: the features are shares and logarithms (at most
  // about 30), a trained model's numbers a few units (the hostile trial's 1e308 means and
  // 5e-324 scales passed every other check and scored NaN).
  const auto bounded = [&](const std::vector<double>& v, const char* key, double lo, double hi) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!(std::abs(v[i]) >= lo && std::abs(v[i]) <= hi))
        throw std::runtime_error(origin + ": \"" + key + "\"[" + std::to_string(i) +
                                 "] is outside what a trained model holds (|x| " +
                                 (lo > 0 ? "from 1e-6 " : "") + "up to 1e6)");
  };
  bounded(m.mean, "mean", 0, 1e6);
  bounded(m.coef, "coef", 0, 1e6);
  for (std::size_t i = 0; i < n; ++i)
    if (!(m.scale[i] > 0))
      throw std::runtime_error(origin + ": \"scale\"[" + std::to_string(i) + "] is not above 0");
  bounded(m.scale, "scale", 1e-6, 1e6);
  if (!d.HasMember("intercept") || !d["intercept"].IsNumber() ||
      !std::isfinite(d["intercept"].GetDouble()))
    throw std::runtime_error(origin + ": \"intercept\" is missing or not a finite number");
  m.intercept = d["intercept"].GetDouble();
  if (std::abs(m.intercept) > 1e6)
    throw std::runtime_error(origin +
                             ": \"intercept\" is outside what a trained model holds "
                             "(|x| up to 1e6)");
  m.digest = XXH3_64bits(json.data(), json.size());
  return m;
}

ClaimSupportModel loadClaimSupportModel(const std::string& path) {
  std::string text;
  if (const auto why = readRegularFile(path, kMaxModelBytes, text); !why.empty())
    throw std::runtime_error(path + ": " + why);
  return parseClaimSupportModel(text, path);
}

const ClaimSupportModel& builtinClaimSupportModel() {
  static const ClaimSupportModel model =
      parseClaimSupportModel(builtinClaimSupportModelText(), "the built-in claim_support weights");
  return model;
}

}  // namespace assay
