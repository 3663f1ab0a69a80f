#!/usr/bin/env python3
"""The Debian package: builds it with CPack from the build directory ctest runs in (the binaries
are already built there), unpacks it into a scratch root (dpkg-deb -x, -e) and checks what an
operator gets: stripped binaries that run, the unit (systemd-analyze verify against the
packaged binary), the sysusers.d file (systemd-sysusers creates the assay user in the scratch
root), /etc/assay/assayd.yaml listed as a conffile, maintainer scripts that neither enable nor
start the service, rules and dashboard under /usr/share/assay, the documentation with every
relative link and every docs/*.md it names resolving, copyright and changelog.Debian.gz, man
pages. Then lintian: any E: fails, warnings are printed."""
import argparse
import filecmp
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FAILURES = []


def check(condition, message):
    if not condition:
        FAILURES.append(message)
        print("FAIL: " + message)
    return condition


def run(cmd, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)


def control_fields(control_dir):
    fields = {}
    with open(os.path.join(control_dir, "control"), encoding="utf-8") as f:
        key = None
        for line in f:
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
    return fields


LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
DOC_MENTION = re.compile(r"(?<![\w/.-])(docs/[A-Za-z0-9_.-]+\.md)\b")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def check_doc_links(doc_root):
    """Every relative Markdown link of an installed .md file points at an installed file
    (relative to the file), and every docs/NAME.md the text names exists under the doc root
    (the docs name files by their path in the repository, whose layout the install keeps)."""
    checked = 0
    for md in sorted(glob.glob(os.path.join(doc_root, "**", "*.md"), recursive=True)):
        with open(md, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(md, doc_root)
        for target in LINK.findall(text) + REF_DEF.findall(text):
            if SCHEME.match(target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            resolved = os.path.normpath(os.path.join(os.path.dirname(md), path))
            checked += 1
            check(os.path.exists(resolved), f"{rel}: link ({target}) does not resolve once installed")
        for mention in sorted(set(DOC_MENTION.findall(text))):
            checked += 1
            check(os.path.isfile(os.path.join(doc_root, mention)),
                  f"{rel}: names {mention}, which is not installed")
    return checked


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", required=True)
    args = parser.parse_args()
    src, build = os.path.abspath(args.source), os.path.abspath(args.build)
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps", "readelf", "file", "lintian",
                 "systemd-analyze", "systemd-sysusers"):
        if not shutil.which(tool):
            print(f"{tool} is missing (scripts/setup installs it)")
            return 1
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="assay-deb-") as scratch:
        out, root, control = (os.path.join(scratch, d) for d in ("out", "root", "control"))
        cpack = run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"),
                     "-B", out], cwd=build)
        if cpack.returncode != 0:
            print(cpack.stdout + cpack.stderr)
            print("FAIL: cpack")
            return 1
        debs = glob.glob(os.path.join(out, "*.deb"))
        if not check(len(debs) == 1, f"cpack made {debs}, not one .deb"):
            return 1
        deb = debs[0]
        print(f"{os.path.basename(deb)}: {os.path.getsize(deb)} bytes, cpack "
              f"{time.monotonic() - started:.1f} s")
        for flag, where in (("-x", root), ("-e", control)):
            unpack = run(["dpkg-deb", flag, deb, where])
            if not check(unpack.returncode == 0, f"dpkg-deb {flag}: {unpack.stderr}"):
                return 1
        print(run(["dpkg-deb", "-c", deb]).stdout)

        # control
        fields = control_fields(control)
        with open(os.path.join(src, "CMakeLists.txt"), encoding="utf-8") as f:
            version = re.search(r"project\(assay VERSION (\S+)", f.read()).group(1)
        check(fields.get("Package") == "assay", f"Package: {fields.get('Package')}")
        check(fields.get("Version") == version + "-1", f"Version: {fields.get('Version')}")
        for lib in ("librdkafka", "libyaml-cpp", "libicu", "libssl", "libhiredis", "libc6"):
            check(lib in fields.get("Depends", ""), f"Depends lacks {lib}: {fields.get('Depends')}")
        for key in ("Maintainer", "Section", "Priority", "Description"):
            check(fields.get(key), f"control has no {key}")

        # binaries: present, stripped, running
        for program in ("assayd", "assay"):
            binary = os.path.join(root, "usr/bin", program)
            if not check(os.access(binary, os.X_OK), f"/usr/bin/{program} missing"):
                continue
            sections = run(["readelf", "-S", "-W", binary]).stdout
            check(".symtab" not in sections and ".debug_" not in sections,
                  f"/usr/bin/{program} is not stripped")
            described = run(["file", "-b", binary]).stdout
            check(", stripped" in described, f"file: /usr/bin/{program}: {described.strip()}")
            ran = run([binary, "--version"])
            check(ran.returncode == 0 and ran.stdout.strip() == f"{program} {version}",
                  f"/usr/bin/{program} --version: {ran.returncode} {ran.stdout}{ran.stderr}")
            page = os.path.join(root, f"usr/share/man/man1/{program}.1.gz")
            if check(os.path.isfile(page), f"no manual page for {program}"):
                # Rendered as man shows it: no roff request leaks into the text (a CMake list
                # once joined the FILES entries with ';', showing ';.TP').
                shown = run(["sh", "-c", f"zcat {page} | groff -man -Tutf8 -P -cbou 2>&1"]).stdout
                path = "/var/lib/assay" if program == "assayd" else "/usr/share/assay"
                check("FILES" in shown and ".TP" not in shown and path in shown,
                      f"man {program}: FILES section: {shown[shown.find('FILES'):][:400]}")

        # conffiles: every file under /etc, the example configuration as /etc/assay/assayd.yaml
        conffiles_path = os.path.join(control, "conffiles")
        conffiles = (open(conffiles_path, encoding="utf-8").read().split()
                     if os.path.exists(conffiles_path) else [])
        etc_files = sorted("/" + os.path.relpath(os.path.join(d, n), root)
                           for d, _, names in os.walk(os.path.join(root, "etc")) for n in names)
        check(etc_files == ["/etc/assay/assayd.yaml"], f"files under /etc: {etc_files}")
        check(conffiles == ["/etc/assay/assayd.yaml"], f"DEBIAN/conffiles: {conffiles}")
        check(filecmp.cmp(os.path.join(root, "etc/assay/assayd.yaml"),
                          os.path.join(src, "config/assayd.example.yaml"), shallow=False),
              "/etc/assay/assayd.yaml is not config/assayd.example.yaml")

        # the unit, verified against the packaged binary, inside the scratch root
        unit = os.path.join(root, "usr/lib/systemd/system/assayd.service")
        if check(os.path.isfile(unit), "/usr/lib/systemd/system/assayd.service missing"):
            with open(unit, encoding="utf-8") as f:
                text = f.read()
            check("\nExecStart=/usr/bin/assayd --config /etc/assay/assayd.yaml\n" in text,
                  "the unit's ExecStart is not /usr/bin/assayd --config /etc/assay/assayd.yaml")
            check("\nType=notify\n" in text, "the unit is not Type=notify")
            for doc in re.findall(r"^Documentation=file://(\S+)", text, re.M):
                check(os.path.isfile(root + doc), f"the unit's Documentation {doc} is not installed")
            # verify needs what every Debian system has in the root it looks at: the standard
            # targets (sysinit.target...) and ExecReload's /bin/kill (util-linux, Essential).
            os.makedirs(os.path.join(root, "bin"), exist_ok=True)
            if not os.path.exists(os.path.join(root, "bin/kill")):
                shutil.copy("/bin/kill", os.path.join(root, "bin/kill"))
            for target in glob.glob("/usr/lib/systemd/system/*.target"):
                dest = os.path.join(root, "usr/lib/systemd/system", os.path.basename(target))
                if not os.path.exists(dest):
                    shutil.copy(target, dest)
            verify = run(["systemd-analyze", "verify", f"--root={root}", "assayd.service"],
                         cwd=scratch)
            said = (verify.stdout + verify.stderr).strip()
            check(verify.returncode == 0 and not said,
                  f"systemd-analyze verify --root: exit {verify.returncode} {said}")
            security = run(["systemd-analyze", "security", "--offline=true", "--threshold=20",
                            "--no-pager", unit], cwd=scratch)
            figure = re.search(r"Overall exposure level for assayd\.service: ([0-9.]+ \S+)",
                               security.stdout)
            print("installed unit: systemd-analyze security: exposure "
                  + (figure.group(1) if figure else "?"))
            check(security.returncode == 0 and figure is not None,
                  "the installed unit's exposure is above 2.0 (or was not printed)")

        # the assay user, as systemd-sysusers makes it from the packaged file
        sysusers = os.path.join(root, "usr/lib/sysusers.d/assay.conf")
        if check(os.path.isfile(sysusers), "/usr/lib/sysusers.d/assay.conf missing"):
            os.makedirs(os.path.join(root, "etc"), exist_ok=True)
            made = run(["systemd-sysusers", f"--root={root}"])
            passwd = os.path.join(root, "etc/passwd")
            users = open(passwd, encoding="utf-8").read() if os.path.exists(passwd) else ""
            check(made.returncode == 0 and re.search(r"^assay:x:\d+:\d+:[^:]*:/var/lib/assay:",
                                                     users, re.M),
                  f"systemd-sysusers made no assay user: {made.stderr} {users}")

        # maintainer scripts: valid sh, never enabling or starting assayd
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(control, script)
            if not check(os.access(path, os.X_OK), f"DEBIAN/{script} missing or not executable"):
                continue
            check(run(["sh", "-n", path]).returncode == 0, f"DEBIAN/{script}: sh -n fails")
            with open(path, encoding="utf-8") as f:  # the commands, not the comments
                body = "\n".join(line.split("#", 1)[0] for line in f)
            check(not re.search(r"(systemctl|deb-systemd-\w+)\s+(--\S+\s+)*(enable|start|restart)\b",
                                body), f"DEBIAN/{script} enables or starts assayd")

        # rules and dashboard
        for name, source in (("assay-rules.yml", "config/prometheus/assay-rules.yml"),
                             ("assay-dashboard.json", "config/grafana/assay-dashboard.json")):
            path = os.path.join(root, "usr/share/assay", name)
            check(os.path.isfile(path) and filecmp.cmp(path, os.path.join(src, source), shallow=False),
                  f"/usr/share/assay/{name} is not {source}")

        # documentation
        doc_root = os.path.join(root, "usr/share/doc/assay")
        for name in ["README.md", "copyright", "changelog.Debian.gz", "config/assayd.example.yaml"] + [
                "docs/" + os.path.basename(p) for p in glob.glob(os.path.join(src, "docs", "*.md"))]:
            check(os.path.isfile(os.path.join(doc_root, name)), f"/usr/share/doc/assay/{name} missing")
        changelog = os.path.join(doc_root, "changelog.Debian.gz")
        if os.path.isfile(changelog):
            with gzip.open(changelog, "rt", encoding="utf-8") as f:
                top = f.readline()
            check(top.startswith(f"assay ({version}-1) "), f"changelog.Debian.gz starts with {top!r}")
        links = check_doc_links(doc_root)
        print(f"documentation: {links} links and docs/*.md mentions checked")

        # lintian: no error; warnings and information are printed
        lint = run(["lintian", "--tag-display-limit", "0", "-I", deb])
        tags = [line for line in lint.stdout.splitlines() if re.match(r"^[EWIPXO]: ", line)]
        print("lintian:" + ("".join("\n  " + t for t in tags) if tags else " nothing to report"))
        check(lint.returncode in (0, 1), f"lintian failed to run: {lint.stderr}")
        errors = [t for t in tags if t.startswith("E: ")]
        check(not errors, f"lintian reports {len(errors)} error(s)")

    print(f"package test: {time.monotonic() - started:.1f} s")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
