#pragma once
/// The learned combination of claim_support's features (claim_support.hpp, kClaimFeatureNames):
/// a logistic regression fitted by scripts/train_claim_support (scikit-learn's
/// LogisticRegression, lbfgs, on standardised features) on the train events, its features and
/// regularisation chosen on the dev events (docs/claim-support.md, "The learned combination"):
///   P(hallucinated) = σ(intercept + Σ coef_i · (x_i − mean_i) / scale_i),   score = 1 − P
/// in [0, 1] (σ the logistic function), so that a higher score is a more faithful answer, as
/// with every faithfulness judge.
///
/// The weights file (JSON, at most 64 KiB): {"format": "assay-claim-support-model",
/// "version": 1, "features": [NAME…], "mean": [x…], "scale": [x…], "coef": [x…],
/// "intercept": x, "trained": {…provenance, not read…}}. Every NAME is one of
/// kClaimFeatureNames, each at most once, 1 to kClaimFeatureCount of them; the four arrays have
/// one finite number per feature, every scale > 0. A file that is missing, truncated, not
/// JSON, of another format or version, or with a NaN, an infinity or a wrong count is refused
/// whole (never half a model) with its path and the reason.
/// The built-in model (judges/data/claim_support_weights.json) is compiled in and checked the
/// same way on first use; tests/judges/claim_support_model_test pins its digest.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "judges/claim_support.hpp"

namespace assay {

struct ClaimSupportModel {
  std::vector<std::size_t> feature;  ///< indexes into kClaimFeatureNames
  std::vector<double> mean, scale, coef;
  double intercept = 0;
  std::uint64_t digest = 0;  ///< XXH3_64 of the file's bytes

  /// 1 − P(hallucinated) for these features, in [0, 1].
  double score(const std::array<double, kClaimFeatureCount>& x) const;
};

/// Parses a weights file's text; `origin` (its path) starts every error message. Throws
/// std::runtime_error("ORIGIN: reason").
ClaimSupportModel parseClaimSupportModel(std::string_view json, const std::string& origin);

/// Reads and parses the weights file at `path` (a regular file of at most 64 KiB). Throws
/// std::runtime_error("PATH: reason").
ClaimSupportModel loadClaimSupportModel(const std::string& path);

/// The built-in model's text, and the model (parsed once; a broken built-in file fails the
/// build's tests, and throws here).
std::string_view builtinClaimSupportModelText();
const ClaimSupportModel& builtinClaimSupportModel();

}  // namespace assay
