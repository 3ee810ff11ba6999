#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest on SQLite + Redis, then on PostgreSQL.
# Starts the services the tests need (scripts/services.sh) and exports their URLs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
BIN=$(dirname "$PYTHON")

# shellcheck source=/dev/null
source <(bash scripts/services.sh)

echo "== lint"
"$BIN/ruff" check .
"$BIN/ruff" format --check .

echo "== pytest (SQLite, Redis)"
"$PYTHON" -m pytest -q -p no:cacheprovider "$@"

if [ -n "${HELIX_PG_URL:-}" ]; then
  echo "== pytest (PostgreSQL, Redis)"
  # schemathesis (marker fuzz) runs in the first pass only: it tests the wire, not the database.
  HELIX_TEST_DATABASE_URL="$HELIX_PG_URL" "$PYTHON" -m pytest -q -p no:cacheprovider -m "not fuzz" "$@"
fi
