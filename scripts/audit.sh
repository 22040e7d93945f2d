#!/usr/bin/env bash
# Checks the pinned packages in requirements.lock against a public
# vulnerability service with pip-audit. Called by `make audit`.
#
# pip-audit lives in its own virtual environment, .venv-audit: it cannot be
# installed into .venv, because Rasa 3.6 pins packaging<21.
#
# Exit status:
#   0  every pinned package was checked and none has a known vulnerability
#   1  known vulnerabilities were found (they are printed)
#   2  could not audit: no vulnerability service could be reached, or some
#      packages could not be checked. This is never reported as a pass.
#   3  pip-audit could not be installed or failed for another reason
#
# Environment:
#   AUDIT_SERVICES  services to try, in order (default "pypi osv"); the first
#                   one that answers is used
#   AUDIT_TIMEOUT   socket timeout in seconds for each request (default 10)
# Extra arguments are passed to pip-audit, e.g. --ignore-vuln GHSA-xxxx.
set -uo pipefail
cd "$(dirname "$0")/.."

PIP_AUDIT_VERSION="2.10.1"
VENV=".venv-audit"
STAMP="$VENV/.installed"
LOCK="requirements.lock"
SERVICES="${AUDIT_SERVICES:-pypi osv}"
TIMEOUT="${AUDIT_TIMEOUT:-10}"

say() { printf 'audit: %s\n' "$*" >&2; }

[ -f "$LOCK" ] || { say "could not audit: $LOCK not found"; exit 3; }

# The same Python as the project's .venv.
PYTHON310="$(PYENV_VERSION="$(cat .python-version 2>/dev/null)" pyenv which python3.10 2>/dev/null || command -v python3.10 || true)"

# Install pip-audit once; the stamp records the version installed.
if [ ! -x "$VENV/bin/pip-audit" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "pip-audit==$PIP_AUDIT_VERSION" ]; then
  if [ -z "$PYTHON310" ]; then
    say "could not audit: Python 3.10 not found (pyenv install $(cat .python-version 2>/dev/null))"
    exit 3
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON310" -m venv "$VENV" || { say "could not audit: could not create $VENV"; exit 3; }
  fi
  # Keep the environment out of git without touching the project's .gitignore.
  printf '*\n' > "$VENV/.gitignore"
  say "installing pip-audit==$PIP_AUDIT_VERSION into $VENV (once)"
  log="$VENV/install.log"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --timeout 15 --retries 1 \
        "pip-audit==$PIP_AUDIT_VERSION" >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    say "could not audit: pip-audit could not be installed (no package index reachable?); see $log"
    exit 3
  fi
  printf 'pip-audit==%s\n' "$PIP_AUDIT_VERSION" > "$STAMP"
fi

out="$VENV/last-audit.json"
err="$VENV/last-audit.err"
reasons=()

for service in $SERVICES; do
  rm -f "$out"
  # pip-audit stops at the first connection error; `timeout` is a last guard.
  timeout 900 "$VENV/bin/pip-audit" \
    --requirement "$LOCK" --no-deps --disable-pip --progress-spinner off \
    --timeout "$TIMEOUT" --vulnerability-service "$service" \
    --format json --output "$out" "$@" 2>"$err"
  rc=$?

  # pip-audit writes the JSON file only when something was found or skipped.
  # Classify with the audit environment's own Python.
  verdict="$("$VENV/bin/python" - "$out" "$rc" "$service" "$err" <<'PY'
import json, os, sys

out, rc, service, err = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
stderr = open(err, errors="replace").read() if os.path.exists(err) else ""

if not os.path.exists(out):
    if rc == 0:
        print("clean")
    else:
        import re
        lines = [l for l in stderr.splitlines() if l.strip() and not l.startswith("WARNING")]
        text = (lines[-1] if lines else f"pip-audit exited {rc}")[-300:]
        host = re.search(r"host='([^']+)'", stderr)
        host = host.group(1) if host else service
        if "Failed to resolve" in stderr or "Name or service not known" in stderr:
            text = f"cannot resolve {host}"
        elif "timed out" in stderr or "Timeout" in stderr:
            text = f"timed out connecting to {host}"
        elif "Connection refused" in stderr:
            text = f"connection refused by {host}"
        network = ("Connection", "connect", "resolve", "Timeout", "timed out",
                   "Max retries", "blocking this service", "SSLError", "ServiceError")
        kind = "unreachable" if any(w in stderr for w in network) else "error"
        print(f"{kind}\t{service}: {text}")
    sys.exit(0)

deps = json.load(open(out)).get("dependencies", [])
skipped = [d for d in deps if "skip_reason" in d]
vulns = [(d, v) for d in deps for v in d.get("vulns", [])]

if vulns:
    print("vulnerable")
    rows = [("package", "version", "advisory", "aliases", "fixed in")]
    for d, v in vulns:
        rows.append((d["name"], d.get("version", ""), v["id"],
                     ", ".join(v.get("aliases", [])) or "-",
                     ", ".join(v.get("fix_versions", [])) or "no fix"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"Found {len(vulns)} known vulnerabilities in "
          f"{len({d['name'] for d, _ in vulns})} of {len(deps)} packages ({service}).")
    if skipped:
        print(f"WARNING: {len(skipped)} packages could not be checked:")
        for d in skipped:
            print(f"  {d['name']}: {d['skip_reason']}")
elif skipped and len(skipped) == len(deps):
    reason = skipped[0]["skip_reason"]
    if "not found on PyPI" in reason:
        reason = "the PyPI JSON API answered 'not found' for all %d packages" % len(deps)
    print(f"unreachable\t{service}: {reason}")
elif skipped:
    print(f"partial\t{service}: {len(skipped)} of {len(deps)} packages could not be checked")
    for d in skipped:
        print(f"  {d['name']}: {d['skip_reason']}")
else:
    print("clean")
PY
)"
  status="${verdict%%$'\t'*}"; status="${status%%$'\n'*}"
  case "$status" in
    clean)
      echo "audit: no known vulnerabilities in $LOCK (service: $service)"
      exit 0 ;;
    vulnerable)
      printf '%s\n' "${verdict#*$'\n'}"
      echo "audit: vulnerabilities found (full report: $out)"
      exit 1 ;;
    partial)
      printf 'could not audit: %s\n' "${verdict#*$'\t'}" >&2
      exit 2 ;;
    unreachable)
      reasons+=("${verdict#*$'\t'}") ;;
    *)
      # pip-audit failed for a reason other than the network.
      [ -s "$err" ] && tail -n 5 "$err" >&2
      say "could not audit: pip-audit failed (${verdict#*$'\t'})"
      exit 3 ;;
  esac
done

joined="$(printf '%s; ' "${reasons[@]}")"
echo "could not audit: no vulnerability service reachable (${joined%; })" >&2
echo "The pinned packages were NOT checked. Run 'make audit' where the PyPI vulnerability API or OSV can be reached." >&2
exit 2
