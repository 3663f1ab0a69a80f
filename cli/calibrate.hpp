#pragma once
/// `assay calibrate` (issue 4): how well a judge's scores agree with human scores on the same
/// items, and how well the humans agree with each other, from a CSV or JSON Lines file of
/// (item, judge score, human scores…). Prints n, Spearman's rho with its p-value, Kendall's tau-b,
/// the exact agreement rate and Cohen's kappa judge–human, Cohen's kappa between annotators, the
/// score distributions (the daemon's ScoreWindow summary), and a verdict in words: "usable",
/// "rework the rubric", "too lenient" (several may apply) or "insufficient data".
///
/// Every statistic comes from judges/stats (stats.hpp, window.hpp), the code the daemon uses;
/// golden values: scipy.stats / sklearn.metrics (tests/golden/calibrate_golden.py, agreement to
/// 1e-9). docs/calibration.md describes the input formats, the options, the output and the
/// verdict rules with their sources.
///
/// Definitions:
/// - per item: the judge's score against the mean of the item's human scores (n = items); this
///   is the correlation the verdict uses. Per annotation: the judge's score against every human
///   score, the judge's score repeated (n = annotations).
/// - exact agreement and judge–human kappa: per annotation (judge score == human score).
/// - annotator kappa (verdict): wide format, the mean of Cohen's kappa over every pair of human
///   columns (Light's kappa, Light 1971), each pair over the items both rated; long format, the
///   first against the second annotation of every item with two or more, annotators ordered by
///   name (byte order).
/// - kappa treats scores as categories; the quadratic weights are (i − j)² over the positions of
///   the categories (sklearn's cohen_kappa_score), not over the scores' distances.

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tracking/stats.hpp"
#include "tracking/window.hpp"

namespace assay {

/// A fatal problem: bad arguments, an unreadable file, a missing column, an item key that is
/// not unique, no usable row. The message is for the user (it names FILE:LINE where there is
/// one); the exit code is 2. Problems confined to one row skip that row instead.
class CalibrateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class CalibrateFormat { kAuto, kCsv, kJsonl };

struct CalibrateOptions {
  std::string input_path;
  /// kAuto: .jsonl, .ndjson and .json files are JSON Lines, anything else CSV.
  CalibrateFormat format = CalibrateFormat::kAuto;
  /// Columns (CSV header names or top-level JSON keys) whose values, joined, name the item.
  /// Empty: {"item"}; in wide format, when the file has no `item` column, each row is its own
  /// item.
  std::vector<std::string> item_columns;
  std::string judge_column = "judge_score";
  /// Wide format: one column per annotator; long format: exactly one, the annotator's score.
  /// Empty: every column whose name starts with "human" other than the item, judge and
  /// annotator columns (JSON Lines: the keys of all objects, in order of first appearance).
  std::vector<std::string> human_columns;
  /// Non-empty: long format, one row per (item, annotator), this column naming the annotator.
  std::string annotator_column;
  /// Non-empty: the values are these strings, mapped to the ordinal scores 1..k in this order
  /// (at least 2, distinct); the scale is then 1..k. Empty: the values must be numbers.
  std::vector<std::string> levels;
  /// The scale; nullopt = the smallest / largest value in the file (not allowed with levels).
  /// Rows with a value outside the scale are skipped.
  std::optional<double> min_score, max_score;
  /// Set by loadWithJudgments when the scale is the judge's own (no --min-score/--max-score):
  /// a human score outside it is then an error saying how to map the scales, never a row
  /// skipped (0..1 labels against a 1..4 judge kept only the rows labelled 1).
  bool scale_of_judge = false;
  double leniency_max_ratio = 0.8;  ///< tracking.leniency_max_ratio, [0, 1]
  std::size_t min_samples = 100;    ///< tracking.min_samples: fewer items, no leniency verdict

  /// `--judgments FILE`: the judge's scores come from assayd's judgments file (docs/events.md,
  /// "Output"; the last judgment of each id, as `assay report` reads it) instead of a column;
  /// judge_column is then the judge's name (`--judge NAME`, required), an item is an event id,
  /// and the scale defaults to the judge's own (the verdicts' min and max). The human scores
  /// come from exactly one of events_path, feedback_path or input_path.
  std::string judgments_path;
  /// `--events FILE`: JSON Lines events; every --human is a JSON Pointer to a number in them
  /// (wide format, one column per pointer; default /labels/CRITERION, the judge's criterion).
  std::string events_path;
  /// `--feedback FILE`: feedback events (docs/events.md); the annotations of the judge's
  /// criterion, one per (id, annotator) (long format).
  std::string feedback_path;
  /// `--judge-version V`: only the judge's verdicts of this judge_version; without it (and
  /// without across_versions) verdicts of more than one version are an error naming them.
  std::string judge_version;
  /// `--across-versions`: pool the verdicts of every version of the judge.
  bool across_versions = false;
};

/// Parses the arguments after `assay calibrate` (flags in docs/calibration.md). Throws
/// CalibrateError naming the bad argument; --input is required, or --judgments with --judge
/// and one of --events, --feedback, --input.
CalibrateOptions parseCalibrateArgs(const std::vector<std::string>& args);

/// One CSV record: the (1-based) line it starts on and its fields, unquoted.
struct CsvRecord {
  std::size_t line = 0;
  std::vector<std::string> fields;
};

/// RFC 4180 CSV: comma-separated fields; a field in double quotes may hold commas, line breaks
/// and doubled quotes ("" = "); records end with LF or CRLF (the last may lack it). Lenient
/// like Python's csv module: characters after a closing quote are appended, a quote inside an
/// unquoted field is literal. A UTF-8 byte-order mark is dropped; empty lines are skipped.
/// Throws CalibrateError "line N: quoted field not closed" when the text ends inside quotes.
std::vector<CsvRecord> parseCsv(std::string_view text);

struct Annotation {
  std::string annotator;  ///< wide: the human column's name; long: the annotator column's value
  double score = 0;
};

struct CalibrationItem {
  std::string key;                 ///< the item columns' values joined with ','; "line N" when the
                                   ///< rows are the items
  std::size_t line = 0;            ///< of its first row
  double judge = 0;                ///< on the scale (levels: 1..k)
  std::vector<Annotation> humans;  ///< ≥ 1; wide: in column order; long: ordered by annotator
};

/// The usable content of an input file.
struct CalibrationData {
  std::string source;  ///< the file name in messages
  CalibrateFormat format = CalibrateFormat::kCsv;
  bool long_format = false;
  /// As resolved (defaults applied); item_columns empty when the rows are the items.
  std::vector<std::string> item_columns;
  std::string judge_column;
  std::vector<std::string> human_columns;
  std::string annotator_column;
  std::vector<std::string> levels;
  double min_score = 0, max_score = 0;  ///< the scale
  std::vector<CalibrationItem> items;   ///< in order of first appearance
  std::size_t rows_read = 0;            ///< non-empty records after the header / non-empty lines
  std::size_t rows_used = 0;
  /// From a judgments file (CalibrateOptions::judgments_path); empty otherwise.
  std::string judgments_source;
  std::string judge_criterion;  ///< the judge's criterion in the judgments
  std::string judge_versions;   ///< its judge_versions read ("unversioned" for none)
  std::size_t judged = 0;       ///< ids the judge has a verdict for (scored or not)
  std::size_t scored = 0;       ///< …of which with a score
  /// Rows (events, annotations, table rows) of ids the judge has no verdict for (not sampled,
  /// the judge's rate or run_if): left out, neither read nor skipped.
  std::size_t not_judged = 0;
  std::vector<std::string> input_notes;  ///< other rows left out, in words
  /// One message per skipped row, in line order: "FILE:LINE: column 'x': 'n/a' is not a
  /// number", "… is empty", "… is not one of the levels (…)", "… is outside the scale 1..4",
  /// "FILE:LINE: 3 fields, the header has 6", "FILE:LINE: no human score", "FILE:LINE: not a
  /// JSON object".
  std::vector<std::string> skipped;
};

/// Reads `text` in `format` (kCsv or kJsonl; kAuto is taken from options.input_path) under
/// `options` (input_path unused otherwise); `source` names the file in messages. Throws
/// CalibrateError on fatal problems: a column/key absent from the header/every object, no human
/// column, an unclosed quote, an item key seen twice (wide) or an annotator twice for one item
/// (long), an item whose rows disagree on the judge's score (long; the message names both
/// lines), or no usable row.
CalibrationData parseCalibrationInput(std::string_view text, CalibrateFormat format,
                                      const CalibrateOptions& options, const std::string& source);

/// Reads options.input_path and calls parseCalibrationInput; with options.judgments_path, reads
/// the judge's scores from it and the human scores from the events, feedback or input file.
/// Throws CalibrateError when a file cannot be read, the judgments hold no verdict of the judge,
/// or as parseCalibrationInput.
CalibrationData loadCalibrationInput(const CalibrateOptions& options);

/// Spearman and Kendall between two vectors; a statistic that is undefined (too few values, a
/// constant vector) is nullopt with the reason in words.
struct CorrelationStat {
  std::size_t n = 0;
  std::optional<stats::Correlation> spearman;
  std::string spearman_undefined;
  std::optional<double> kendall_tau_b;
  std::string kendall_undefined;
};

/// Cohen's kappa (unweighted and quadratic) between two raters over n common items, and their
/// exact agreement. kappa and quadratic are nullopt (reason in `undefined`) when n = 0 or both
/// raters used one and the same category only.
struct KappaStat {
  std::size_t n = 0;
  std::size_t agreements = 0;  ///< items rated the same
  std::optional<double> kappa, quadratic;
  std::string undefined;
};

struct AnnotatorPair {
  std::string a, b;  ///< wide: column order; long: a < b by name
  KappaStat kappa;
};

struct ScoreDistribution {
  /// Every value shown, ascending: all levels; all integers of an integer scale of up to 11
  /// values; otherwise the values that occur, or, when judge and humans together have more
  /// than 12 distinct values, 10 equal bins of the scale keyed by their lower bound (bin_width
  /// > 0; the last bin includes the maximum). Counts may be 0.
  std::vector<std::pair<double, std::size_t>> counts;
  double bin_width = 0;  ///< > 0: counts are bins [v, v + bin_width)
  /// stats::ScoreWindow over all the scores on the scale (nullopt when there is none).
  std::optional<stats::WindowSummary> summary;
};

/// The verdict's thresholds. The daemon's tracking options give the first two.
struct CalibrationThresholds {
  double leniency_max_ratio = 0.8;  ///< too lenient: the judge's top-score share exceeds it…
  std::size_t min_samples = 100;    ///< …over at least this many items
  double min_kappa = 0.6;     ///< rework the rubric: annotator kappa below (Landis & Koch 1977:
                              ///< 0.61 begins "substantial"; McHugh 2012: < 0.60 inadequate)
  double min_spearman = 0.5;  ///< rework the rubric: per-item Spearman below…
  double alpha = 0.05;        ///< …or its p-value at least this
  std::size_t min_pair_items = 20;  ///< long format: annotator pairs listed from this many items
  std::size_t max_pairs_listed = 5;
};

struct CalibrationResult {
  std::size_t items = 0, annotations = 0;
  std::size_t multi_annotated = 0;  ///< items with two or more annotations
  std::size_t annotators = 0;       ///< distinct annotators (wide: human columns)
  CorrelationStat per_item;         ///< judge vs the mean human score of each item
  CorrelationStat per_annotation;   ///< judge vs each human score
  KappaStat judge_human;            ///< per annotation: exact agreement and kappa
  /// Long format: first vs second annotation (annotators by name) of the multi-annotated items.
  KappaStat first_second;
  /// Wide: every pair of human columns, in column order. Long: the pairs sharing at least
  /// min_pair_items items, most shared first (ties: names).
  std::vector<AnnotatorPair> pairs;
  /// Long: the pair sharing the most items (ties: names), nullopt when no item has two
  /// annotations; its kappa is not computed.
  std::optional<AnnotatorPair> most_shared;
  /// The verdict's annotator kappa (wide: Light's kappa over the pairs whose kappa is defined;
  /// long: first_second.kappa); nullopt with the reason when undefined.
  std::optional<double> annotator_kappa;
  std::string annotator_kappa_undefined;
  ScoreDistribution judge;   ///< one score per item
  ScoreDistribution humans;  ///< one score per annotation
  /// Each of "too lenient", "rework the rubric", "insufficient data" (per-item Spearman
  /// undefined) that applies, in that order; {"usable"} when none does.
  std::vector<std::string> verdicts;
  std::vector<std::string> reasons;  ///< one line per rule that fired (or why usable)
  std::vector<std::string> notes;    ///< rules that could not be assessed, and why
};

/// Pure computation on parsed data (data.items must not be empty).
CalibrationResult computeCalibration(const CalibrationData& data,
                                     const CalibrationThresholds& thresholds = {});

/// Prints the report: the input, counts, judge vs humans, annotator agreement, distributions,
/// the verdict with its reasons and the rules. An undefined statistic prints "undefined
/// (reason)".
void printCalibration(const CalibrationData& data, const CalibrationResult& result,
                      const CalibrationThresholds& thresholds, std::ostream& out);

/// `assay calibrate`: loads, computes and prints to `out`; skipped rows (count and the first
/// five) and fatal errors go to `err`. Returns 0, or 2 on a fatal error (CalibrateError).
int runCalibrate(const CalibrateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace assay
