#include "judges/llm/rubric.hpp"

#include <array>

namespace assay::llm {
namespace {

// The examples are ours (invented products and policies, not taken from any data set), one per
// level; they were checked against the dev events (shared/data/rag_events_dev.jsonl) for the
// kinds of errors that occur there: a changed figure or date, a flipped negation, an added
// requirement, padding, an answer to a neighbouring question, a missed part.

Rubric faithfulness() {
  return Rubric{
      .criterion = "faithfulness",
      .task =
          "Judge whether every claim in the ANSWER is supported by the CONTEXTS. A claim is "
          "supported when a context states it or it follows directly from what a context states "
          "(\"two weeks\" supports \"14 days\"; a sum of two listed prices supports their "
          "total). Use only the contexts, not your own knowledge: a true statement that no "
          "context supports is unsupported. Numbers, dates, names, units and negations must "
          "agree with the contexts. Words that only restate the question are not claims. When "
          "the answer cites a context by its id (e.g. [policy-4.1]) or source, the cited context "
          "must be one that supports the claim. Judge support only, not completeness or "
          "relevance.",
      .abstention =
          "An answer that declines to answer (\"I don't know\", \"the documents do not say\") is "
          "fully supported (4) when the contexts indeed lack the information, and unsupported "
          "(1) when a context holds it: the answer then misstates what the contexts contain.",
      .needs_question = true,
      .needs_contexts = true,
      .needs_answer = true,
      .names_claim = true,
      .needs_every_context = true,
      .levels = {{1, "unsupported or contradicted",
                  "The answer contradicts the contexts (a figure, date, name, negation or "
                  "conclusion the contexts state otherwise), or its main claim is absent from "
                  "them."},
                 {2, "partly supported",
                  "Some claims are supported, but at least one important claim (a figure, a "
                  "date, a name, a condition, a conclusion) is absent from the contexts; nothing "
                  "is contradicted."},
                 {3, "mostly supported",
                  "Every important claim is supported; a minor detail goes beyond the contexts "
                  "without contradicting them."},
                 {4, "fully supported",
                  "Every claim is stated in or directly inferable from the contexts, including "
                  "every number, date and name."}},
      .examples = {
          {"Does the warranty cover water damage?",
           {"The warranty covers manufacturing defects for two years. It does not cover water "
            "damage or damage from drops."},
           "Yes, water damage is covered for two years.",
           1,
           "The context says the warranty does not cover water damage; the answer says it does.",
           "water damage is covered for two years"},
          {"What do I need to open an account?",
           {"To open an account, bring a valid ID and a proof of address less than three months "
            "old."},
           "Bring a valid ID, a proof of address less than three months old, and a recent "
           "payslip.",
           2,
           "The ID and the proof of address are in the context; the payslip, an important "
           "requirement, is not mentioned there.",
           "a recent payslip"},
          {"What does the Basic plan include?",
           {"The Basic plan costs 9 euros a month and includes 20 GB of storage and email "
            "support."},
           "The Basic plan costs 9 euros a month and includes 20 GB of storage and email "
           "support; it is our most popular plan.",
           3,
           "Price, storage and support match the context; \"our most popular plan\" is a minor "
           "detail the context does not state.",
           "it is our most popular plan"},
          {"How long do I have to return an unopened item?",
           {"Unopened items can be returned within two weeks of delivery for a full refund."},
           "You can return it within 14 days of delivery and get a full refund.",
           4,
           "\"14 days\" is the context's \"two weeks\", and the full refund is stated.",
           std::nullopt}}};
}

Rubric answerRelevancy() {
  return Rubric{
      .criterion = "answer_relevancy",
      .task =
          "Judge whether the ANSWER addresses the QUESTION that was asked: directly, and without "
          "unrequested content. Padding (filler, repetition, hedging, background nobody asked "
          "for) lowers the score; length is never a merit. Do not judge factual accuracy or "
          "whether the answer is complete.",
      .abstention =
          "An answer that declines to answer (\"I don't know\", \"I cannot answer that\") scores "
          "2 whether or not the information was available: it is about the question but does "
          "not answer it. This criterion does not see the contexts; faithfulness and "
          "completeness judge whether declining was right.",
      .needs_question = true,
      .needs_contexts = false,
      .needs_answer = true,
      .levels = {{1, "irrelevant",
                  "The answer does not address the question, or answers another one."},
                 {2, "partly relevant",
                  "The answer touches the question but misses its point, is mostly about "
                  "something else, or declines to answer."},
                 {3, "relevant but padded",
                  "The answer addresses the question, but adds unrequested content, repetition "
                  "or hedging that a user would have to skip."},
                 {4, "relevant and concise",
                  "The answer addresses exactly the question asked, concisely, with no "
                  "unrequested content. Length is not a merit: a longer answer never scores "
                  "higher for being longer."}},
      .examples = {{"Which countries do you ship to?",
                    {},
                    "Our headquarters are in Rotterdam, and we were founded in 2012.",
                    1,
                    "It says nothing about shipping destinations."},
                   {"How do I reset my password?",
                    {},
                    "Passwords must be at least 12 characters long and contain a number.",
                    2,
                    "It is about passwords, but gives the rules for a new password instead of "
                    "how to reset one."},
                   {"What time does the support line open?",
                    {},
                    "The support line opens at 8 am. We are committed to great service, and our "
                    "team is trained to handle every kind of request. Thank you for choosing us!",
                    3,
                    "The opening time is given, but most of the answer is filler the user has to "
                    "skip."},
                   {"Can I change the delivery address after ordering?",
                    {},
                    "Yes, until the order ships: open the order in your account and choose "
                    "\"Change address\".",
                    4,
                    "It answers the question directly and says how, with nothing unrequested."}}};
}

Rubric completeness() {
  return Rubric{
      .criterion = "completeness",
      .task =
          "Judge whether the ANSWER covers every part of the QUESTION, using the CONTEXTS to "
          "know what a complete answer contains: each part the contexts can answer, with the "
          "conditions, exceptions and limits they attach to it. Do not judge concision or style "
          "(extra content neither lowers nor raises this score), nor whether the claims are "
          "supported.",
      .abstention =
          "An answer that declines to answer (\"I don't know\") is incomplete (1) when the "
          "contexts hold the answer, and complete (4) when they do not: there was nothing to "
          "cover. The same holds part by part.",
      .needs_question = true,
      .needs_contexts = true,
      .needs_answer = true,
      .levels = {{1, "incomplete", "The answer leaves the main part of the question unanswered."},
                 {2, "partial",
                  "The answer covers some parts of the question and misses at least one "
                  "important part that the contexts answer."},
                 {3, "nearly complete",
                  "Every important part is covered; a minor part, condition or exception from "
                  "the contexts is missing."},
                 {4, "complete",
                  "Every part of the question that the contexts can answer is answered, with its "
                  "conditions and exceptions."}},
      .examples = {
          {"Which payment methods are accepted, and can I pay in instalments?",
           {"We accept Visa, Mastercard and PayPal. Orders above 200 euros can be paid in three "
            "instalments."},
           "I don't know which payment methods are accepted.",
           1,
           "The context lists the payment methods and the instalment option; the answer covers "
           "neither."},
          {"What are the fees and the minimum deposit of the savings account?",
           {"The savings account has no monthly fee. The minimum opening deposit is 50 euros."},
           "There is no monthly fee.",
           2,
           "The fees are covered, but the minimum deposit (50 euros in the context), half of "
           "the question, is missing."},
          {"How do I get a refund, and how long does it take?",
           {"Request a refund from the Orders page. Refunds reach your card within 5 to 10 "
            "business days; bank transfers take up to 14 days."},
           "Request it from the Orders page; the money reaches your card within 5 to 10 "
           "business days.",
           3,
           "Both parts are answered; the longer delay for bank transfers, a minor exception, is "
           "missing."},
          {"When is the pool open on weekends?",
           {"The pool is open 7:00-21:00 on weekdays and 9:00-18:00 on Saturdays and Sundays."},
           "From 9:00 to 18:00 on Saturdays and Sundays.",
           4,
           "The weekend hours are the whole question, and they are given."}}};
}

Rubric contextRelevance() {
  return Rubric{
      .criterion = "context_relevance",
      .task =
          "Judge whether the CONTEXTS retrieved for the QUESTION, taken together, contain the "
          "information needed to answer it (sufficiency). Judge sufficiency only: irrelevant "
          "passages among them neither lower nor raise the score, and their order does not "
          "matter. Use the contexts' text, not your own knowledge of the answer.",
      .abstention =
          "The answer is not shown, so whether the system answered or declined (\"I don't "
          "know\") plays no part in this score: judge only whether the contexts hold what the "
          "question needs.",
      .needs_question = true,
      .needs_contexts = true,
      .needs_answer = false,
      .levels = {{1, "irrelevant", "No context is about the question."},
                 {2, "related",
                  "Some contexts are about the topic, but the information needed to answer is "
                  "missing."},
                 {3, "partly sufficient",
                  "The contexts contain part of the needed information; another part is "
                  "missing."},
                 {4, "sufficient",
                  "The contexts, together, contain all the information needed to answer the "
                  "question."}},
      .examples = {{"What is the deadline for filing the tax return?",
                    {"Our office is closed on public holidays.", "Parking is free for visitors."},
                    "",
                    1,
                    "Neither context is about tax returns."},
                   {"How do I connect the printer to Wi-Fi?",
                    {"The X200 printer prints up to 20 pages a minute and supports Wi-Fi and "
                     "USB."},
                    "",
                    2,
                    "The context is about the printer and says it supports Wi-Fi, but not how to "
                    "connect it."},
                   {"How much does the premium subscription cost, and can I cancel it at any "
                    "time?",
                    {"The premium subscription costs 12 euros a month."},
                    "",
                    3,
                    "The price is there; nothing says whether the subscription can be cancelled "
                    "at any time."},
                   {"What is the baggage allowance on economy flights?",
                    {"Economy tickets include one cabin bag of up to 8 kg.",
                     "Business class passengers may use the lounge.",
                     "Economy tickets also include one checked bag of up to 23 kg."},
                    "",
                    4,
                    "Contexts 1 and 3 give the cabin and the checked allowance; the lounge "
                    "passage does not matter."}}};
}

const std::array<Rubric, 4>& rubrics() {
  static const std::array<Rubric, 4> kRubrics = {faithfulness(), answerRelevancy(), completeness(),
                                                 contextRelevance()};
  return kRubrics;
}

}  // namespace

const Rubric* builtinRubric(std::string_view criterion) {
  for (const auto& r : rubrics())
    if (r.criterion == criterion) return &r;
  return nullptr;
}

std::vector<std::string> builtinCriteria() {
  std::vector<std::string> out;
  for (const auto& r : rubrics()) out.push_back(r.criterion);
  return out;
}

}  // namespace assay::llm
