#include "daemon/log_setup.hpp"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace assay {
namespace {

/// sd-daemon(3) priorities: 7 debug … 2 critical.
int priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;
    case spdlog::level::info:
      return 6;
    case spdlog::level::warn:
      return 4;
    case spdlog::level::err:
      return 3;
    default:
      return 2;
  }
}

/// "%*": the "<N>" prefix journald reads as the line's priority.
class PriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char prefix[] = {'<', static_cast<char>('0' + priority(msg.level)), '>'};
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

/// {"ts":"2026-11-30T23:59:59.123Z","level":"warning","msg":"..."}: RFC 3339 UTC time,
/// spdlog's level name, the message JSON-escaped (RapidJSON), one object per line.
class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto t = std::chrono::system_clock::to_time_t(msg.time);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[96];  // ample for any int fields (g++ checks the worst case)
    std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms));
    rapidjson::StringBuffer out;
    rapidjson::Writer<rapidjson::StringBuffer> w(out);
    w.StartObject();
    w.Key("ts");
    w.String(ts);
    w.Key("level");
    const auto level = spdlog::level::to_string_view(msg.level);
    w.String(level.data(), static_cast<rapidjson::SizeType>(level.size()));
    w.Key("msg");
    w.String(msg.payload.data(), static_cast<rapidjson::SizeType>(msg.payload.size()));
    w.EndObject();
    dest.append(out.GetString(), out.GetString() + out.GetSize());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> logFormatter(const std::string& format, bool journal) {
  if (format == "json") return std::make_unique<JsonFormatter>();
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (journal) {
    f->add_flag<PriorityFlag>('*').set_pattern("%*%l %v");
  } else {
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  }
  return f;
}

bool stderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long device = 0, inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  struct stat st {};
  return ::fstat(STDERR_FILENO, &st) == 0 && static_cast<unsigned long long>(st.st_dev) == device &&
         static_cast<unsigned long long>(st.st_ino) == inode;
}

}  // namespace assay
