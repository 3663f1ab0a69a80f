#pragma once
/// `budget:` (docs/configuration.md): the daily cap in euros of every judge that calls a paid
/// API, the prices it is charged at, and where the ledger lives. Plain data; config/ fills it.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace assay {

/// A model price override, USD per million tokens (docs/configuration.md, "Money").
struct PriceOverride {
  std::string model;
  double input = 0, cached_input = 0, output = 0;
  double cache_write = 0;  ///< default: 1.25 × input (Anthropic's 5-minute cache write)
};

/// Caps are euros per local day in `timezone`.
struct BudgetOptions {
  double usd_to_eur = 0.92;
  double daily_limit_eur = 5.0;  ///< global cap, every LLM judge together
  double alert_ratio = 0.8;      ///< warn when spent ≥ ratio × cap
  std::string timezone = "UTC";  ///< IANA name, e.g. Europe/Paris
  std::string store = "memory";  ///< "memory" or redis://[:password@]host[:port][/db]
  /// Prefix of every Redis key; the loader's default is "assay:" + kafka.group_id + ":".
  std::string key_prefix;
  /// budget.password_file / password_env: replaces the password of the store's URL.
  std::optional<std::string> store_password;
  std::vector<PriceOverride> prices;  ///< add or override built-in model prices
  /// budget.tenants / budget.apps: daily caps per tenant or app (the event's `tenant`, `app`;
  /// "none" for an event without one), euros, each its own budget scope ("tenant:acme",
  /// "app:checkout") reserved with the global and per-judge ones. The key "*" is the cap of
  /// every tenant (app) not listed, each on its own; without it an unlisted one has no cap.
  std::vector<std::pair<std::string, double>> tenant_caps, app_caps;
};

}  // namespace assay
