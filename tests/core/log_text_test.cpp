#include "core/log_text.hpp"

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

TEST_CASE("safeUrl: no credentials from a URL reach a log line") {
  CHECK(safeUrl("https://api.openai.com/v1") == "https://api.openai.com/v1");
  CHECK(safeUrl("https://u:p4ss@h.example/v1?api-key=k3y&api-version=2024-06-01") ==
        "https://***@h.example/v1?api-key=***&api-version=***");
  CHECK(safeUrl("http://h:8080/openai/deployments/x?flag") ==
        "http://h:8080/openai/deployments/x?flag");
  CHECK(safeUrl("http://tok3n@h") == "http://***@h");
  CHECK(safeUrl("user:pw@broker:9092") == "***@broker:9092");
  CHECK(safeUrl("https://h/v1?key=a\nb") == "https://h/v1?key=***");
  CHECK(safeUrl("https://h/p\x1b[31m") == "https://h/p\\x1b[31m");  // logText's escapes
  // A key pasted where the port goes, or after '?' without a name, is masked; ports and short
  // flags are not.
  CHECK(safeUrl("https://api.openai.com:sk-proj-abc123/v1") == "https://api.openai.com:***/v1");
  CHECK(safeUrl("https://h:443/v1") == "https://h:443/v1");
  CHECK(safeUrl("http://[::1]:8080/v1") == "http://[::1]:8080/v1");
  CHECK(safeUrl("http://[2001:db8::1]/v1") == "http://[2001:db8::1]/v1");
  CHECK(safeUrl("https://u:p@h:s3cret") == "https://***@h:***");
  CHECK(safeUrl("https://h/v1?sk-proj-0123456789abcdef&x") == "https://h/v1?***&x");
  // A fragment, and a password holding '?' or '#' (hostile trial).
  CHECK(safeUrl("https://h/v1#key=SECRET") == "https://h/v1#***");
  CHECK(safeUrl("https://h/v1?a=1#SECRET") == "https://h/v1?a=***#***");
  CHECK(safeUrl("https://u:ab?cdef@h/v1") == "https://***@h/v1");
  CHECK(safeUrl("https://u:ab#cdef@h") == "https://***@h");
}
