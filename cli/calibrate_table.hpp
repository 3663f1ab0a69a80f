#pragma once
/// Internals of `assay calibrate` shared by its two inputs (calibrate.cpp: a CSV or JSON Lines
/// table; calibrate_judgments.cpp: assayd's judgments file with human scores from an events,
/// feedback or table file). Every input becomes a Table, which fillFromTable turns into
/// CalibrationData with the same rules (columns, skipped rows, scale, items).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli/calibrate.hpp"

namespace assay::calibrate_detail {

/// One cell of a table: absent (missing CSV field content, JSON null or absent key), a value's
/// text, or a JSON object/array.
struct Cell {
  bool present = false;
  bool scalar = true;
  std::string text;
};

struct Record {
  std::size_t line = 0;
  std::vector<Cell> cells;  ///< one per column (when error is empty)
  std::string error;        ///< the row cannot be used at all (the reason, without FILE:LINE)
};

struct Table {
  bool csv = true;
  std::size_t header_line = 1;
  std::vector<std::string> columns;
  std::vector<Record> records;
};

/// kAuto: from the extension of `path` (.jsonl, .ndjson, .json: JSON Lines; otherwise CSV).
CalibrateFormat resolveFormat(CalibrateFormat format, const std::string& path);

/// A CSV (header line, then records) or JSON Lines (keys as columns) text as a table. Throws
/// CalibrateError on an empty file or an unclosed quote.
Table parseTable(std::string_view text, CalibrateFormat format, const std::string& source);

/// The whole file; CalibrateError "cannot read 'PATH' (not a readable file)".
std::string readInputFile(const std::string& path);

/// Resolves the columns of `options` in `table`, turns every record into a row or a skip
/// message (d.source:LINE: reason), applies the scale and groups the rows into items. `d`
/// carries source and format (and, from a judgments file, what it knows about the judge).
/// Throws CalibrateError as parseCalibrationInput.
void fillFromTable(const Table& table, const CalibrateOptions& options, CalibrationData& d);

/// `--judgments FILE --judge NAME` with `--events`, `--feedback` or `--input`
/// (calibrate_judgments.cpp).
CalibrationData loadWithJudgments(const CalibrateOptions& options);

}  // namespace assay::calibrate_detail
