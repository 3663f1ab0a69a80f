#include "judges/log_text.hpp"

#include <doctest/doctest.h>

using namespace assay;

TEST_CASE("logText: an event cannot forge a log line or repaint a terminal") {
  CHECK(logText("plain text, café") == "plain text, café");
  CHECK(logText("id\n2026-11-30T00:00:00 critical forged") ==
        "id\\x0a2026-11-30T00:00:00 critical forged");
  CHECK(logText("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m");
  CHECK(logText("a\\nb") == "a\\\\nb");  // a backslash in the text is not an escape
  CHECK(logText(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(logText(std::string(300, 'k'), 64) == std::string(64, 'k') + "…");
  std::string euros;
  for (int i = 0; i < 30; ++i) euros += "\u20ac";  // 3 bytes each: cut at 63, not inside one
  CHECK(logText(euros, 64) == euros.substr(0, 63) + "…");
}
