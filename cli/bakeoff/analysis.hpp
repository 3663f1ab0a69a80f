#pragma once
/// The statistics of a bakeoff (`assay bakeoff`, docs/bakeoff.md): several arms (prompts, models,
/// configurations) answer the same inputs; 2 or 3 judges score every arm's output side by side
/// (listwise), 0–100 per criterion, under labels A, B, C… assigned at random for every call.
/// This file holds what happens after the calls: the setup's limits, the labels' assignment and
/// mapping back, weighted scores, the consensus with its intervals, the judges' agreement and
/// the position audit. No I/O, no clock: the caller brings the random generator and the calls.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace assay::bakeoff {

/// Limits of one bakeoff (the issue's): 2–8 arms, 1–10 inputs, at most 40 cells (arms × inputs),
/// at most 10 criteria, 2 or 3 judges, 1 or 2 passes.
inline constexpr std::size_t kMinArms = 2, kMaxArms = 8, kMaxInputs = 10, kMaxCells = 40,
                             kMaxCriteria = 10, kMinJudges = 2, kMaxJudges = 3;

struct Criterion {
  std::string name;         ///< the key the judges' JSON uses, e.g. "relevance"
  std::string description;  ///< what the judge is told to look for
  double weight = 0;        ///< percent; the weights of a bakeoff sum to 100
};

/// relevance 30, completeness 25, clarity 20, accuracy 15, format 10.
std::vector<Criterion> defaultCriteria();

/// "" when valid; else one sentence: no criterion, more than kMaxCriteria, an empty or
/// repeated name, a weight outside (0, 100], or weights that do not sum to 100 (naming every
/// criterion with its weight and the sum, e.g. "weights must sum to 100: relevance 30 +
/// completeness 25 + clarity 20 + accuracy 15 + format 5 = 95").
std::string criteriaProblem(const std::vector<Criterion>& criteria);

/// "" when valid; else why: arms outside [2, 8], inputs outside [1, 10], arms × inputs above
/// 40 (naming the product), judges outside [2, 3], passes outside [1, 2].
std::string sizeProblem(std::size_t arms, std::size_t inputs, std::size_t judges,
                        std::size_t passes);

/// Label of position i: "A", "B", … ("H" for the 8th).
std::string label(std::size_t position);

/// A fresh random order for one call: order[position] = the arm shown at that position (under
/// label(position)). A uniform permutation of 0..arms−1 (Fisher–Yates through
/// std::shuffle).
std::vector<std::size_t> randomOrder(std::size_t arms, std::mt19937_64& rng);
/// The same order, reversed (a second pass shows the last arm first).
std::vector<std::size_t> reversed(std::vector<std::size_t> order);

/// One judge call as it came back, already validated against the call's JSON schema: scores
/// 0–100 keyed by label and by criterion name, mapped back to arms with the call's own order.
struct Call {
  std::size_t judge = 0, input = 0, pass = 0;
  std::vector<std::size_t> order;  ///< order[position] = arm, as shown in this call
  /// scores[arm][criterion] in [0, 100], criteria in the setup's order (mapBack fills it).
  std::vector<std::vector<double>> scores;
};

/// Maps one reply's scores by label (label_scores[position][criterion], read from the JSON
/// object keyed by label) to arms: scores[order[position]] = label_scores[position]. Throws
/// std::invalid_argument when the sizes disagree with the order.
std::vector<std::vector<double>> mapBack(const std::vector<std::size_t>& order,
                                         const std::vector<std::vector<double>>& label_scores);

/// Σ weight_c × score_c / 100: an arm's weighted score, 0–100.
double weightedScore(const std::vector<double>& scores, const std::vector<Criterion>& criteria);

enum class Level { kHigh, kModerate, kLow };
/// high (tau ≥ 0.7), moderate (≥ 0.4), low.
Level levelOf(double tau);
const char* levelName(Level level);

struct PairAgreement {
  std::size_t judge_a = 0, judge_b = 0;
  std::optional<std::size_t> input;     ///< nullopt: overall (the judges' mean scores per arm)
  std::optional<double> kendall_tau_b;  ///< nullopt when a judge gave every arm the same score
  std::optional<double> spearman_rho;   ///< ±1 over 2 arms; nullopt when a judge tied every arm
  std::optional<Level> level;           ///< from tau-b
};

struct ArmSummary {
  double mean = 0;  ///< the consensus score (weighted, averaged over judges) averaged over inputs
  std::optional<double> low, high;  ///< its 95 % interval over inputs: Student's t, n − 1 df,
                                    ///< cut to [0, 100]; nullopt with one input
  std::size_t wins = 0;             ///< inputs where its consensus score was the highest
  std::size_t ties = 0;             ///< inputs where it shared the highest score
};

struct PairDifference {
  std::size_t arm_a = 0, arm_b = 0;
  bool overlap = false;  ///< the intervals overlap: "no significant difference"
};

struct PositionAudit {
  std::size_t judge = 0;
  std::size_t calls = 0;        ///< calls with a single first place
  std::size_t first_shown = 0;  ///< of them, won by the output shown first (label A)
  double share = 0;             ///< first_shown / calls; healthy near 1 / arms
  double p_value = 1;    ///< exact two-sided binomial test against 1 / arms (scipy.binomtest)
  bool flagged = false;  ///< p_value < 0.05
  /// passes: 2 only: (input) pairs whose first place differs between the two passes (orders
  /// reversed): position noise, not signal.
  std::size_t flips = 0;
};

struct Analysis {
  /// consensus[input][arm]: the weighted score averaged over judges and passes.
  std::vector<std::vector<double>> consensus;
  std::vector<ArmSummary> arms;
  /// The judges the position audit flagged that the consensus leaves out (exclude_biased, and
  /// at least one judge not flagged); empty otherwise.
  std::vector<std::size_t> excluded;
  /// With a flagged judge, the other view of the consensus (its arms' means and intervals):
  /// without the flagged judges when they are in the main one, with them when they were
  /// excluded. Empty when no judge is flagged (or every one is).
  std::vector<ArmSummary> arms_other_view;
  std::vector<PairDifference> differences;  ///< every two arms
  std::vector<PairAgreement> agreement;     ///< every two judges, per input then overall
  std::vector<PositionAudit> audit;         ///< per judge
  bool student_t = false;  ///< intervals use Student's t (always; said in the report below 30)
  std::size_t inputs_with_position_noise = 0;  ///< inputs whose winner flipped for some judge
  /// judged[input]: some judge scored every arm of it (else its consensus row is all 0 and it is
  /// left out of the means, intervals and wins).
  std::vector<bool> judged;
  std::size_t inputsJudged() const {
    return static_cast<std::size_t>(std::count(judged.begin(), judged.end(), true));
  }
};

/// Everything above from the calls. Every (judge, input, pass) should have one call; a missing
/// one (a call that failed) is left out of the averages. `exclude_biased`: the judges the
/// position audit flags leave the consensus (not when every judge is flagged). Throws
/// std::invalid_argument when a call's sizes disagree with `arms` and `criteria`.
Analysis analyze(std::size_t arms, std::size_t inputs, std::size_t judges,
                 const std::vector<Criterion>& criteria, const std::vector<Call>& calls,
                 bool exclude_biased = false);

}  // namespace assay::bakeoff
