#pragma once
/// assayd's log: stderr, as `log.format` says (config/options.hpp, LogOptions).

#include <spdlog/formatter.h>

#include <memory>
#include <string>

namespace assay {

/// The formatter of `format` ("text" or "json"); `journal`: stderr goes to systemd's journal
/// (text then carries "<N>" priority prefixes and no time).
std::unique_ptr<spdlog::formatter> logFormatter(const std::string& format, bool journal);

/// True when stderr is the journal: JOURNAL_STREAM ("DEVICE:INODE") names stderr's file
/// (systemd.exec(5)).
bool stderrIsJournal();

}  // namespace assay
