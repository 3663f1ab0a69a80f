// The Redis budget store: URL parsing, the connection, and the Lua scripts documented in
// budget.hpp (keep the two in step).
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string_view>

#include "core/log_text.hpp"
#include "judges/llm/budget.hpp"

namespace assay::llm {

namespace {

// ---------------------------------------------------------------------------------------------
// Lua scripts. Times are the Redis server's (TIME), in milliseconds. Amounts are integer
// nano-euros; Lua numbers are doubles, exact below 2^53 n€ (kMaxLedgerEuros keeps sums there).

// Drops the reservations of scope i (0-based, KEYS laid out as spent, res, resexp per scope)
// whose expiry is <= now. Shared prefix of the reserve and snapshot scripts.
constexpr const char* kLuaPrelude = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function reclaim(i)
  local res, resexp = KEYS[3 * i + 2], KEYS[3 * i + 3]
  local expired = redis.call('ZRANGEBYSCORE', resexp, '-inf', now)
  for _, id in ipairs(expired) do redis.call('HDEL', res, id) end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', resexp, '-inf', now) end
end
local function held(i)
  local total = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[3 * i + 2])) do total = total + tonumber(v) end
  return total
end
)lua";

// KEYS: (spent, res, resexp) per scope. ARGV: amount, id, ttl_ms, key_ttl_ms, limit per scope,
// close_on_refusal ("1"/"0").
// Returns {1, 0} reserved (or already live), {0, i} scope i (1-based) exhausted, {2, i} scope i
// busy (close_on_refusal only).
constexpr const char* kLuaReserve = R"lua(
local n = #KEYS / 3
local amount, id = tonumber(ARGV[1]), ARGV[2]
for i = 0, n - 1 do reclaim(i) end
if redis.call('HEXISTS', KEYS[2], id) == 1 then return {1, 0} end
for i = 0, n - 1 do
  -- Closing marks (score +inf, never reclaimed) carry the cap they closed under: a scope is
  -- closed for a cap no larger than that one, and open again under a raised cap (a reload).
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3 * i + 3], '+inf', '+inf')) do
    local at = string.match(m, '^__exhausted__:(%d+)$')
    if m == '__exhausted__' or (at and tonumber(ARGV[5 + i]) <= tonumber(at)) then
      return {0, i + 1}
    end
  end
end
for i = 0, n - 1 do
  local spent = tonumber(redis.call('GET', KEYS[3 * i + 1]) or '0')
  if spent + held(i) + amount > tonumber(ARGV[5 + i]) then
    -- With close_on_refusal: when the settled spend alone leaves no room for this call the
    -- scope is closed for the day (a member that never expires marks it, so every later call,
    -- from any daemon, restarted or not, is refused until the next day's keys); when only the
    -- reservations in flight stand in the way, the answer is "busy" (retry after they settle).
    if ARGV[5 + n] == '1' then
      if spent + amount <= tonumber(ARGV[5 + i]) then return {2, i + 1} end
      redis.call('ZADD', KEYS[3 * i + 3], '+inf', '__exhausted__:' .. ARGV[5 + i])
      redis.call('PEXPIRE', KEYS[3 * i + 3], ARGV[4])
    end
    return {0, i + 1}
  end
end
local expiry = now + tonumber(ARGV[3])
for i = 0, n - 1 do
  redis.call('HSET', KEYS[3 * i + 2], id, ARGV[1])
  redis.call('ZADD', KEYS[3 * i + 3], expiry, id)
  for k = 1, 3 do redis.call('PEXPIRE', KEYS[3 * i + k], ARGV[4]) end
end
return {1, 0}
)lua";

// KEYS: settled, by_instance, then (spent, res, resexp) per scope. ARGV: id, actual,
// key_ttl_ms, instance. Returns 1 charged now, 0 already charged before. by_instance keeps,
// per spent key and instance, what that instance settled (the re-assert script's reference).
constexpr const char* kLuaSettle = R"lua(
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
for i = 3, #KEYS, 3 do
  redis.call('HDEL', KEYS[i + 1], ARGV[1])
  redis.call('ZREM', KEYS[i + 2], ARGV[1])
  redis.call('INCRBY', KEYS[i], ARGV[2])
  redis.call('HINCRBY', KEYS[2], KEYS[i] .. '|' .. ARGV[4], ARGV[2])
  for k = 0, 2 do redis.call('PEXPIRE', KEYS[i + k], ARGV[3]) end
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
)lua";

// KEYS: by_instance, then one spent key per scope. ARGV: instance, key_ttl_ms, then what this
// instance settled today per scope (n€). Where Redis remembers less than that (it restarted
// empty, or from an older snapshot), the difference is added back to the spend. Returns the
// most n€ added to one scope (every scope of a call is charged alike: the amount lost).
constexpr const char* kLuaReassert = R"lua(
local added = 0
for j = 2, #KEYS do
  local field = KEYS[j] .. '|' .. ARGV[1]
  local have = tonumber(redis.call('HGET', KEYS[1], field) or '0')
  local mine = tonumber(ARGV[j + 1])
  if have < mine then
    redis.call('INCRBY', KEYS[j], mine - have)
    redis.call('HSET', KEYS[1], field, mine)
    redis.call('PEXPIRE', KEYS[j], ARGV[2])
    added = math.max(added, mine - have)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return added
)lua";

// KEYS: (spent, res, resexp) per scope. ARGV: id.
constexpr const char* kLuaRelease = R"lua(
for i = 1, #KEYS, 3 do
  redis.call('HDEL', KEYS[i + 1], ARGV[1])
  redis.call('ZREM', KEYS[i + 2], ARGV[1])
end
return 1
)lua";

// KEYS: spent, res, resexp. Returns {spent as a string (exact int64), outstanding}.
constexpr const char* kLuaSnapshot = R"lua(
reclaim(0)
return {redis.call('GET', KEYS[1]) or '0', held(0)}
)lua";

// KEYS: the verdict key. ARGV: token, lease_ms. {1, verdict} stored; {2, pttl} another call's
// live lease; {0, ""} the lease is the token's (taken now, or already: a retried request).
constexpr const char* kLuaClaim = R"lua(
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, 2) == 'V:' then return {1, string.sub(v, 3)} end
  if v ~= 'L:' .. ARGV[1] then return {2, tostring(redis.call('PTTL', KEYS[1]))} end
end
redis.call('SET', KEYS[1], 'L:' .. ARGV[1], 'PX', ARGV[2])
return {0, ''}
)lua";

// KEYS: the verdict key. ARGV: token. Drops the lease if it is the token's.
constexpr const char* kLuaUnclaim = R"lua(
if redis.call('GET', KEYS[1]) == 'L:' .. ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

// ---------------------------------------------------------------------------------------------
// Keys

// 64 random bits in hex: names this store object's share of a day's spend (by_instance).
std::string randomInstanceId() {
  std::random_device rd;
  const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[static_cast<std::size_t>(i)] = kHex[(v >> (4 * i)) & 0xF];
  return s;
}

std::string dayPrefix(std::string_view prefix, std::string_view day) {
  // The braces are a Redis Cluster hash tag: one day's keys share a slot.
  std::string k(prefix);
  k.append("budget:{").append(day).append("}:");
  return k;
}

void appendScopeKeys(std::vector<std::string>& keys, std::string_view prefix, std::string_view day,
                     std::string_view scope) {
  std::string base = dayPrefix(prefix, day);
  base.append(scope);
  keys.push_back(base + ":spent");
  keys.push_back(base + ":res");
  keys.push_back(base + ":resexp");
}

// ---------------------------------------------------------------------------------------------
// URL

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[noreturn]] void badUrl(const std::string& why) {
  throw std::invalid_argument(
      "budget.store: " + why +
      " (expected redis://[[user]:password@]host[:port][/db][?command_timeout_ms=N"
      "&connect_timeout_ms=N])");
}

/// `s` with its %-escapes decoded; `what` names it in an error, which never quotes it.
std::string percentDecode(std::string_view s, const char* what) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) badUrl(std::string("truncated %-escape in ") + what);
    const int hi = hexValue(s[i + 1]), lo = hexValue(s[i + 2]);
    if (hi < 0 || lo < 0) badUrl(std::string("bad %-escape in ") + what);
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

int parseNumber(std::string_view s, int min, int max, const char* what) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min || v > max) {
    // Never quoted: a password pasted without its '@' reads as a port.
    badUrl(std::string("the ") + what + " is not an integer in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]");
  }
  return v;
}

timeval toTimeval(std::int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms % 1000) * 1000);
  return tv;
}

std::string endpoint(const RedisOptions& o) {
  const bool v6 = o.host.find(':') != std::string::npos;
  return (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
}

}  // namespace

RedisOptions parseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.starts_with("rediss://")) badUrl("TLS (rediss://) is not supported yet");
  if (!url.starts_with(kScheme)) badUrl("not a redis:// URL");  // unquoted: it may hold secrets
  std::string_view rest = url.substr(kScheme.size());
  RedisOptions o;
  // The credentials first, up to the last '@' (a password may hold '/', '?', '#' or '@'
  // unescaped): no message below can quote a part of them.
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos)
      badUrl("credentials need ':password@' or 'user:password@'");
    o.username = percentDecode(userinfo.substr(0, colon), "the user name");
    o.password = percentDecode(userinfo.substr(colon + 1), "the password");
    rest = rest.substr(at + 1);
  }
  if (rest.find('#') != std::string_view::npos) badUrl("a fragment is not supported");
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      const std::size_t eq = param.find('=');
      const std::string_view key = param.substr(0, eq);
      const std::string_view value =
          eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
      if (key == "command_timeout_ms")
        o.command_timeout_ms = parseNumber(value, 1, 600'000, "command_timeout_ms");
      else if (key == "connect_timeout_ms")
        o.connect_timeout_ms = parseNumber(value, 1, 600'000, "connect_timeout_ms");
      else
        badUrl("unknown parameter (known: command_timeout_ms, connect_timeout_ms)");
    }
  }

  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view path = rest.substr(slash + 1);
    if (!path.empty()) o.db = parseNumber(path, 0, 1'000'000, "database number");
  }
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:port
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) badUrl("unclosed '[' in host");
    o.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') badUrl("unexpected text after ']'");
      port = after.substr(1);
      if (port.empty()) badUrl("empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.find(':') != std::string_view::npos) badUrl("an IPv6 host needs [brackets]");
      if (port.empty()) badUrl("empty port");
    }
    o.host = std::string(authority.substr(0, colon));
  }
  if (o.host.empty()) badUrl("no host");  // unquoted: the URL may hold a password
  if (!port.empty()) o.port = parseNumber(port, 1, 65535, "port");
  return o;
}

// ---------------------------------------------------------------------------------------------
// RedisBudgetStore

void RedisBudgetStore::ReplyDeleter::operator()(void* reply) const { freeReplyObject(reply); }
void RedisBudgetStore::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisBudgetStore::RedisBudgetStore(RedisOptions options)
    : options_(std::move(options)),
      reserve_script_{std::string(kLuaPrelude) + kLuaReserve, {}},
      settle_script_{kLuaSettle, {}},
      release_script_{kLuaRelease, {}},
      snapshot_script_{std::string(kLuaPrelude) + kLuaSnapshot, {}},
      claim_script_{kLuaClaim, {}},
      unclaim_script_{kLuaUnclaim, {}},
      reassert_script_{kLuaReassert, {}},
      instance_(randomInstanceId()) {
  if (options_.host.empty() || options_.port < 1 || options_.port > 65535 || options_.db < 0 ||
      options_.connect_timeout_ms <= 0 || options_.command_timeout_ms <= 0 ||
      options_.reconnect_backoff_ms < 0) {
    throw std::invalid_argument("budget.store: invalid Redis options for " + endpoint(options_));
  }
}

RedisBudgetStore::~RedisBudgetStore() = default;

std::string RedisBudgetStore::describe() const {
  std::string d = "redis " + endpoint(options_) + " db " + std::to_string(options_.db);
  if (!options_.password.empty()) {
    d += options_.username.empty() ? " with password" : " as user " + options_.username;
  }
  return d + " (shared between instances, kept across restarts)";
}

void RedisBudgetStore::dropConnectionLocked() { context_.reset(); }

void RedisBudgetStore::connectFailedLocked(const std::string& why, std::string& error) {
  dropConnectionLocked();
  next_connect_attempt_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.reconnect_backoff_ms);
  last_error_ = why;
  error = why;
  if (!reported_down_) {
    reported_down_ = true;
    spdlog::warn("budget store: {}; LLM judges are skipped (fail closed) until Redis answers", why);
  }
}

RedisBudgetStore::Reply RedisBudgetStore::commandLocked(const std::vector<std::string>& argv,
                                                        std::string& error) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw =
      redisCommandArgv(context_.get(), static_cast<int>(argv.size()), ptrs.data(), lens.data());
  timed_out_ = false;
  if (raw == nullptr) {
    // An I/O error or timeout leaves the context unusable: drop it, the next call reconnects.
    // A timeout is a server that accepts and does not answer (stopped, swapping, a long
    // script): reconnecting at once would cost every call another command timeout on the
    // ledger's thread, so the reconnect back-off starts.
    const int io_errno = errno;
    // hiredis 0.14 reports a read timeout as an I/O error with errno EAGAIN.
    timed_out_ = context_->err == REDIS_ERR_IO &&
                 (io_errno == EAGAIN || io_errno == EWOULDBLOCK ||
                  std::string_view(context_->errstr).find("temporarily unavailable") !=
                      std::string_view::npos);
    error = "redis " + endpoint(options_) + ": " +
            (timed_out_ ? "no answer within command_timeout_ms (" +
                              std::to_string(options_.command_timeout_ms) + " ms)"
             : context_->errstr[0] != '\0' ? std::string(context_->errstr)
                                           : std::string("I/O error"));
    if (timed_out_)
      connectFailedLocked(std::string(error), error);
    else
      dropConnectionLocked();
  }
  return Reply(raw);
}

bool RedisBudgetStore::ensureConnectedLocked(std::string& error) {
  if (context_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_connect_attempt_) {
    error = last_error_ + " (next attempt within " + std::to_string(options_.reconnect_backoff_ms) +
            " ms)";
    return false;
  }
  const std::string where = "redis " + endpoint(options_);
  redisContext* raw = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                              toTimeval(options_.connect_timeout_ms));
  if (raw == nullptr || raw->err != 0) {
    const std::string why = where + " unreachable: " + (raw ? raw->errstr : "out of memory");
    if (raw) redisFree(raw);
    connectFailedLocked(why, error);
    return false;
  }
  context_.reset(raw);
  if (redisSetTimeout(raw, toTimeval(options_.command_timeout_ms)) != REDIS_OK) {
    connectFailedLocked(where + ": cannot set the command timeout", error);
    return false;
  }
  redisEnableKeepAlive(raw);

  // One set-up command; null (with the connection dropped) on failure or an error reply.
  auto setup = [&](const std::vector<std::string>& argv, const char* what) -> Reply {
    std::string io_error;
    Reply reply = commandLocked(argv, io_error);
    if (!reply) {
      connectFailedLocked(io_error, error);
      return nullptr;
    }
    const auto* r = static_cast<const redisReply*>(reply.get());
    if (r->type == REDIS_REPLY_ERROR) {
      connectFailedLocked(where + ": " + what + " failed: " + std::string(r->str, r->len), error);
      return nullptr;
    }
    return reply;
  };
  if (!options_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options_.username.empty()) auth.push_back(options_.username);
    auth.push_back(options_.password);
    if (!setup(auth, "AUTH")) return false;
  }
  if (options_.db != 0 && !setup({"SELECT", std::to_string(options_.db)}, "SELECT")) return false;
  for (Script* s : {&reserve_script_, &settle_script_, &release_script_, &snapshot_script_,
                    &claim_script_, &unclaim_script_, &reassert_script_}) {
    Reply reply = setup({"SCRIPT", "LOAD", s->body}, "SCRIPT LOAD");
    if (!reply) return false;
    const auto* r = static_cast<const redisReply*>(reply.get());
    if (r->type != REDIS_REPLY_STRING) {
      connectFailedLocked(where + ": SCRIPT LOAD returned no SHA", error);
      return false;
    }
    s->sha.assign(r->str, r->len);
  }
  // Before anything is reserved on this connection: the spend this instance settled is put
  // back if Redis lost it (restarted empty, or from an older snapshot).
  for (const auto& [day, scopes] : settled_here_) {
    std::vector<std::string> argv = {"EVALSHA", reassert_script_.sha,
                                     std::to_string(1 + scopes.size()),
                                     dayPrefix(options_.key_prefix, day) + "by_instance"};
    for (const auto& [scope, nano] : scopes)
      argv.push_back(dayPrefix(options_.key_prefix, day) + scope + ":spent");
    argv.push_back(instance_);
    argv.push_back(std::to_string(kLedgerTtlMs));
    for (const auto& [scope, nano] : scopes) argv.push_back(std::to_string(nano));
    Reply reply = setup(argv, "re-asserting this instance's settled spend");
    if (!reply) return false;
    const auto* r = static_cast<const redisReply*>(reply.get());
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
      spdlog::warn(
          "budget store: {} had lost EUR {:.6f} of what this instance settled on {}; added back "
          "(Redis restarted empty or from an older snapshot)",
          where, nanoToEuros(r->integer), day);
  }
  if (reported_down_) {
    reported_down_ = false;
    spdlog::info("budget store: {} answers again", where);
  }
  return true;
}

RedisBudgetStore::Reply RedisBudgetStore::runLocked(std::vector<std::string>& argv,
                                                    const Script* script, std::string& error) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = context_ != nullptr;
    if (!ensureConnectedLocked(error)) return nullptr;
    if (script != nullptr) {
      argv[0] = "EVALSHA";
      argv[1] = script->sha;
    }
    Reply reply = commandLocked(argv, error);
    if (reply && script != nullptr) {
      const auto* r = static_cast<const redisReply*>(reply.get());
      // The script cache was flushed (SCRIPT FLUSH, a restart or failover behind the same
      // address): EVAL sends the body and caches it again under the same SHA.
      if (r->type == REDIS_REPLY_ERROR &&
          std::string_view(r->str, r->len).starts_with("NOSCRIPT")) {
        argv[0] = "EVAL";
        argv[1] = script->body;
        reply = commandLocked(argv, error);
      }
    }
    if (reply) {
      const auto* r = static_cast<const redisReply*>(reply.get());
      if (r->type == REDIS_REPLY_ERROR) {
        error = "redis " + endpoint(options_) + ": " + std::string(r->str, r->len);
        return nullptr;
      }
      return reply;
    }
    // An I/O failure on a connection made earlier (the server restarted, an idle connection was
    // cut) deserves one fresh connection; every command here is idempotent, so a retry is safe.
    // Not a timeout: the server is there and does not answer.
    if (!reused || timed_out_) return nullptr;
  }
  return nullptr;
}

RedisBudgetStore::Reply RedisBudgetStore::evalLocked(const Script& script,
                                                     const std::vector<std::string>& keys,
                                                     const std::vector<std::string>& args,
                                                     std::string& error) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.emplace_back("EVALSHA");
  argv.emplace_back();  // SHA or body, filled in by runLocked
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return runLocked(argv, &script, error);
}

RedisBudgetStore::ScriptReply RedisBudgetStore::runScript(const std::string& script,
                                                          const std::vector<std::string>& keys,
                                                          const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"EVAL", script, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  ScriptReply out;
  std::lock_guard lock(mu_);
  Reply reply = runLocked(argv, nullptr, out.error);
  if (!reply) return out;
  const auto* r = static_cast<const redisReply*>(reply.get());
  const auto text = [](const redisReply* e) {
    if (e->type == REDIS_REPLY_INTEGER) return std::to_string(e->integer);
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS)
      return std::string(e->str, e->len);
    return std::string();
  };
  out.ok = true;
  if (r->type == REDIS_REPLY_INTEGER) out.integer = r->integer;
  if (r->type == REDIS_REPLY_ARRAY)
    for (std::size_t i = 0; i < r->elements; ++i) out.values.push_back(text(r->element[i]));
  else if (r->type != REDIS_REPLY_NIL)
    out.values.push_back(text(r));
  return out;
}

bool RedisBudgetStore::ping() {
  std::lock_guard lock(mu_);
  std::string error;
  std::vector<std::string> argv = {"PING"};
  Reply reply = runLocked(argv, nullptr, error);
  return reply != nullptr;
}

ReserveResult RedisBudgetStore::doReserve(const ScopeList& scopes, std::int64_t amount_nano,
                                          std::string_view day, std::string_view reservation_id,
                                          std::int64_t ttl_ms, bool close_on_refusal) {
  std::vector<std::string> keys;
  keys.reserve(3 * scopes.size());
  std::vector<std::string> args = {std::to_string(amount_nano), std::string(reservation_id),
                                   std::to_string(ttl_ms), std::to_string(kLedgerTtlMs)};
  for (const ScopeNano& s : scopes) {
    appendScopeKeys(keys, options_.key_prefix, day, s.scope);
    args.push_back(std::to_string(s.limit_nano));
  }
  args.push_back(close_on_refusal ? "1" : "0");
  ReserveResult result;
  std::lock_guard lock(mu_);
  Reply reply = evalLocked(reserve_script_, keys, args, result.error);
  if (!reply) return result;  // kUnavailable with the error
  const auto* r = static_cast<const redisReply*>(reply.get());
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER) {
    const long long index = r->element[1]->integer;
    if (r->element[0]->integer == 1) return {ReserveStatus::kReserved, {}, {}};
    if (r->element[0]->integer == 2 && index >= 1 && index <= static_cast<long long>(scopes.size()))
      return {ReserveStatus::kBusy, std::string(scopes[index - 1].scope), {}};
    if (index >= 1 && index <= static_cast<long long>(scopes.size())) {
      return {ReserveStatus::kExhausted, std::string(scopes[index - 1].scope), {}};
    }
  }
  result.error = "redis " + endpoint(options_) + ": unexpected reply to the reserve script";
  return result;
}

bool RedisBudgetStore::doSettle(std::string_view reservation_id, std::string_view day,
                                const ScopeList& scopes, std::int64_t actual_nano) {
  std::vector<std::string> keys = {dayPrefix(options_.key_prefix, day) + "settled",
                                   dayPrefix(options_.key_prefix, day) + "by_instance"};
  for (const ScopeNano& s : scopes) appendScopeKeys(keys, options_.key_prefix, day, s.scope);
  const std::vector<std::string> args = {std::string(reservation_id), std::to_string(actual_nano),
                                         std::to_string(kLedgerTtlMs), instance_};
  std::string error;
  std::lock_guard lock(mu_);
  Reply reply = evalLocked(settle_script_, keys, args, error);
  const auto* r = static_cast<const redisReply*>(reply.get());
  // The money is spent whether or not Redis heard of it: a settlement Redis did not record (it
  // was down) is re-asserted with the rest on the next connection; one it did record is not
  // added twice (by_instance already holds it). An id settled before (0) adds nothing.
  if (!r || (r->type == REDIS_REPLY_INTEGER && r->integer == 1)) {
    auto& here = settled_here_[std::string(day)];
    for (const ScopeNano& s : scopes) here[std::string(s.scope)] += actual_nano;
    while (settled_here_.size() > 2) settled_here_.erase(settled_here_.begin());  // oldest day
  }
  return r != nullptr;
}

bool RedisBudgetStore::doRelease(std::string_view reservation_id, std::string_view day,
                                 const ScopeList& scopes) {
  std::vector<std::string> keys;
  for (const ScopeNano& s : scopes) appendScopeKeys(keys, options_.key_prefix, day, s.scope);
  std::string error;
  std::lock_guard lock(mu_);
  return evalLocked(release_script_, keys, {std::string(reservation_id)}, error) != nullptr;
}

Snapshot RedisBudgetStore::doSpent(std::string_view scope, std::string_view day) {
  std::vector<std::string> keys;
  appendScopeKeys(keys, options_.key_prefix, day, scope);
  std::string error;
  std::lock_guard lock(mu_);
  Reply reply = evalLocked(snapshot_script_, keys, {}, error);
  Snapshot snap;
  if (!reply) return snap;
  const auto* r = static_cast<const redisReply*>(reply.get());
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_INTEGER) {
    return snap;
  }
  const std::string_view spent(r->element[0]->str, r->element[0]->len);
  const auto [end, ec] =
      std::from_chars(spent.data(), spent.data() + spent.size(), snap.spent_nano);
  if (ec != std::errc() || end != spent.data() + spent.size()) return snap;
  snap.outstanding_nano = r->element[1]->integer;
  snap.spent_eur = nanoToEuros(snap.spent_nano);
  snap.outstanding_eur = nanoToEuros(snap.outstanding_nano);
  snap.available = true;
  return snap;
}

namespace {
std::string verdictKey(std::string_view prefix, std::string_view event_id, std::string_view judge) {
  std::string key(prefix);
  key.append("verdict:");
  key.append(judge).append(":").append(event_id);
  return key;
}
}  // namespace

ClaimResult RedisBudgetStore::doClaim(std::string_view event_id, std::string_view judge,
                                      std::string_view token, std::int64_t lease_ms) {
  ClaimResult out;
  std::lock_guard lock(mu_);
  Reply reply = evalLocked(claim_script_, {verdictKey(options_.key_prefix, event_id, judge)},
                           {std::string(token), std::to_string(lease_ms)}, out.error);
  if (!reply) return out;
  const auto* r = static_cast<const redisReply*>(reply.get());
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING) {
    out.error = "unexpected reply to the claim script";
    return out;
  }
  const std::string_view text(r->element[1]->str, r->element[1]->len);
  switch (r->element[0]->integer) {
    case 0:
      out.status = ClaimResult::Status::kClaimed;
      break;
    case 1:
      out.status = ClaimResult::Status::kStored;
      out.verdict = std::string(text);
      break;
    default:
      out.status = ClaimResult::Status::kLeased;
      std::from_chars(text.data(), text.data() + text.size(), out.lease_left_ms);
      break;
  }
  return out;
}

bool RedisBudgetStore::doStoreVerdict(std::string_view event_id, std::string_view judge,
                                      std::string_view verdict, std::int64_t ttl_ms) {
  std::vector<std::string> argv = {"SET", verdictKey(options_.key_prefix, event_id, judge),
                                   "V:" + std::string(verdict), "PX", std::to_string(ttl_ms)};
  std::string error;
  std::lock_guard lock(mu_);
  return static_cast<bool>(runLocked(argv, nullptr, error));
}

bool RedisBudgetStore::doReleaseClaim(std::string_view event_id, std::string_view judge,
                                      std::string_view token) {
  std::string error;
  std::lock_guard lock(mu_);
  return static_cast<bool>(evalLocked(unclaim_script_,
                                      {verdictKey(options_.key_prefix, event_id, judge)},
                                      {std::string(token)}, error));
}

// ---- Batches in flight: a hash of records per judge, and one lease key per batch.

namespace {
std::string batchesKey(const std::string& prefix, std::string_view judge) {
  return prefix + "batches:" + std::string(judge);
}
std::string batchLeaseKey(const std::string& prefix, std::string_view judge, std::string_view id) {
  return prefix + "batchlease:" + std::string(judge) + ":" + std::string(id);
}
}  // namespace

bool RedisBudgetStore::saveBatch(std::string_view judge, std::string_view batch_id,
                                 std::string_view record) {
  return runScript("return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])",
                   {batchesKey(options_.key_prefix, judge)},
                   {std::string(batch_id), std::string(record)})
      .ok;
}

std::optional<std::vector<std::pair<std::string, std::string>>> RedisBudgetStore::batchRecords(
    std::string_view judge) {
  const auto r = runScript("return redis.call('HGETALL', KEYS[1])",
                           {batchesKey(options_.key_prefix, judge)}, {});
  if (!r.ok) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i + 1 < r.values.size(); i += 2)
    out.emplace_back(r.values[i], r.values[i + 1]);
  return out;
}

bool RedisBudgetStore::leaseBatch(std::string_view judge, std::string_view batch_id,
                                  std::string_view token, std::int64_t lease_ms) {
  // Take the lease when it is free or already ours; a live lease of another token wins.
  const auto r = runScript(
      "local cur = redis.call('GET', KEYS[1]) "
      "if cur == false or cur == ARGV[1] then "
      "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
      "return 0",
      {batchLeaseKey(options_.key_prefix, judge, batch_id)},
      {std::string(token), std::to_string(lease_ms)});
  return r.ok && r.integer == 1;
}

bool RedisBudgetStore::removeBatch(std::string_view judge, std::string_view batch_id) {
  return runScript("redis.call('HDEL', KEYS[1], ARGV[1]) return redis.call('DEL', KEYS[2])",
                   {batchesKey(options_.key_prefix, judge),
                    batchLeaseKey(options_.key_prefix, judge, batch_id)},
                   {std::string(batch_id)})
      .ok;
}

}  // namespace assay::llm
