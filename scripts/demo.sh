#!/usr/bin/env bash
# Run the example site: migrate, create the demo user (credentials printed once), then
# serve it with daphne on http://127.0.0.1:8000 (HOST / PORT to change).
# `make demo` creates .venv and installs the project first, then runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
BIN=$(dirname "$PYTHON")
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
export DJANGO_SETTINGS_MODULE=example_project.settings

"$PYTHON" manage.py migrate --noinput
"$PYTHON" manage.py demo_user
if [ -n "${OPENAI_API_KEY:-}${OPENAI_BASE_URL:-}" ]; then
  echo "Model: OpenAI-compatible (${OPENAI_BASE_URL:-api.openai.com}), ${OPENAI_MODEL:-gpt-4o-mini}"
else
  echo "Model: the scripted provider at ${HELIX_DEMO_PACE:-40} tokens/s (set OPENAI_API_KEY or OPENAI_BASE_URL for a real model)"
fi
echo "Open http://$HOST:$PORT/ and sign in. Stop with Ctrl+C."
exec "$BIN/daphne" -b "$HOST" -p "$PORT" example_project.asgi:application
