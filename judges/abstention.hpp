#pragma once
/// Abstentions: an answer, or a sentence of it, that declines ("I don't know", "I'm not sure"),
/// or says that the retrieved contexts do not cover the question ("Not stated in the
/// documents.", "The provided context does not mention …", "Le contexte ne précise pas …").
/// A faithfulness judge does not score an abstention as a low faithfulness: it asserts nothing,
/// so nothing in it can be unfaithful, and a cascade gate (`run_if: below`) must not pay an LLM
/// judge for every honest "I don't know" (docs/claim-support.md, "Abstentions").
///
/// A sentence abstains when one of the phrases below (English and French, the languages of the
/// refusal check, judges/checks.hpp) occurs in it, matched by RE2 on a normalised copy: lower
/// case, ’ and ‘ read as ', the spaced contractions of tokenised dialogue data ("i ' m",
/// "do n't") joined, runs of white space as one space. What else the sentence says is asserted
/// and judged like any claim (a hedge):
///   - after the abstention, from a connector ("but", "however", "mais", "cependant", "I do
///     know") or, when at least 3 words or a figure follow, from the next , ; : . ! ? ("I'm not
///     sure, they released it in 1997"; "Not stated: 10 years"); a rest that abstains again is
///     read the same way;
///   - before it (up to a connector when there is one) when it states a fact of its own: a
///     figure, a name, or two content words that are not lead-ins such as "based on the
///     provided context" ("Acme was founded in 1971, I'm not sure": a lie must not hide behind
///     a hedge);
///   - after it without a cut, when it holds a figure or a name ("I don't know why Acme was
///     founded in 1971");
///   - after a concession's comma ("While the text does not say X, it implies Y").
/// The phrases: first-person uncertainty (I don't know, I'm not sure, I have no idea, I can't
/// answer; not "I didn't know that", which is surprise at a fact); a context, document,
/// passage, source or text that does not mention, state, cover… it; something not stated,
/// mentioned, provided… in the context, documents, sources; no information, not enough or
/// additional information required; cannot be determined; their French forms (je ne sais pas,
/// le contexte ne précise pas, aucune information, n'est pas mentionné…).

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace assay {

struct SentenceAbstention {
  bool abstains = false;  ///< an abstention phrase occurs in the sentence
  /// When it abstains: what it asserts besides, as written (its parts joined by a space), or
  /// "" when it asserts nothing.
  std::string asserted;
};

/// Whether `sentence` (any UTF-8; invalid bytes are left as they are) abstains, and what of it
/// is asserted. Linear in the sentence's length (RE2). Never throws.
SentenceAbstention sentenceAbstention(std::string_view sentence);

/// The first abstention phrase anywhere in `text`, as matched on its normalised copy (lower
/// case, ' for ’, contractions joined), or "" when there is none. The refusal check
/// (judges/checks.hpp) labels such an answer a refusal, so the two never disagree on a phrase.
/// Linear in the text's length. Never throws.
std::string abstentionPhrase(std::string_view text);

/// Whether every sentence of `answer` (judges/tokenizer.hpp sentenceSpans) that has a letter or
/// digit abstains without asserting anything, and at least one does: the whole answer abstains.
bool answerAbstains(std::string_view answer);

}  // namespace assay
