#pragma once
/// systemd's service notification protocol (sd_notify(3), the unit's `Type=notify` and
/// `WatchdogSec=`; docs/configuration.md, "systemd"). Every call is a no-op when assayd is
/// not started by systemd (no NOTIFY_SOCKET in the environment). Thread-safe.

#include <string>

namespace assay::service {

/// READY=1 with a STATUS= line: the consumer subscribed, the admin endpoint listens and the
/// budget store answers. Once; later calls only update the status.
void ready(const std::string& status);
/// STATUS=<one line> (systemctl status shows it).
void status(const std::string& status);
/// STOPPING=1: the clean stop began.
void stopping();
/// WATCHDOG=1, at most once per quarter of the unit's WatchdogSec (WATCHDOG_USEC); call it
/// from every turn of a loop that makes progress: when the calls stop, systemd kills and
/// restarts the service after WatchdogSec. No-op without a watchdog.
void watchdog();
/// True when systemd expects READY=1 (NOTIFY_SOCKET is set).
bool supervised();

}  // namespace assay::service
