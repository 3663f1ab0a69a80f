#pragma once
/// Dense ids for the distinct tokens of a few texts (judges/tokenizer.hpp `Words`), the
/// vocabulary the lexical judges count and compare over: open addressing with linear probing
/// on the token's XXH3-64 hash, the bytes compared only when two hashes are equal, so two
/// different tokens never share an id. The table keeps at most half of its slots used and
/// grows by doubling; `reset()` keeps the slots when the size wanted is the same power of two,
/// so a judge's thread reuses one table.
/// The table stores a pointer to each interned token's bytes and compares them on every later
/// `intern` or `find`: until the next `reset()`, the `Words` (or strings) those bytes live in
/// must not change, grow or go away. Tokens must be non-empty.
/// Threads: `find` only reads; `intern` and `reset` need the table to themselves (the judges
/// keep one thread_local table each).

#include <cstdint>
#include <string_view>
#include <vector>

namespace assay {

class TokenIds {
 public:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;

  /// Empties the table, sized for about `expected` distinct tokens.
  void reset(std::size_t expected) {
    std::size_t cap = 64;
    while (cap < 2 * expected) cap *= 2;
    if (slots_.size() != cap)
      slots_.assign(cap, Slot{});
    else
      for (auto& s : slots_) s.data = nullptr;
    count_ = 0;
  }

  /// The id (0, 1, 2… in order of first sight) of the token with this hash (its unseeded
  /// XXH3_64bits) and non-empty text; interns it when new.
  std::uint32_t intern(std::uint64_t hash, std::string_view text) {
    if (2 * (static_cast<std::size_t>(count_) + 1) > slots_.size()) grow();
    Slot& s = probe(hash, text);
    if (s.data == nullptr)
      s = Slot{hash, text.data(), static_cast<std::uint32_t>(text.size()), count_++};
    return s.id;
  }

  /// The token's id, or kAbsent when it was never interned.
  std::uint32_t find(std::uint64_t hash, std::string_view text) const {
    if (slots_.empty()) return kAbsent;
    const Slot& s = const_cast<TokenIds*>(this)->probe(hash, text);
    return s.data == nullptr ? kAbsent : s.id;
  }

  /// Number of distinct tokens interned since `reset()`.
  std::uint32_t size() const { return count_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    const char* data = nullptr;  ///< nullptr: empty slot (a token is never empty)
    std::uint32_t size = 0;
    std::uint32_t id = 0;
  };

  Slot& probe(std::uint64_t hash, std::string_view text) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.data == nullptr) return s;
      if (s.hash == hash && std::string_view(s.data, s.size) == text) return s;
    }
  }

  void grow() {
    std::vector<Slot> old(slots_.size() < 64 ? 64 : slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.data == nullptr) continue;
      std::size_t i = s.hash & mask;
      while (slots_[i].data != nullptr) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::uint32_t count_ = 0;
};

}  // namespace assay
