#pragma once
/// The daily budget ledger of the LLM judges (docs/configuration.md, "budget" and "Money").
///
/// Before each call a judge *reserves* its worst-case cost in every scope it is charged to (the
/// global cap and its own `daily_limit_eur`), makes the call, then *settles* with the real cost (or
/// *releases* the reservation when no call was made). A reservation succeeds only if, in every
/// scope, `spent + outstanding reservations + amount <= limit`, checked and recorded atomically, so
/// N concurrent callers, in one or several daemons, can never commit more than the cap between
/// them. The overshoot is bounded by how much the settled cost of the calls in flight exceeds their
/// reservations (zero when the reservation really is the worst case).
///
/// Money inside the ledger is integer nano-euros (1 € = 10^9 n€): several processes adding the
/// same amounts agree to the last digit, with no float drift. Euros as `double` appear only at the
/// edges of this API and are rounded to the nearest nano-euro.
///
/// Days are local calendar days in `budget.timezone` ("YYYY-MM-DD", see `budgetDay()`); a cap
/// resets at local midnight. Settle and release must pass the day the reservation was made on,
/// not the day they run on (a call in flight at midnight is charged to the day it was reserved).
///
/// Two stores: `MemoryBudgetStore` (`store: memory`, one process) and `RedisBudgetStore`
/// (`store: redis://…`, shared by every daemon on that Redis and kept across restarts). Both pass
/// the same behavioural test (tests/llm/budget_test.cpp).

#include <atomic>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/string_map.hpp"

struct redisContext;

namespace assay::llm {

/// Nano-euros per euro: the ledger's integer unit.
inline constexpr std::int64_t kNanoEurosPerEuro = 1'000'000'000;
/// Largest amount or limit accepted, in euros (10^6 €): sums of a day's reservations stay exact in
/// the double-precision numbers of Redis' Lua (< 2^53 n€ ≈ 9.0 × 10^6 €).
inline constexpr double kMaxLedgerEuros = 1e6;
/// How long a day's ledger keys and a stored (event, judge) verdict live: 48 h, in milliseconds.
inline constexpr std::int64_t kLedgerTtlMs = 48LL * 3600 * 1000;

/// Euros → nano-euros, rounded to the nearest nano-euro.
/// Throws std::invalid_argument unless `eur` is finite and within [0, kMaxLedgerEuros].
std::int64_t eurosToNano(double eur);
/// Nano-euros → euros (exact for |nano| < 2^53).
double nanoToEuros(std::int64_t nano);

/// The local calendar day, "YYYY-MM-DD" (proleptic Gregorian), of the instant `epoch_ms`
/// (milliseconds since 1970-01-01T00:00Z, negative allowed) in the IANA time zone `iana_timezone`
/// (e.g. "Europe/Paris", "America/New_York", "UTC"), with that zone's DST rules from ICU's tz data.
/// Example: Europe/Paris at 2026-11-29T23:30Z → "2026-11-30".
/// Throws std::invalid_argument for a zone ICU does not know (ICU itself would silently fall back
/// to "Etc/Unknown", i.e. GMT) and for a year outside 1..9999.
std::string budgetDay(std::string_view iana_timezone, std::int64_t epoch_ms);

/// Milliseconds from `epoch_ms` until the next local midnight in `iana_timezone`, in
/// [1, 25 h] (a local day is 23 h or 25 h long on DST changes). When the zone skips midnight
/// itself, the next day starts at the first local time that exists. Throws like `budgetDay()`.
std::int64_t msUntilNextDay(std::string_view iana_timezone, std::int64_t epoch_ms);

/// One scope a call is charged to, with its daily cap: "global" (`budget.daily_limit_eur`) or
/// "judge:<name>" (the judge's `daily_limit_eur`). Scope names are used verbatim in store keys.
struct ScopeLimit {
  std::string scope;           ///< non-empty, unique within one request
  double daily_limit_eur = 0;  ///< euros per local day, in [0, kMaxLedgerEuros]; 0 = nothing
};

enum class ReserveStatus {
  kReserved,     ///< the amount is held in every scope; settle or release it later
  kExhausted,    ///< some scope cannot take the amount, or was closed for the day by an earlier
                 ///< refusal (close_on_refusal); nothing was reserved anywhere
  kUnavailable,  ///< the store did not answer (Redis down): fail closed, make no call
  kBusy,         ///< close_on_refusal only: the amount fits the settled spend, but not with the
                 ///< reservations in flight; retry when some settle (nothing was reserved)
};

/// What claim() found for an (event id, judge) pair.
struct ClaimResult {
  enum class Status {
    kClaimed,      ///< the lease is this call's: call, then storeVerdict() or releaseClaim()
    kStored,       ///< a verdict is stored: re-emit it, no call, no charge
    kLeased,       ///< another call holds the lease: ask again later
    kUnavailable,  ///< the store did not answer: fail closed, no call
  };
  Status status = Status::kUnavailable;
  std::string verdict;             ///< kStored: as stored
  std::int64_t lease_left_ms = 0;  ///< kLeased: until the other lease expires
  std::string error;               ///< kUnavailable: why, for a log line
};

struct ReserveResult {
  ReserveStatus status = ReserveStatus::kUnavailable;
  /// kExhausted: the first scope, in request order, whose limit the amount would exceed.
  std::string exhausted_scope;
  /// kUnavailable: why, for a rate-limited log line (never a metric label).
  std::string error;

  bool ok() const { return status == ReserveStatus::kReserved; }
};

/// One scope's ledger for one day.
struct Snapshot {
  bool available = false;             ///< false: the store did not answer; the numbers are 0
  std::int64_t spent_nano = 0;        ///< settled cost, n€
  std::int64_t outstanding_nano = 0;  ///< live (unexpired, unsettled) reservations, n€
  double spent_eur = 0;               ///< `spent_nano` in euros
  double outstanding_eur = 0;         ///< `outstanding_nano` in euros
};

/// The ledger interface. All methods are safe to call from several threads at once.
///
/// Argument errors (a negative or NaN amount, an empty scope list or scope name, duplicate scopes,
/// a day not shaped "YYYY-MM-DD", an empty id, a TTL <= 0) are programming errors and throw
/// std::invalid_argument. Store failures never throw: they are return values (fail closed).
class BudgetStore {
 public:
  virtual ~BudgetStore() = default;

  /// Atomically reserves `amount_eur` (the call's worst case, in [0, kMaxLedgerEuros] €) in every
  /// scope on `day`, provided that in every scope spent + outstanding + amount <= daily_limit_eur;
  /// otherwise reserves nothing and names the first exhausted scope. Reservations older than their
  /// `ttl_ms` (milliseconds, > 0; a little over the call's timeout including retries) are
  /// reclaimed first: a daemon that crashed mid-call does not hold budget forever.
  /// `reservation_id` must be unique per call (e.g. "<event id>/<judge>/<attempt>"); reserving an
  /// id that is already live is a no-op that returns kReserved (so a retried request is safe).
  ///
  /// `close_on_refusal`: when the settled spend alone leaves no room for `amount`, the refusal
  /// closes the scope for the rest of `day` (in the store, so for every daemon, restarted or
  /// not): every later reserve there is refused, even a smaller one, as long as the scope's
  /// limit is no larger than the one it closed under; a raised limit (a configuration reload)
  /// opens it again. A refusal caused only by reservations in flight stays transient. The LLM
  /// judges use it, so "exhausted" means exhausted until the next day or a higher cap.
  ReserveResult reserve(const std::vector<ScopeLimit>& scopes, double amount_eur,
                        std::string_view day, std::string_view reservation_id, std::int64_t ttl_ms,
                        bool close_on_refusal = false);

  /// Removes the reservation from every scope and adds `actual_eur` (the cost the API reported,
  /// in [0, kMaxLedgerEuros] €) to each scope's spent on `day`. The actual cost is charged even if
  /// it exceeds the reservation or the reservation has already expired. Idempotent per
  /// (day, reservation id): settling twice charges once. Limits in `scopes` are ignored.
  /// Returns false if the store did not answer (the cost is then not recorded).
  bool settle(std::string_view reservation_id, std::string_view day,
              const std::vector<ScopeLimit>& scopes, double actual_eur);

  /// Removes the reservation from every scope without spending anything (no call was made).
  /// Releasing an unknown or settled reservation is a no-op. Returns false if the store did not
  /// answer (the reservation then expires after its TTL).
  bool release(std::string_view reservation_id, std::string_view day,
               const std::vector<ScopeLimit>& scopes);

  /// `scope`'s spent and outstanding euros on `day` (expired reservations excluded).
  Snapshot spent(std::string_view scope, std::string_view day);

  // ---- The verdict store: one entry per (event id, judge), so that a redelivered event (Kafka
  // ---- delivers at least once) is neither called nor paid for twice, and a crash loses no
  // ---- verdict that was paid for.

  /// Takes the lease on (event id, judge) for `lease_ms` (milliseconds, > 0: the call's
  /// deadline) under `token` (unique per call), unless a verdict is stored (kStored, with it)
  /// or another call's lease is live (kLeased, with the milliseconds left). Taking a lease
  /// already held by `token` succeeds (a retried request). A lease that expires (its holder
  /// crashed) is taken by the next call.
  ClaimResult claim(std::string_view event_id, std::string_view judge, std::string_view token,
                    std::int64_t lease_ms);
  /// Stores `verdict` (opaque text) for `ttl_ms` in place of any lease: the pair's outcome is
  /// final, and claim() returns it from now on. Returns false if the store did not answer.
  bool storeVerdict(std::string_view event_id, std::string_view judge, std::string_view verdict,
                    std::int64_t ttl_ms);
  /// Drops the lease if `token` holds it (a call that ended without a billed answer, or was
  /// abandoned at a clean stop: the next delivery calls again). Returns false if the store did
  /// not answer (the lease then expires by itself).
  bool releaseClaim(std::string_view event_id, std::string_view judge, std::string_view token);

  // ---- Batches in flight (`batch: true` judges, llm_batch.cpp): each submitted batch's record
  // ---- is kept until its results are settled, so that whichever instance (re)starts fetches
  // ---- them, once; a lease says which instance does.

  /// Keeps `record` (opaque text) under (judge, batch id) until removeBatch(). False if the
  /// store did not answer.
  virtual bool saveBatch(std::string_view judge, std::string_view batch_id,
                         std::string_view record) = 0;
  /// Every kept (batch id, record) of `judge`; nullopt if the store did not answer.
  virtual std::optional<std::vector<std::pair<std::string, std::string>>> batchRecords(
      std::string_view judge) = 0;
  /// Takes or renews the right to settle a batch for `lease_ms` under `token`: true unless
  /// another token's lease is live (or the store did not answer).
  virtual bool leaseBatch(std::string_view judge, std::string_view batch_id, std::string_view token,
                          std::int64_t lease_ms) = 0;
  /// Forgets a batch (its results are settled) and its lease.
  virtual bool removeBatch(std::string_view judge, std::string_view batch_id) = 0;

  /// True if the store answers now (for /readyz).
  virtual bool ping() = 0;
  /// True if the ledger is shared between daemons and kept across restarts.
  virtual bool shared() const = 0;
  /// One line for the start-up log, e.g. "redis 127.0.0.1:6379 db 0 (shared …)"; no secrets.
  virtual std::string describe() const = 0;
  /// Stored verdicts dropped before their time to bound the store's memory (0 for a store that
  /// keeps them all: Redis expires them itself). Thread-safe.
  virtual std::uint64_t verdictsEvicted() const { return 0; }
  /// Settled reservation ids dropped before their day ended, likewise (0 for Redis).
  virtual std::uint64_t settledEvicted() const { return 0; }

 protected:
  /// A validated scope: name and limit in n€.
  struct ScopeNano {
    std::string_view scope;
    std::int64_t limit_nano;
  };
  /// A request's scopes (2 to 4 for an LLM call): held inline, no allocation per request.
  using ScopeList = boost::container::small_vector<ScopeNano, 4>;
  virtual ReserveResult doReserve(const ScopeList& scopes, std::int64_t amount_nano,
                                  std::string_view day, std::string_view reservation_id,
                                  std::int64_t ttl_ms, bool close_on_refusal) = 0;
  virtual bool doSettle(std::string_view reservation_id, std::string_view day,
                        const ScopeList& scopes, std::int64_t actual_nano) = 0;
  virtual bool doRelease(std::string_view reservation_id, std::string_view day,
                         const ScopeList& scopes) = 0;
  virtual Snapshot doSpent(std::string_view scope, std::string_view day) = 0;
  virtual ClaimResult doClaim(std::string_view event_id, std::string_view judge,
                              std::string_view token, std::int64_t lease_ms) = 0;
  virtual bool doStoreVerdict(std::string_view event_id, std::string_view judge,
                              std::string_view verdict, std::int64_t ttl_ms) = 0;
  virtual bool doReleaseClaim(std::string_view event_id, std::string_view judge,
                              std::string_view token) = 0;
};

/// `store: memory`: the ledger in this process, guarded by one mutex. Not shared between
/// instances and forgotten on restart (the start-up log says so). Keeps the three most recent days.
class MemoryBudgetStore final : public BudgetStore {
 public:
  /// Stored verdicts kept at most (about 600 bytes each with their index: 60 MB). Kept 48 h,
  /// the verdicts of a few billed calls a second would pass the unit's MemoryMax within two
  /// days; beyond the bound the oldest goes first (a redelivery of its event is then called
  /// and paid for again) and is counted (verdictsEvicted()).
  static constexpr std::size_t kMaxVerdicts = 100'000;
  /// Settled reservation ids kept per day at most (about 150 bytes each: 15 MB a day, three
  /// days kept). They make a settlement idempotent; beyond the bound the oldest goes first (a
  /// settlement of that reservation arriving again would be charged twice) and is counted.
  static constexpr std::size_t kMaxSettled = 100'000;
  explicit MemoryBudgetStore(std::size_t max_verdicts = kMaxVerdicts,
                             std::size_t max_settled = kMaxSettled)
      : max_verdicts_(max_verdicts), max_settled_(max_settled) {}
  bool ping() override { return true; }
  std::uint64_t verdictsEvicted() const override { return evicted_.load(); }
  std::uint64_t settledEvicted() const override { return settled_evicted_.load(); }
  bool shared() const override { return false; }
  std::string describe() const override;

 private:
  using Clock = std::chrono::steady_clock;
  template <typename V>
  using ByKey = StringMap<V>;  // looked up by string_view without a copy
  // Reservation ids by expiry, soonest first: each points to its key in `reservations` (the
  // key of an unordered_map's node stays put when the table grows).
  using ByExpiry = std::multimap<Clock::time_point, const std::string*>;
  struct Reservation {
    std::int64_t nano = 0;
    ByExpiry::iterator expiry;  // its entry in ScopeState::by_expiry
  };
  // Reserving and settling cost O(1) in the n reservations in flight, reclaiming O(log n)
  // (1,024 calls in flight made an O(n) scan per reservation the dispatch's bottleneck).
  struct ScopeState {
    std::int64_t spent_nano = 0;
    // A refusal closed the scope today under this cap (n€; -1 = open): it stays closed for any
    // cap up to that one, and opens again under a larger cap (a configuration reload).
    std::int64_t closed_at_nano = -1;
    ByKey<Reservation> reservations;
    ByExpiry by_expiry;
    std::int64_t outstanding_nano = 0;  // the sum of the reservations' amounts
  };
  struct DayState {
    std::map<std::string, ScopeState, std::less<>> scopes;
    StringSet settled;                             // reservation ids already settled
    std::deque<const std::string*> settled_order;  // settled's keys, oldest first (kMaxSettled)
  };

  ReserveResult doReserve(const ScopeList& scopes, std::int64_t amount_nano, std::string_view day,
                          std::string_view reservation_id, std::int64_t ttl_ms,
                          bool close_on_refusal) override;
  bool doSettle(std::string_view reservation_id, std::string_view day, const ScopeList& scopes,
                std::int64_t actual_nano) override;
  bool doRelease(std::string_view reservation_id, std::string_view day,
                 const ScopeList& scopes) override;
  Snapshot doSpent(std::string_view scope, std::string_view day) override;
  ClaimResult doClaim(std::string_view event_id, std::string_view judge, std::string_view token,
                      std::int64_t lease_ms) override;
  bool doStoreVerdict(std::string_view event_id, std::string_view judge, std::string_view verdict,
                      std::int64_t ttl_ms) override;
  bool doReleaseClaim(std::string_view event_id, std::string_view judge,
                      std::string_view token) override;

 public:
  bool saveBatch(std::string_view judge, std::string_view batch_id,
                 std::string_view record) override;
  std::optional<std::vector<std::pair<std::string, std::string>>> batchRecords(
      std::string_view judge) override;
  bool leaseBatch(std::string_view judge, std::string_view batch_id, std::string_view token,
                  std::int64_t lease_ms) override;
  bool removeBatch(std::string_view judge, std::string_view batch_id) override;

 private:
  struct BatchEntry {
    std::string record, lease_token;
    Clock::time_point lease_until{};
  };
  std::map<std::pair<std::string, std::string>, BatchEntry> batches_;  // (judge, id)

  DayState& dayLocked(std::string_view day);
  static ScopeState& scopeLocked(DayState& d, std::string_view scope);  // created when new
  void reclaimLocked(ScopeState& s, Clock::time_point now);
  void eraseLocked(ScopeState& s, std::string_view reservation_id);
  static std::int64_t outstandingLocked(const ScopeState& s);

  std::mutex mu_;
  std::map<std::string, DayState, std::less<>> days_;
  // The verdict store's entries (a lease per call, then its verdict for 48 h) take their nodes,
  // keys, lease tokens and index nodes from one pool (std::pmr, guarded by mu_), which asks
  // operator new for a chunk of growing size now and then: a call's claim allocates nothing.
  // Those are of a few fixed sizes (a key and a token are as long as the judge's name makes
  // them), so the pool, which keeps a size's blocks for that size, holds about what its peak of
  // entries needs. A verdict's text, of any length up to 2 KB, is on the heap: the pool would
  // keep the blocks of every length it ever saw (the hostile review: 1 GB for 100,000 verdicts
  // whose length shifted, against 220 MB live).
  std::pmr::unsynchronized_pool_resource verdict_pool_;
  using VerdictIndex = std::pmr::multimap<Clock::time_point, const std::pmr::string*>;
  struct Entry {
    using allocator_type = std::pmr::polymorphic_allocator<char>;
    explicit Entry(const allocator_type& a) : lease(a) {}
    bool stored = false;     // a verdict, else a lease
    std::pmr::string lease;  // a lease's token (empty once stored)
    std::string verdict;     // the stored verdict (empty while a lease)
    Clock::time_point expires{};
    bool indexed = false;             // in an expiry index (not while just inserted)
    bool indexed_stored = false;      // … verdict_expiry_ (else lease_expiry_)
    VerdictIndex::iterator expiry{};  // its entry there
  };
  using VerdictMap = std::pmr::unordered_map<std::pmr::string, Entry, StringHash, std::equal_to<>>;
  VerdictMap verdicts_{&verdict_pool_};  // "judge\0event"
  // verdicts_' keys by expiry, soonest first: the stored verdicts (all kept kLedgerTtlMs, so
  // the soonest is the oldest) and the leases of calls in flight.
  VerdictIndex verdict_expiry_{&verdict_pool_}, lease_expiry_{&verdict_pool_};
  const std::size_t max_verdicts_, max_settled_;
  std::atomic<std::uint64_t> evicted_{0}, settled_evicted_{0};
  void setVerdictLocked(VerdictMap::iterator it, bool stored, std::string_view value,
                        Clock::time_point expires);
  void eraseVerdictLocked(VerdictMap::iterator it);
  /// The entry of key_scratch_, a new one (a lease of nobody, expired) when there is none.
  VerdictMap::iterator entryLocked();
  void expireVerdictsLocked(Clock::time_point now);

  // The nodes of erased reservations, kept for the next ones (at most kKeptNodes of each kind,
  // their keys' capacity kept): a call's reservation and settlement allocate nothing. Guarded
  // by mu_.
  static constexpr std::size_t kKeptNodes = 4096;
  std::vector<ByExpiry::node_type> free_expiry_;
  std::vector<ByKey<Reservation>::node_type> free_reservations_;
  std::string key_scratch_;  // verdictKey's, guarded by mu_
  ByExpiry::iterator indexLocked(ByExpiry& index, Clock::time_point at, const std::string* key);
  void unindexLocked(ByExpiry& index, ByExpiry::iterator it);
  /// verdictKey(event_id, judge) in key_scratch_.
  const std::string& verdictKeyLocked(std::string_view event_id, std::string_view judge);
};

/// Where and how to reach Redis, from `budget.store: redis://[[user]:password@]host[:port][/db]`.
struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;                         ///< 1..65535
  int db = 0;                              ///< SELECTed after connecting, >= 0
  std::string username;                    ///< ACL user (Redis 6+); empty = the default user
  std::string password;                    ///< empty = no AUTH
  std::int64_t connect_timeout_ms = 250;   ///< per connection attempt, > 0
  std::int64_t command_timeout_ms = 1000;  ///< per command round trip, > 0
  /// After a failed connection attempt, calls fail at once (kUnavailable) for this long before
  /// the next attempt, so an outage costs callers no time. >= 0.
  std::int64_t reconnect_backoff_ms = 1000;
  /// Prepended to every key (budget.key_prefix; assayd's default "assay:GROUP_ID:"), so that
  /// deployments sharing a Redis database keep separate ledgers and verdicts.
  std::string key_prefix = "assay:";
};

/// Parses `redis://[[user]:password@]host[:port][/db][?command_timeout_ms=N&connect_timeout_ms=N]`
/// (user and password percent-decoded; host a name, an IPv4 address or a bracketed IPv6
/// address; port 6379 and db 0 by default; timeouts in milliseconds, 1..600000, default 1000
/// and 250).
/// Throws std::invalid_argument with the reason otherwise (including `rediss://`: no TLS yet).
RedisOptions parseRedisUrl(std::string_view url);

/// `store: redis://…`: the ledger in Redis, shared by every daemon using that Redis and kept across
/// restarts. Synchronous hiredis on one connection guarded by a mutex (calls are serialised, one
/// round trip each: reserve, settle and release are one script each). The connection is made on
/// first use, dropped on any I/O error or timeout and made again on the next call (after
/// `reconnect_backoff_ms` if the attempt failed); a command that failed on a reused connection is
/// retried once on a fresh one, which is safe because every script below is idempotent. Writing to
/// a connection the server closed may raise SIGPIPE: the process must ignore it (assayd does).
///
/// Keys (`{day}` is literally in braces: a Redis Cluster hash tag putting one day's keys in one
/// slot, so the multi-scope scripts stay single-slot):
/// (PREFIX is RedisOptions::key_prefix, e.g. "assay:rag-quality:")
///   PREFIXbudget:{DAY}:SCOPE:spent    string, integer n€ settled (INCRBY)
///   PREFIXbudget:{DAY}:SCOPE:res      hash, reservation id → n€ reserved
///   PREFIXbudget:{DAY}:SCOPE:resexp   sorted set, reservation id → expiry (Redis server ms)
///   PREFIXbudget:{DAY}:settled        set of reservation ids already settled (idempotent settle)
///   PREFIXbudget:{DAY}:by_instance    hash, "SPENT_KEY|INSTANCE" → n€ that instance settled
///   PREFIXverdict:JUDGE:EVENT_ID      string: "L:" + the lease holder's token (PX the call's
///                                     deadline), or "V:" + the stored verdict (PX 48 h)
/// Every key is given a 48 h expiry (kLedgerTtlMs) on each write; a lease expires with the
/// call's deadline.
///
/// Lua scripts (loaded with SCRIPT LOAD on connect, run with EVALSHA, EVAL on NOSCRIPT); time is
/// the Redis server's `TIME`, so daemons with skewed clocks agree on expiry:
///   reserve  KEYS = (spent, res, resexp) per scope; ARGV = amount, id, ttl_ms, key_ttl_ms,
///            limit per scope. Reclaims expired reservations in every scope (ZRANGEBYSCORE
///            resexp -inf now → HDEL res, ZREMRANGEBYSCORE); if the id is live in the first scope
///            returns {1, 0}; if any scope has GET spent + sum(HVALS res) + amount > limit returns
///            {0, index of that scope}; else HSET res id amount + ZADD resexp now+ttl id in every
///            scope, PEXPIRE all, returns {1, 0}. Index is 1-based, in request order.
///   settle   KEYS = settled, by_instance, then (spent, res, resexp) per scope; ARGV = id,
///            actual, key_ttl_ms, instance. SADD settled id; if it was already there returns 0
///            (charged once); else HDEL res, ZREM resexp, INCRBY spent actual and HINCRBY
///            by_instance "spent|instance" actual in every scope, PEXPIRE all, returns 1.
///   release  KEYS = (spent, res, resexp) per scope; ARGV = id. HDEL res, ZREM resexp everywhere.
///   snapshot KEYS = spent, res, resexp; reclaims expired reservations, returns {spent (string),
///   sum}.
///   claim    KEYS = the verdict key; ARGV = token, lease_ms. A stored verdict → {1, verdict}; a
///            live lease of another token → {2, PTTL}; else SET "L:"+token PX lease_ms → {0, ""}.
///   unclaim  KEYS = the verdict key; ARGV = token. DEL when it holds "L:"+token.
///   reassert KEYS = by_instance, then one spent key per scope; ARGV = instance, key_ttl_ms, then
///            the n€ this store object settled that day per scope. Where by_instance holds less
///            (Redis restarted empty, or from an older snapshot) the difference is INCRBY'd back
///            into spent. Run on every new connection, before any other command: a Redis that
///            comes back empty does not reset the day of a running daemon (a daemon restarted
///            meanwhile has no memory of its spend: its share is lost with Redis').
/// A verdict is stored with a plain SET "V:"+verdict PX ttl (it replaces any lease).
class RedisBudgetStore final : public BudgetStore {
 public:
  explicit RedisBudgetStore(RedisOptions options);  ///< does not connect yet; never throws on I/O
  ~RedisBudgetStore() override;
  RedisBudgetStore(const RedisBudgetStore&) = delete;
  RedisBudgetStore& operator=(const RedisBudgetStore&) = delete;

  bool ping() override;
  bool shared() const override { return true; }
  std::string describe() const override;

  /// The reply of runScript(), flattened: an integer, a string, or an array of strings
  /// (integers written in decimal, nil as "").
  struct ScriptReply {
    bool ok = false;    ///< false: the store did not answer, or answered with an error
    std::string error;  ///< when !ok, for a log line
    long long integer = 0;
    std::vector<std::string> values;
  };
  /// Runs the Lua `script` (EVAL) with `keys` (used verbatim: the caller prefixes them) and
  /// `args`, on this store's connection (so other shared state, the A/B tables of
  /// daemon/ab/ab.hpp, uses the same connection handling, AUTH, SELECT and timeouts).
  ScriptReply runScript(const std::string& script, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args);
  const RedisOptions& options() const { return options_; }

  bool saveBatch(std::string_view judge, std::string_view batch_id,
                 std::string_view record) override;
  std::optional<std::vector<std::pair<std::string, std::string>>> batchRecords(
      std::string_view judge) override;
  bool leaseBatch(std::string_view judge, std::string_view batch_id, std::string_view token,
                  std::int64_t lease_ms) override;
  bool removeBatch(std::string_view judge, std::string_view batch_id) override;

 private:
  struct Script {
    std::string body;  // Lua source
    std::string sha;   // from SCRIPT LOAD; empty until the first connection
  };
  struct ReplyDeleter {
    void operator()(void* reply) const;
  };
  using Reply = std::unique_ptr<void, ReplyDeleter>;  // a redisReply*
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };

  ReserveResult doReserve(const ScopeList& scopes, std::int64_t amount_nano, std::string_view day,
                          std::string_view reservation_id, std::int64_t ttl_ms,
                          bool close_on_refusal) override;
  bool doSettle(std::string_view reservation_id, std::string_view day, const ScopeList& scopes,
                std::int64_t actual_nano) override;
  bool doRelease(std::string_view reservation_id, std::string_view day,
                 const ScopeList& scopes) override;
  Snapshot doSpent(std::string_view scope, std::string_view day) override;
  ClaimResult doClaim(std::string_view event_id, std::string_view judge, std::string_view token,
                      std::int64_t lease_ms) override;
  bool doStoreVerdict(std::string_view event_id, std::string_view judge, std::string_view verdict,
                      std::int64_t ttl_ms) override;
  bool doReleaseClaim(std::string_view event_id, std::string_view judge,
                      std::string_view token) override;

  // All *Locked functions expect mu_ held.
  /// Runs `script` (EVALSHA, EVAL on NOSCRIPT) with `keys` and `args` via runLocked().
  Reply evalLocked(const Script& script, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args, std::string& error);
  /// Connects if needed and runs `argv` (argv[0..1] become EVALSHA/EVAL and the SHA/body when
  /// `script` is set); a failure on a reused connection is retried once on a fresh one. Returns
  /// null and sets `error` if the store did not answer or answered with an error reply.
  Reply runLocked(std::vector<std::string>& argv, const Script* script, std::string& error);
  /// One command on the current connection; null (and the connection dropped) on I/O failure.
  Reply commandLocked(const std::vector<std::string>& argv, std::string& error);
  /// Connects, AUTHs, SELECTs and loads the scripts unless connected or backing off.
  bool ensureConnectedLocked(std::string& error);
  /// Drops the connection, starts the reconnect backoff, logs an outage once.
  void connectFailedLocked(const std::string& why, std::string& error);
  void dropConnectionLocked();

  const RedisOptions options_;

  std::mutex mu_;  // guards everything below
  std::unique_ptr<redisContext, ContextDeleter> context_;
  std::chrono::steady_clock::time_point next_connect_attempt_{};
  std::string last_error_;      // why the last connection attempt failed
  bool reported_down_ = false;  // an outage is logged once, and its end once
  bool timed_out_ = false;      // the last command timed out (a hung server: no retry)
  Script reserve_script_, settle_script_, release_script_, snapshot_script_, claim_script_,
      unclaim_script_, reassert_script_;
  const std::string instance_;  // random: this store object's field in by_instance
  /// What this store object settled, day → scope → n€ (the last two days), re-asserted on
  /// every new connection.
  std::map<std::string, std::map<std::string, std::int64_t>> settled_here_;
};

/// The store named by `budget.store`: "memory" or a redis:// URL (see `parseRedisUrl()`), its
/// Redis keys under `key_prefix`; `password` (budget.password_file / password_env) replaces
/// the URL's.
/// Throws std::invalid_argument for anything else.
std::unique_ptr<BudgetStore> makeBudgetStore(
    std::string_view store, std::string_view key_prefix = "assay:",
    const std::optional<std::string>& password = std::nullopt);

}  // namespace assay::llm
