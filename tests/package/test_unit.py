#!/usr/bin/env python3
"""The systemd unit as configured in the build directory (build/assayd.service):
`systemd-analyze verify` finds nothing to say once ExecStart names the built assayd, the
settings assayd's sd_notify protocol and restart policy rely on are there, and
`systemd-analyze security --offline=true` rates its exposure 2.0 or less (prints the figure).
Runs offline: no systemd manager is needed."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAX_EXPOSURE = 2.0

# Settings the daemon's behaviour depends on (docs/configuration.md, "The systemd unit").
REQUIRED = [
    "Type=notify", "NotifyAccess=main", "WatchdogSec=30s", "Restart=on-failure",
    "RestartPreventExitStatus=2", "StateDirectory=assay", "User=assay", "Group=assay",
    "CapabilityBoundingSet=", "SystemCallFilter=@system-service",
    "SystemCallFilter=~@privileged @resources", "SystemCallArchitectures=native",
    "ProtectProc=invisible", "ProcSubset=pid", "RestrictNamespaces=yes", "PrivateUsers=yes",
    "MemoryMax=1G", "UMask=0027",
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--unit", required=True, help="build/assayd.service")
    parser.add_argument("--assayd", required=True, help="the built assayd")
    args = parser.parse_args()
    if not shutil.which("systemd-analyze"):
        print("systemd-analyze is missing (Debian package systemd; scripts/setup installs it)")
        return 1

    with open(args.unit, encoding="utf-8") as f:
        text = f.read()
    lines = {line.strip() for line in text.splitlines()}
    failures = [f"missing line: {want}" for want in REQUIRED if want not in lines]

    execs = re.findall(r"^ExecStart=(\S+)", text, re.M)
    if len(execs) != 1 or not execs[0].endswith("/assayd"):
        failures.append(f"ExecStart= should run assayd once: {execs}")

    with tempfile.TemporaryDirectory(prefix="assay-unit-") as tmp:
        # verify checks that ExecStart's binary exists: point it at the one just built.
        unit = os.path.join(tmp, "assayd.service")
        with open(unit, "w", encoding="utf-8") as f:
            f.write(re.sub(r"^ExecStart=\S+", "ExecStart=" + os.path.abspath(args.assayd),
                           text, flags=re.M))
        verify = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True,
                                text=True, check=False, cwd=tmp)
        said = (verify.stdout + verify.stderr).strip()
        print(f"systemd-analyze verify: exit {verify.returncode}" + (f"\n{said}" if said else ""))
        if verify.returncode != 0 or said:
            failures.append("systemd-analyze verify is not clean")

        security = subprocess.run(
            ["systemd-analyze", "security", "--offline=true", "--no-pager",
             f"--threshold={int(MAX_EXPOSURE * 10)}", unit],
            capture_output=True, text=True, check=False, cwd=tmp)
        out = security.stdout + security.stderr
        for line in out.splitlines():
            if line.startswith("✗"):
                print("  " + re.sub(r"\s{2,}", "  ", line))
        match = re.search(r"Overall exposure level for assayd\.service: ([0-9.]+) (\S+)", out)
        if not match:
            print(out)
            failures.append("no exposure figure in systemd-analyze security's output")
        else:
            exposure = float(match.group(1))
            print(f"systemd-analyze security: exposure {exposure} {match.group(2)} "
                  f"(at most {MAX_EXPOSURE})")
            if exposure > MAX_EXPOSURE or security.returncode != 0:
                failures.append(f"exposure {exposure} is above {MAX_EXPOSURE}")

    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
