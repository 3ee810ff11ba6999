#!/usr/bin/env bash
# Run the whole test suite: lint, pytest on SQLite + Redis, the "real host" profile, PostgreSQL,
# then Django 6.0 on Python 3.12. Starts the services the tests need (scripts/services.sh).
# With arguments (test paths, -k ...), only the SQLite + Redis and PostgreSQL passes run, with them.
# HELIX_QUICK=1: lint + SQLite/Redis without browser, server-process and PostgreSQL tests (make test-quick).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
BIN=$(dirname "$PYTHON")
PYTEST=("$PYTHON" -m pytest -q -p no:cacheprovider)
loud() { printf '\n!!!! %s\n\n' "$*" >&2; }

# Not root: temporary files (SQLite test databases, logs, a PostgreSQL cluster of your own) in a
# directory of your own, since /tmp/helix-tests may belong to another user (root's runs).
if [ "$(id -u)" -ne 0 ] && [ -z "${TMPDIR:-}" ]; then
  export TMPDIR="/tmp/helix-$(id -un)"
  mkdir -p "$TMPDIR"
fi

# shellcheck source=/dev/null
source <(bash scripts/services.sh)
if [ -z "${HELIX_PG_URL:-}" ] && [ "${HELIX_QUICK:-}" != 1 ]; then
  loud "PostgreSQL pass will be SKIPPED: no HELIX_PG_URL and no PostgreSQL could be set up (see above)."
fi

echo "== lint"
"$BIN/ruff" check .
"$BIN/ruff" format --check .
echo "== typecheck (mypy helix_django)"
"$PYTHON" -m mypy helix_django

if [ "${HELIX_QUICK:-}" = 1 ]; then
  echo "== pytest (quick: SQLite, Redis; no browser, no server processes, no PostgreSQL)"
  "${PYTEST[@]}" -m "not browser and not slow and not node and not postgres" "$@"
  exit 0
fi

# The SQLite pass runs in the foreground; beside it (the suite waits on servers and browsers far
# more than it computes) one background chain runs the PostgreSQL pass, then the Django 6.0 job,
# each on a Redis database of its own. The browser and Node tests, which test the client and the
# wire, and schemathesis and the every-route-on-every-server test run in the SQLite pass only.
# Each pass prints its wall time.
REDIS_BASE="${HELIX_TEST_REDIS_URL%/*}"
timed() { # timed LABEL COMMAND...: run it, print its wall time, return its status
  local label=$1 t0=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "== $label: $((SECONDS - t0)) s, exit $status"
  return "$status"
}

postgres_pass() {
  if [ -z "${HELIX_PG_URL:-}" ]; then
    loud "PostgreSQL pass SKIPPED: scripts/services.sh found no PostgreSQL server binaries to set one up." \
      "Install postgresql, or set HELIX_PG_URL=postgres://USER:PASSWORD@HOST:PORT/DB (a role with CREATEDB)."
    return 0
  fi
  echo "== pytest (PostgreSQL, Redis)"
  HELIX_TEST_DATABASE_URL="$HELIX_PG_URL" HELIX_TEST_REDIS_URL="$REDIS_BASE/13" \
    timed "PostgreSQL pass" "${PYTEST[@]}" -m "not fuzz and not servers and not browser and not node" "$@"
}

django6_job() {
  [ $# -eq 0 ] && [ "${HELIX_SKIP_DJANGO6:-}" != 1 ] || return 0
  local py312
  py312=${HELIX_PY312:-$( (ls -d /root/.pyenv/versions/3.12*/bin/python 2>/dev/null || command -v python3.12) | tail -n1 || true)}
  if [ -z "$py312" ]; then
    loud "Django 6.0 job SKIPPED: no Python 3.12 found (set HELIX_PY312=/path/to/python3.12)."
    return 0
  fi
  make --no-print-directory .venv-dj60/.installed PY312="$py312" || return 1
  echo "== pytest (Django 6.0, Python 3.12, SQLite, Redis: core, api, runtime, transport; the real host)"
  local dj6=(.venv-dj60/bin/python -m pytest -q -p no:cacheprovider) status=0
  # Lean: in-process tests of the four areas, plus transport's daphne tests (real HTTP);
  # the other server-process, Node and browser tests run once, in the Django 5.2 pass.
  export HELIX_TEST_REDIS_URL="$REDIS_BASE/12"
  timed "Django 6.0: in-process" "${dj6[@]}" -m "not browser and not slow" tests/core tests/api tests/runtime tests/transport || status=1
  timed "Django 6.0: transport over daphne" "${dj6[@]}" -m "slow and not browser and not node and not servers" tests/transport || status=1
  timed "Django 6.0: real host" "${dj6[@]}" --ds=tests.host.settings tests/host || status=1
  return "$status"
}

background_log=$(mktemp "${TMPDIR:-/tmp}/helix-background-passes.XXXXXX")
(
  status=0
  postgres_pass "$@" || status=1
  django6_job "$@" || status=1
  exit "$status"
) >"$background_log" 2>&1 &
background_pid=$!

failed=0
echo "== pytest (SQLite, Redis)"
timed "SQLite pass" "${PYTEST[@]}" "$@" || failed=1

if [ $# -eq 0 ]; then
  echo "== pytest (real host profile: tests/host with tests/host/settings.py)"
  timed "real host pass" "${PYTEST[@]}" --ds=tests.host.settings tests/host || failed=1
fi

background_status=0
wait "$background_pid" || background_status=$?
echo "== the passes that ran beside the SQLite pass (PostgreSQL; Django 6.0)"
cat "$background_log"
rm -f "$background_log"
[ "$background_status" -eq 0 ] || failed=1
exit "$failed"
