#include "daemon/ab/ab.hpp"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>

#include "core/clock.hpp"
#include "core/log_text.hpp"
#include "core/utf8.hpp"
#include "judges/llm/budget.hpp"
#include "tracking/sequential.hpp"

namespace assay::ab {
namespace {

constexpr std::int64_t kRatedTtlMs = 7LL * 24 * 3600 * 1000;  // a rating id counts once a week
constexpr std::size_t kMaxQueued = 100'000;
constexpr std::size_t kMaxMemoryUnits = 1'000'000, kMaxMemoryIds = 1'000'000;

/// Tag of an experiment's arms: a change of arms (or of their order) is a new table.
std::string armsTag(const AbExperiment& e) {
  std::string joined;
  for (const auto& a : e.arms) joined += a + '\0';
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH64(joined.data(), joined.size(), 0)));
  return std::string(hex, 8);
}

std::size_t armIndex(const AbExperiment& e, std::string_view arm) {
  return static_cast<std::size_t>(std::find(e.arms.begin(), e.arms.end(), arm) - e.arms.begin());
}

class MemoryStore final : public Store {
 public:
  std::optional<std::string> assign(const AbExperiment& e, std::string_view unit,
                                    const std::string& proposed, std::int64_t ttl_ms) override {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    auto& units = units_[e.name];
    const auto it = units.find(std::string(unit));
    if (it != units.end() && it->second.second > now) return it->second.first;
    if (units.size() >= kMaxMemoryUnits)
      std::erase_if(units, [&](const auto& kv) { return kv.second.second <= now; });
    if (units.size() >= kMaxMemoryUnits) units.clear();  // bounded: forget, the hash remains
    units[std::string(unit)] = {proposed, now + std::chrono::milliseconds(ttl_ms)};
    return proposed;
  }

  std::optional<std::string> cached(const AbExperiment& e, std::string_view unit) override {
    std::lock_guard lock(mu_);
    const auto& units = units_[e.name];
    const auto it = units.find(std::string(unit));
    return it != units.end() && it->second.second > Clock::now() ? it->second.first : std::string();
  }

  Rated rate(const AbExperiment& e, std::size_t arm, int stars, std::string_view id) override {
    std::lock_guard lock(mu_);
    auto& x = experiment(e);
    if (!x.ids.insert(std::string(id)).second) return Rated::kDuplicate;
    x.order.emplace_back(id);
    if (x.order.size() > kMaxMemoryIds) {
      x.ids.erase(x.order.front());
      x.order.pop_front();
    }
    x.table.arms[arm][static_cast<std::size_t>(stars - 1)] += 1;
    x.test.add(arm, static_cast<std::size_t>(stars - 1));
    x.table.total += 1;
    x.table.max_log_e = x.test.maxLogE();
    return Rated::kCounted;
  }

  std::optional<Table> table(const AbExperiment& e) override {
    std::lock_guard lock(mu_);
    return experiment(e).table;
  }
  bool record(const AbExperiment& e, const RecordedDecision& d) override {
    std::lock_guard lock(mu_);
    auto& t = experiment(e).table;
    if (!t.recorded) t.recorded = d;
    return true;
  }
  std::optional<std::int64_t> reset(const AbExperiment& e, std::int64_t /*at_ms*/) override {
    std::lock_guard lock(mu_);
    auto& x = experiment(e);
    const std::int64_t run = x.table.run + 1;
    x.table = Table{};
    x.table.arms.assign(e.arms.size(), Stars{});
    x.table.run = run;
    x.test = stats::SequentialIndependenceTest(e.arms.size(), 5);
    return run;
  }
  bool shared() const override { return false; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Experiment {
    Table table;
    stats::SequentialIndependenceTest test;
    std::set<std::string, std::less<>> ids;
    std::deque<std::string> order;
  };
  Experiment& experiment(const AbExperiment& e) {
    const std::string key = e.name + ":" + armsTag(e);
    auto it = experiments_.find(key);
    if (it == experiments_.end()) {
      Experiment x{Table{}, stats::SequentialIndependenceTest(e.arms.size(), 5), {}, {}};
      x.table.arms.assign(e.arms.size(), Stars{});
      it = experiments_.emplace(key, std::move(x)).first;
    }
    return it->second;
  }
  std::mutex mu_;
  std::map<std::string, Experiment> experiments_;
  std::map<std::string, std::unordered_map<std::string, std::pair<std::string, Clock::time_point>>>
      units_;
};

// ---- Redis. Keys (PREFIX = budget.key_prefix; {EXPERIMENT} a Redis Cluster hash tag, so one
// experiment's keys share a slot; TAG = armsTag):
//   PREFIXab:{EXPERIMENT}:TAG:table     hash: n:ARM:STARS, s:STARS, a:ARM, total, lognum, maxloge
//   PREFIXab:{EXPERIMENT}:TAG:rated:ID  a rating id already counted (PX 7 days)
//   PREFIXab:{EXPERIMENT}:unit:UNIT     the router's arm for the unit (PX ab.assignment_ttl)

// KEYS: table, rated. ARGV: arm index (0-based), stars (1..5), arms, rated ttl ms.
// The sequential test's update (sequential.hpp, SequentialIndependenceTest::add) in one atomic
// step: the Krichevsky–Trofimov bet from the counts before this rating, the counts, the running
// MLE of the arms' shares, and sup log M. Numbers are kept as %.17g strings (exact doubles).
// Returns 1 counted, 0 a duplicate id.
constexpr const char* kLuaRate = R"lua(
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then return 0 end
local a, s, k = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local function num(field) return tonumber(redis.call('HGET', KEYS[1], field) or '0') end
local nsa, ns = num('n:' .. a .. ':' .. s), num('s:' .. s)
local lognum = num('lognum') + math.log((nsa + 0.5) / (ns + k / 2))
redis.call('HINCRBY', KEYS[1], 'n:' .. a .. ':' .. s, 1)
redis.call('HINCRBY', KEYS[1], 's:' .. s, 1)
redis.call('HINCRBY', KEYS[1], 'a:' .. a, 1)
local t = redis.call('HINCRBY', KEYS[1], 'total', 1)
local lognull = 0
for i = 0, k - 1 do
  local n = num('a:' .. i)
  if n > 0 then lognull = lognull + n * math.log(n / t) end
end
redis.call('HSET', KEYS[1], 'lognum', string.format('%.17g', lognum))
local loge = lognum - lognull
if loge > num('maxloge') then redis.call('HSET', KEYS[1], 'maxloge', string.format('%.17g', loge)) end
return 1
)lua";

// KEYS: unit. ARGV: proposed arm, ttl ms. Returns the cached arm, or stores the proposed one.
constexpr const char* kLuaAssign = R"lua(
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
)lua";

// KEYS: table. ARGV: field, value pairs of the decision (d:arm first). Records them unless a
// decision is there already. Returns 1 recorded, 0 already decided.
constexpr const char* kLuaRecord = R"lua(
if redis.call('HEXISTS', KEYS[1], 'd:arm') == 1 then return 0 end
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
)lua";

// KEYS: table, archive. ARGV: reset time (epoch ms). Archives the table under the archive key
// and starts an empty one whose run is one higher. Returns the new run.
constexpr const char* kLuaReset = R"lua(
local run = tonumber(redis.call('HGET', KEYS[1], 'run') or '0') or 0
if run ~= run or run < 0 or run > 1e15 then run = 0 end
run = math.floor(run) + 1
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('RENAME', KEYS[1], KEYS[2]) end
redis.call('HSET', KEYS[1], 'run', run, 'reset_at', ARGV[1])
return run
)lua";

constexpr const char* kLuaGet = "return redis.call('GET', KEYS[1]) or ''";
constexpr const char* kLuaTable = "return redis.call('HGETALL', KEYS[1])";

class RedisStore final : public Store {
 public:
  explicit RedisStore(llm::RedisOptions options) : redis_(std::move(options)) {}

  std::optional<std::string> assign(const AbExperiment& e, std::string_view unit,
                                    const std::string& proposed, std::int64_t ttl_ms) override {
    const auto r =
        redis_.runScript(kLuaAssign, {unitKey(e, unit)}, {proposed, std::to_string(ttl_ms)});
    if (!r.ok || r.values.empty()) return failed(r.error);
    return r.values[0];
  }

  std::optional<std::string> cached(const AbExperiment& e, std::string_view unit) override {
    const auto r = redis_.runScript(kLuaGet, {unitKey(e, unit)}, {});
    if (!r.ok) return failed(r.error);
    return r.values.empty() ? std::string() : r.values[0];
  }

  Rated rate(const AbExperiment& e, std::size_t arm, int stars, std::string_view id) override {
    const auto r =
        redis_.runScript(kLuaRate, {base(e) + "table", base(e) + "rated:" + std::string(id)},
                         {std::to_string(arm), std::to_string(stars), std::to_string(e.arms.size()),
                          std::to_string(kRatedTtlMs)});
    if (!r.ok) {
      failed(r.error);
      return Rated::kUnavailable;
    }
    return r.integer == 1 ? Rated::kCounted : Rated::kDuplicate;
  }

  std::optional<Table> table(const AbExperiment& e) override {
    const auto r = redis_.runScript(kLuaTable, {base(e) + "table"}, {});
    if (!r.ok) return failed(r.error);
    Table t;
    t.arms.assign(e.arms.size(), Stars{});
    std::map<std::string, std::string> decision;  // d:* fields
    // The hash is data another program (or a hand) may have changed: a field that does not
    // read is ignored and said once, never a crash.
    std::string unreadable;
    for (std::size_t i = 0; i + 1 < r.values.size(); i += 2) {
      const std::string& f = r.values[i];
      const std::string& v = r.values[i + 1];
      unsigned arm = 0, stars = 0;
      if (std::sscanf(f.c_str(), "n:%u:%u", &arm, &stars) == 2 && arm < t.arms.size() &&
          stars >= 1 && stars <= 5) {
        if (const auto n = count(v))
          t.arms[arm][stars - 1] = *n;
        else
          unreadable = f;
      } else if (f == "total" || f == "run") {
        if (const auto n = count(v))
          (f == "total" ? t.total : t.run) = *n;
        else
          unreadable = f;
      } else if (f == "maxloge") {
        if (const auto x = finite(v))
          t.max_log_e = *x;
        else
          unreadable = f;
      } else if (f.rfind("d:", 0) == 0) {
        decision[f] = v;
      }
    }
    t.recorded = decisionOf(decision, e.arms.size());
    if (!decision.empty() && !t.recorded) unreadable = "d:* (the recorded decision)";
    if (!unreadable.empty() && firstWarning(e.name + "/" + unreadable))
      spdlog::warn(
          "ab: experiment '{}': the store's field {} does not read as a value of its kind; it "
          "is ignored (`assay ab reset` archives the table and starts the experiment again)",
          e.name, logText(unreadable, 80));
    return t;
  }

  bool record(const AbExperiment& e, const RecordedDecision& d) override {
    std::vector<std::string> args = {
        "d:arm", std::to_string(d.winner), "d:p", exact(d.p), "d:rule", d.rule,
        "d:at",  std::to_string(d.at_ms)};
    for (std::size_t i = 0; i < d.ratings.size(); ++i) {
      args.push_back("d:n:" + std::to_string(i));
      args.push_back(std::to_string(d.ratings[i]));
      args.push_back("d:mean:" + std::to_string(i));
      args.push_back(exact(i < d.mean_stars.size() ? d.mean_stars[i] : 0));
    }
    const auto r = redis_.runScript(kLuaRecord, {base(e) + "table"}, args);
    if (!r.ok) failed(r.error);
    return r.ok;
  }

  std::optional<std::int64_t> reset(const AbExperiment& e, std::int64_t at_ms) override {
    const auto r = redis_.runScript(
        kLuaReset, {base(e) + "table", base(e) + "table:reset:" + std::to_string(at_ms)},
        {std::to_string(at_ms)});
    if (!r.ok) return failed(r.error);
    return r.integer;
  }
  bool shared() const override { return true; }

 private:
  static std::string exact(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
  }
  /// A count: decimal digits only, at most 18 (no sign, no exponent), else nullopt.
  static std::optional<std::int64_t> count(const std::string& v) {
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return std::stoll(v);
  }
  /// A finite double (as %.17g writes it), else nullopt.
  static std::optional<double> finite(const std::string& v) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(x)) return std::nullopt;
    return x;
  }
  /// The recorded decision from its d:* fields; nullopt when none, or when they do not read as
  /// one of this experiment's (a hand-edited hash): better undecided than a made-up winner.
  static std::optional<RecordedDecision> decisionOf(const std::map<std::string, std::string>& f,
                                                    std::size_t arms) {
    const auto get = [&](const std::string& k) {
      const auto it = f.find(k);
      return it == f.end() ? std::string() : it->second;
    };
    RecordedDecision d;
    const auto winner = count(get("d:arm"));
    const auto p = finite(get("d:p"));
    const auto at = count(get("d:at"));
    d.rule = get("d:rule");
    if (!winner || *winner >= static_cast<std::int64_t>(arms) || !p || *p < 0 || *p > 1 || !at ||
        (d.rule != "anytime" && d.rule != "chi_square"))
      return std::nullopt;
    d.winner = static_cast<std::size_t>(*winner);
    d.p = *p;
    d.at_ms = *at;
    for (std::size_t i = 0; i < arms; ++i) {
      const auto n = count(get("d:n:" + std::to_string(i)));
      const auto mean = finite(get("d:mean:" + std::to_string(i)));
      if (!n || !mean) return std::nullopt;
      d.ratings.push_back(*n);
      d.mean_stars.push_back(*mean);
    }
    return d;
  }
  std::string base(const AbExperiment& e) const {
    return redis_.options().key_prefix + "ab:{" + e.name + "}:" + armsTag(e) + ":";
  }
  std::string unitKey(const AbExperiment& e, std::string_view unit) const {
    return redis_.options().key_prefix + "ab:{" + e.name + "}:unit:" + std::string(unit);
  }
  static std::nullopt_t failed(const std::string& why) {
    spdlog::debug("ab store: {}", why);
    return std::nullopt;
  }
  llm::RedisBudgetStore redis_;
  bool firstWarning(const std::string& key) {
    std::lock_guard lock(warned_mu_);
    return warned_.insert(key).second;
  }
  std::mutex warned_mu_;
  std::set<std::string> warned_;  // experiment/field pairs already said unreadable
};

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The value of `name` in a URL query (application/x-www-form-urlencoded), decoded.
std::optional<std::string> queryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) != name) continue;
    std::string out;
    const std::string_view raw = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        out += ' ';
      } else if (raw[i] == '%' && i + 2 < raw.size() && hexValue(raw[i + 1]) >= 0 &&
                 hexValue(raw[i + 2]) >= 0) {
        out += static_cast<char>(hexValue(raw[i + 1]) * 16 + hexValue(raw[i + 2]));
        i += 2;
      } else {
        out += raw[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

std::string json(std::initializer_list<std::pair<const char*, std::string>> strings,
                 std::initializer_list<std::pair<const char*, bool>> flags) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  w.StartObject();
  for (const auto& [k, v] : strings) {
    w.Key(k);
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  }
  for (const auto& [k, v] : flags) {
    w.Key(k);
    w.Bool(v);
  }
  w.EndObject();
  return std::string(b.GetString(), b.GetSize()) + "\n";
}

}  // namespace

std::size_t hashArm(const AbExperiment& e, std::string_view unit) {
  std::string key = e.name;
  key += '\0';
  key += unit;
  const double u = static_cast<double>(XXH64(key.data(), key.size(), 0) >> 11) * 0x1.0p-53;
  double total = 0;
  for (double w : e.weights) total += w;
  double upto = 0;
  for (std::size_t i = 0; i < e.arms.size(); ++i) {
    upto += e.weights[i] / total;
    if (u < upto) return i;
  }
  return e.arms.size() - 1;
}

Decision decide(const Table& table, const AbOptions& options) {
  Decision d;
  std::vector<std::vector<double>> rows;
  bool every_arm = !table.arms.empty();
  for (const auto& stars : table.arms) {
    std::int64_t n = 0;
    double sum = 0;
    for (std::size_t s = 0; s < stars.size(); ++s) {
      n += stars[s];
      sum += static_cast<double>(stars[s]) * static_cast<double>(s + 1);
    }
    d.ratings.push_back(n);
    d.mean_stars.push_back(n ? std::optional(sum / static_cast<double>(n)) : std::nullopt);
    every_arm = every_arm && n >= options.min_ratings_per_arm;
    if (n > 0) rows.emplace_back(stars.begin(), stars.end());
  }
  d.chi = stats::chiSquareIndependence(rows);
  d.anytime_p = std::min(1.0, std::exp(-table.max_log_e));
  d.p = options.decision == "chi_square" ? (d.chi ? d.chi->p_value : 1.0) : d.anytime_p;
  d.decided = every_arm && d.p < options.alpha;
  if (d.decided) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < d.mean_stars.size(); ++i)
      if (d.mean_stars[i].value_or(0) > d.mean_stars[best].value_or(0)) best = i;
    d.winner = best;
  }
  return d;
}

RecordedDecision recordedFrom(const Decision& d, const AbOptions& options, std::int64_t at_ms) {
  RecordedDecision r;
  r.winner = d.winner.value_or(0);
  r.p = d.p;
  r.rule = options.decision;
  r.at_ms = at_ms;
  r.ratings = d.ratings;
  for (const auto& m : d.mean_stars) r.mean_stars.push_back(m.value_or(0));
  return r;
}

std::unique_ptr<Store> makeStore(const BudgetOptions& budget) {
  if (budget.store == "memory") return std::make_unique<MemoryStore>();
  auto options = llm::parseRedisUrl(budget.store);
  options.key_prefix = budget.key_prefix;
  if (budget.store_password) options.password = *budget.store_password;
  return std::make_unique<RedisStore>(std::move(options));
}

AbService::AbService(AbOptions options, std::unique_ptr<Store> store,
                     prometheus::Registry& registry)
    : options_(std::move(options)),
      store_(std::move(store)),
      recorded_(prometheus::BuildCounter()
                    .Name("assay_ab_ratings_recorded_total")
                    .Help("Ratings sent to the A/B store, by what it made of them")
                    .Register(registry)) {
  for (const auto& e : options_.experiments)
    states_.push_back(State{e.name, e.arms, false, {}, {}, false});
  thread_ = std::thread([this] { loop(); });
}

AbService::~AbService() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

const AbExperiment* AbService::find(std::string_view experiment) const {
  for (const auto& e : options_.experiments)
    if (e.name == experiment) return &e;
  return nullptr;
}

const char* AbService::rate(const AbExperiment& experiment, const std::string& arm,
                            const std::string& unit, int stars, const std::string& id) {
  if (arm.empty() && unit.empty()) return "no_variant";
  if (!arm.empty() && armIndex(experiment, arm) == experiment.arms.size()) return "unknown_arm";
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= kMaxQueued) return "backlog_full";
    // By name: `experiment` may be another service's copy of the same configuration.
    const auto* mine = find(experiment.name);
    if (!mine) return "unknown_experiment";
    queue_.push_back(Pending{static_cast<std::size_t>(mine - options_.experiments.data()), arm,
                             unit, id, stars});
  }
  cv_.notify_all();
  return "joined";
}

void AbService::record(const Pending& p) {
  const auto& e = options_.experiments[p.experiment];
  std::size_t arm = armIndex(e, p.arm);
  if (p.arm.empty()) {  // the arm the router served this unit, else the hash's
    const auto cached = store_->cached(e, p.unit);
    arm = cached && !cached->empty() ? armIndex(e, *cached) : hashArm(e, p.unit);
    if (arm == e.arms.size()) arm = hashArm(e, p.unit);
  }
  const auto rated = store_->rate(e, arm, p.stars, p.id);
  const char* outcome = rated == Store::Rated::kCounted     ? "counted"
                        : rated == Store::Rated::kDuplicate ? "duplicate"
                                                            : "store_unavailable";
  recorded_.Add({{"experiment", e.name}, {"outcome", outcome}}).Increment();
}

namespace {

/// "control 40, concise 40" / "control 3.10, concise 3.90".
template <typename T>
std::string perArm(const std::vector<std::string>& arms, const std::vector<T>& v,
                   const char* format) {
  std::string out;
  for (std::size_t i = 0; i < arms.size() && i < v.size(); ++i)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", arms[i],
                       fmt::format(fmt::runtime(format), v[i]));
  return out;
}

/// The decision's log line: the event an operator looks for (docs/ab.md, "The decision").
void logDecision(const AbService::State& s, double alpha, bool at_start) {
  const RecordedDecision& d = *s.table.recorded;
  spdlog::info(
      "ab: experiment '{}' {} {}: winner '{}' ({} p {:.4g} < alpha {}; ratings {}; mean stars "
      "{}); final: the router sends every unit to '{}', later ratings are counted beside it "
      "and never re-decide it; `assay ab reset` starts the experiment again",
      s.experiment, at_start ? "is decided since" : "decided at", utcSeconds(d.at_ms),
      s.arms[d.winner], d.rule == "chi_square" ? "chi-square" : "anytime-valid", d.p, alpha,
      perArm(s.arms, d.ratings, "{}"), perArm(s.arms, d.mean_stars, "{:.2f}"), s.arms[d.winner]);
}

}  // namespace

void AbService::refresh() {
  std::vector<State> fresh;
  for (const auto& e : options_.experiments) {
    State s{e.name, e.arms, false, {}, {}, false};
    if (auto t = store_->table(e)) {
      s.available = true;
      s.table = std::move(*t);
      s.decision = decide(s.table, options_);
      // The first time the rule holds, the decision is recorded, once for every instance; the
      // table is read again for the decision that holds (another instance's may have won).
      if (!s.table.recorded && s.decision.decided &&
          store_->record(e, recordedFrom(s.decision, options_, epochMs())))
        if (auto again = store_->table(e)) {
          s.table = std::move(*again);
          s.decision = decide(s.table, options_);
        }
    }
    fresh.push_back(std::move(s));
  }
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    State& now = fresh[i];
    const State& before = states_[i];
    if (!now.available) {
      states_[i].available = false;  // keep the last answer's decision for the router
      continue;
    }
    const bool reset = before.seen && now.table.run != before.table.run;
    if (reset)
      spdlog::info(
          "ab: experiment '{}' was reset (run {}): its table and decision were archived; the "
          "router splits units again until the rule holds on the new ratings",
          now.experiment, now.table.run);
    else if (before.seen && now.table.total < before.table.total)
      spdlog::warn(
          "ab: experiment '{}' had {} ratings in the store and now has {}: the store lost them "
          "(Redis restarted without persistence, or the keys were deleted); the decision "
          "starts again from what is left",
          now.experiment, before.table.total, now.table.total);
    if (now.table.recorded && (reset || !before.table.recorded))
      logDecision(now, options_.alpha, !before.seen);
    now.seen = true;
    states_[i] = std::move(now);
  }
}

void AbService::loop() {
  auto next_refresh = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_until(lock, next_refresh,
                   [&] { return stopping_ || !queue_.empty() || sync_requests_ > syncs_done_; });
    if (stopping_) return;
    while (!queue_.empty()) {
      const Pending p = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      record(p);
      lock.lock();
    }
    const auto now = std::chrono::steady_clock::now();
    const std::uint64_t syncs = sync_requests_;
    if (now >= next_refresh || syncs > syncs_done_) {
      lock.unlock();
      refresh();
      lock.lock();
      next_refresh = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      syncs_done_ = syncs;
      idle_cv_.notify_all();
    }
  }
}

void AbService::sync() {
  std::unique_lock lock(mu_);
  const std::uint64_t ticket = ++sync_requests_;
  cv_.notify_all();
  idle_cv_.wait(lock, [&] { return syncs_done_ >= ticket || stopping_; });
}

std::vector<AbService::State> AbService::snapshot() const {
  std::lock_guard lock(mu_);
  return states_;
}

std::pair<int, std::string> AbService::route(std::string_view query) {
  const auto name = queryParam(query, "experiment");
  const auto unit = queryParam(query, "unit");
  if (!name || name->empty() || !unit || unit->empty() || unit->size() > 256)
    return {400, json({{"error", "expected ?experiment=NAME&unit=ID (unit: 1 to 256 bytes)"}}, {})};
  // Percent-decoding makes bytes, not text: the answer (and the store's keys) are UTF-8 only.
  if (!isValidUtf8(*name) || !isValidUtf8(*unit))
    return {400, json({{"error", "experiment and unit must be UTF-8 once percent-decoded"}}, {})};
  const AbExperiment* e = find(*name);
  if (!e)
    return {404, json({{"error", "unknown experiment '" + *name + "' (ab.experiments)"}}, {})};
  std::optional<std::size_t> winner;
  {
    std::lock_guard lock(mu_);
    const auto& t = states_[static_cast<std::size_t>(e - options_.experiments.data())].table;
    if (t.recorded) winner = t.recorded->winner;
  }
  if (winner)
    return {200, json({{"experiment", *name},
                       {"unit", *unit},
                       {"arm", e->arms[*winner]},
                       {"winner", e->arms[*winner]}},
                      {{"decided", true}, {"cached", false}})};
  const std::string proposed = e->arms[hashArm(*e, *unit)];
  const auto ttl = static_cast<std::int64_t>(options_.assignment_ttl_s * 1000);
  const auto stored = store_->assign(*e, *unit, proposed, ttl);
  const bool known = stored && armIndex(*e, *stored) < e->arms.size();
  return {200, json({{"experiment", *name}, {"unit", *unit}, {"arm", known ? *stored : proposed}},
                    {{"decided", false}, {"cached", stored.has_value()}})};
}

}  // namespace assay::ab
