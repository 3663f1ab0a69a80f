#pragma once
/// Unicode-aware word tokenisation shared by every lexical judge.
///
/// Rules (UTF-8 in, UTF-8 tokens out):
///  - letters, digits and combining marks form words; every other code point separates;
///  - words are lower-cased (ICU simple case mapping, `u_tolower`);
///  - Han ideographs, Hiragana, Katakana and Bopomofo are one token per character, spaced or
///    not ("会议改到周三" → 6 tokens), as ROUGE/BLEU for Chinese and Japanese usually count;
///  - an apostrophe between two letters is dropped and the word goes on ("don't" → "dont",
///    SQuAD-style punctuation removal), except after a French elided word, where it splits
///    ("l'école" → "l" "école", "qu'il" → "qu" "il");
///  - inside a number, a "," or "." between two digits does not split it: the comma (a
///    thousands separator) is dropped, the period (a decimal point) kept: "1,250" → "1250",
///    "3.5" → "3.5" (so a figure stays one token and can be compared as such).
/// Invalid UTF-8 sequences are treated as separators (events are validated upstream).
///
/// Threads: every function here may run on many threads at once. The scratch buffers behind
/// `cachedWords`, `scratchWords`, `tokenize` and `tokenizeDetailed` are thread_local, so a
/// reference they return belongs to the calling thread and must not be handed to another.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace assay {

/// The lower-cased tokens of a text in one buffer, as the lexical judges use them: token i is
/// `chars[i == 0 ? 0 : ends[i-1], ends[i])`, `hashes[i]` its XXH3-64, `flags[i]` the Token
/// flags below (kNumeric…), `spans[i]` its byte range [begin, end) in the source text.
/// Kept across calls (`clear()` keeps the capacity), tokenizing allocates nothing once warm;
/// compare two tokens with `same()` (hash first, bytes only when the hashes are equal).
/// Several `tokenizeInto` calls on one Words append: the spans are then offsets in the text
/// each token came from. The hash is the unseeded `XXH3_64bits` of the token's bytes.
struct Words {
  static constexpr std::uint8_t kNumeric = 1, kCapitalized = 2, kSentenceStart = 4, kCjk = 8;

  std::string chars;
  std::vector<std::uint32_t> ends;
  std::vector<std::uint64_t> hashes;
  std::vector<std::uint8_t> flags;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;

  /// Number of tokens.
  std::size_t size() const { return ends.size(); }
  bool empty() const { return ends.empty(); }
  /// Token i's bytes (i < size(), unchecked); a view into `chars`, valid until it changes.
  std::string_view operator[](std::size_t i) const {
    const std::uint32_t b = i == 0 ? 0 : ends[i - 1];
    return {chars.data() + b, ends[i] - b};
  }
  /// Whether token i equals token j of `other` (both in range, unchecked).
  bool same(std::size_t i, const Words& other, std::size_t j) const {
    return hashes[i] == other.hashes[j] && (*this)[i] == other[j];
  }
  /// Removes every token, keeping the buffers' capacity.
  void clear();
  /// Appends one non-empty token given as text, with flags 0 and span (0, 0): for callers that
  /// hold tokens already (the string-list overloads of the judges' functions).
  void push(std::string_view token);
  /// The same with the token's XXH3-64 already known.
  void push(std::string_view token, std::uint64_t hash);
  /// Empties the Words and frees its buffers when their capacity is above about `max_bytes`
  /// (chars plus 23 bytes a token): a thread's scratch after a huge event. The tokens are lost.
  void shrinkIfAbove(std::size_t max_bytes);
};

/// Appends the tokens of `text` (the rules above) to `out`. With `skip_citation_markers`, a
/// citation marker (`citationMarkerLength`) separates words as a space would, the same tokens
/// as `tokenize(stripCitationMarkers(text))` without the copy; spans stay in `text`'s offsets.
/// Only the first 2^31 − 1 bytes of a longer text are read, silently (events are bounded far
/// below by limits.max_event_bytes).
void tokenizeInto(std::string_view text, Words& out, bool skip_citation_markers = false);

/// The tokens of `text` (markers skipped or not), from the calling thread's one-entry cache per
/// `slot` (0: a reference, 1: an answer; any other value throws std::out_of_range): the
/// lexical judges of one event run one after the other on one worker and each asks for the
/// same texts, tokenized once. The entry is keyed by the text's bytes (the cache keeps a copy,
/// freed above 1 MiB) and `skip_citation_markers`, never by an address. The returned Words is
/// the slot's own: the thread's next call with `slot` may refill it in place.
const Words& cachedWords(std::string_view text, bool skip_citation_markers, int slot);

/// The calling thread's reusable Words number `slot`, cleared (and freed first when above
/// 1 MiB): 0..2 for the texts one function compares; 3 is tokenize()'s and tokenizeDetailed()'s
/// own, so a caller holding slot 3 must not call them; other values throw std::out_of_range.
/// The thread's next call with `slot` clears it again.
Words& scratchWords(int slot);

struct Token {
  std::string text;          ///< lower-cased
  bool numeric = false;      ///< contains a digit ("2019", "3.5", "5g")
  bool capitalized = false;  ///< first letter upper/title-case in the source text
  /// First word of the text or after . ! ? : or a newline. A word-level hint for the name
  /// weight of context_overlap, looser than `sentenceSpans`, which splits claims.
  bool sentence_start = false;
  bool cjk = false;       ///< a single Han, Hiragana, Katakana or Bopomofo character
  std::size_t begin = 0;  ///< byte offset of the token's first code point in the source
  std::size_t end = 0;    ///< byte offset just past its last code point
};

/// Tokens with the flags above (citation markers are not skipped: strip them first); used by
/// claim_support. Uses scratch slot 3.
std::vector<Token> tokenizeDetailed(std::string_view text);

/// Lower-cased token strings only (citation markers not skipped); for tests and callers that
/// want strings. The judges use `cachedWords` / `tokenizeInto`. Uses scratch slot 3.
std::vector<std::string> tokenize(std::string_view text);

/// Replaces citation markers — brackets of at most 22 bytes inside, holding a digit and only
/// letters, digits, ',', ';', '-', '_' and spaces: "[1]", "[2, 3]", "[doc-7]" — by a space.
/// They point at a context; they are not words of the answer. A redaction placeholder
/// ("[EMAIL_1]": upper-case letters, digits and '_', ending in '_' and a number) is no marker.
std::string stripCitationMarkers(std::string_view text);

/// Length in bytes, brackets included, of the citation marker (as above) that starts at byte
/// `at`; 0 when `text[at]` is not the '[' of one, or `at` is past the end.
std::size_t citationMarkerLength(std::string_view text, std::size_t at);

/// The sentences of `text` as byte ranges [begin, end), in order, back to back over the text
/// except that a range holding only white space is not returned.
/// A sentence ends after . ! ? followed by white space (closing quotes, brackets and citation
/// markers right after the mark stay with it: "… 40 euros [1]. Next"), unless the period
/// follows an abbreviation ("e.g.", "U.S.", "Dr.", a capital letter: an initial) or the
/// next word starts in lower case; after 。！？ always. A colon or a line break ends none: a
/// list's lead-in and its items stay one sentence, as claim annotators split them (ExpertQA).
std::vector<std::pair<std::size_t, std::size_t>> sentenceSpans(std::string_view text);

/// Lower-cases every code point (ICU simple case mapping); invalid bytes are copied as they are.
std::string toLowerUtf8(std::string_view text);

/// True for English and French function words ("the", "of", "le", "des"…) that carry no content.
bool isStopword(std::string_view lowered_token);
/// The same test for a token of `Words`: `hash` must be its `hashes[i]` (the unseeded
/// XXH3_64bits of `lowered_token`), which spares hashing again; the bytes are still compared.
bool isStopword(std::uint64_t hash, std::string_view lowered_token);

/// Number of Unicode code points in `text`: bytes that are not UTF-8 continuation bytes
/// (exact for valid UTF-8; events are validated upstream).
std::size_t codepointCount(std::string_view text);

/// True when `text` holds only Unicode white space (or nothing).
bool isBlank(std::string_view text);
}  // namespace assay
