#pragma once
/// Redaction of personal data and secrets before text leaves for a judge provider
/// (docs/configuration.md, "redact", with a table of what each detector covers and does not).
/// Detectors, each on by name:
///   email  addresses (local@domain.tld), internationalized ones included
///   phone  E.164 (+ and 8–15 digits, separators allowed) and national forms with a trunk 0
///          ("020 7946 0958", "06 12 34 56 78") or the NANP shape ("(555) 123-4567");
///          separators: spaces, dots, dashes, slashes, doubled
///   card   payment card numbers: 13–19 digits, spaces or dashes between, Luhn-checked
///          (ISO/IEC 7812-1 Annex B)
///   iban   IBANs: country, check digits, 11–30 alphanumerics grouped by spaces, dots or
///          dashes, ISO 13616 mod-97 == 1
///   ip     IPv4 dotted quads (leading zeros allowed), IPv6 addresses and IPv4-mapped IPv6
///          (checked with inet_pton)
///   token  bearer tokens, credential headers and keys (Authorization, X-Api-Key, api_key,
///          access_token, client_secret: the value after the name, its scheme and
///          credentials or up to the closing quote), PEM private keys, and common API-key shapes
///          (OpenAI sk-…, Anthropic sk-ant-…, Stripe sk_live_…, AWS AKIA…/ASIA…, GitHub gh?_… and
///          github_pat_…, Slack xox?-… and xapp-…, Google AIza… and ya29.…, GitLab glpat-…,
///          Hugging Face hf_…, npm npm_…, SendGrid SG.…, JWTs)
/// plus user patterns (name → RE2 regex). Matching is RE2 only (linear in the text whatever
/// the pattern, no backtracking); validators run on the match alone. The built-in detectors
/// match a normalized copy of the text (digits of every script as ASCII digits, every space
/// separator as a space, every dash as '-', full-width ASCII as ASCII, format characters such
/// as zero-width joiners and soft hyphens removed) and replace the original bytes the match
/// covers; user patterns match the text as written.
///
/// A match becomes a typed, numbered placeholder, `[EMAIL_1]`, `[PHONE_2]`, `[CARD_1]`,
/// `[IBAN_1]`, `[IP_1]`, `[TOKEN_1]`, `[NAME_1]` for a user pattern `name`. Numbers are
/// consistent within one Session (one event): the same value (normalised: e-mail in lower
/// case, phone and card digits only, IBAN without spaces) is the same placeholder in the
/// question, every context and the answer, so a judge can still tell whether the answer used
/// the context's value. Overlapping matches: the earliest wins, then the longest, then the
/// detector listed first above.

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/event.hpp"

namespace re2 {
class RE2;
}

namespace assay {

struct RedactOptions {
  std::vector<std::string> detectors;  ///< built-in detectors on, by name (list above)
  /// User patterns, name → RE2 regex, in configuration order; the name is the placeholder's
  /// type in upper case ([A-Za-z0-9_], 1–32 characters).
  std::vector<std::pair<std::string, std::string>> patterns;
  bool local_judges = false;  ///< the local (cheap) judges see redacted text too
  bool sinks = false;         ///< judgments' evidence is redacted before the sinks
};

/// The built-in detector names, in precedence order.
inline constexpr std::array<std::string_view, 6> kRedactDetectors = {"email", "card", "iban",
                                                                     "token", "ip",   "phone"};

/// Luhn checksum (ISO/IEC 7812-1): true when `digits` (only digits) is valid.
bool luhnValid(std::string_view digits);
/// ISO 13616 IBAN check: true when `iban` (letters and digits, no spaces) mod 97 is 1.
bool ibanValid(std::string_view iban);

class Redactor {
 public:
  /// Throws std::invalid_argument naming the detector or pattern for an unknown detector, an
  /// invalid regex or a bad name.
  explicit Redactor(const RedactOptions& options);
  ~Redactor();
  Redactor(const Redactor&) = delete;
  Redactor& operator=(const Redactor&) = delete;

  /// The detector labels, built-ins on first, then user patterns (for assay_redactions_total).
  const std::vector<std::string>& labels() const { return labels_; }
  const RedactOptions& options() const { return options_; }

  /// The numbering of one event. Not thread-safe; one per event.
  class Session {
   public:
    explicit Session(const Redactor& r) : r_(&r), counts_(r.labels_.size(), 0) {}
    /// `text` with every match replaced by its placeholder.
    std::string apply(std::string_view text);
    /// Matches replaced so far, per label (labels() order).
    const std::vector<std::size_t>& counts() const { return counts_; }

   private:
    const Redactor* r_;
    std::vector<std::size_t> counts_;
    std::map<std::pair<std::size_t, std::string>, std::size_t> numbers_;  // (label, value) → n
    std::vector<std::size_t> next_;  // per label: the last number given
  };

  /// The event's question, contexts (id, text and source), answer, reference and the custom
  /// rubrics' input fields through one session, in that order (numbers are given in reading
  /// order).
  Event redact(const Event& e, Session& s) const;

 private:
  struct Detector;
  RedactOptions options_;
  std::vector<std::string> labels_;
  std::vector<std::unique_ptr<Detector>> detectors_;
};

}  // namespace assay
