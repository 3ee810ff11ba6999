#!/usr/bin/env bash
# Install (when missing, as root, from Debian's packages) and start what the tests need:
# redis-server (AOF on, loopback :6379), PostgreSQL (loopback, role/db "helix"), Chromium, gettext.
# Not root: PostgreSQL is a cluster of the user's own (initdb needs no root; data in
# ${TMPDIR:-/tmp}/helix-pg-$USER, port HELIX_PG_PORT or 55432), unless HELIX_PG_URL is set.
# Idempotent. Prints `export` lines for the caller to source; progress goes to stderr.
# HELIX_SERVICES=redis: only Redis (make test-quick).
set -euo pipefail
log() { echo "services: $*" >&2; }
only_redis=$([ "${HELIX_SERVICES:-}" = redis ] && echo 1 || true)

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# xgettext and msgfmt: tests/i18n extracts the catalog with makemessages.
command -v xgettext >/dev/null 2>&1 || need+=(gettext)
if [ -z "$only_redis" ]; then
  command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
  [ -x /usr/bin/chromium ] || need+=(chromium)
  command -v node >/dev/null 2>&1 || need+=(nodejs npm)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root"
    exit 1
  fi
  log "installing ${need[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi

if ! redis-cli -p 6379 ping >/dev/null 2>&1; then
  log "starting redis-server"
  mkdir -p /tmp/helix-redis
  redis-server --port 6379 --bind 127.0.0.1 --appendonly yes --dir /tmp/helix-redis --daemonize yes >&2
  for _ in $(seq 50); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
echo "export HELIX_TEST_REDIS_URL=redis://127.0.0.1:6379/15"

if [ -z "$only_redis" ] && [ "$(id -u)" -eq 0 ] && command -v pg_lsclusters >/dev/null 2>&1; then
  version=$(ls /usr/lib/postgresql | sort -V | tail -n1)
  if ! pg_lsclusters -h | grep -q .; then
    log "creating PostgreSQL cluster $version/main"
    pg_createcluster "$version" main >&2
  fi
  cluster=$(pg_lsclusters -h | head -n1 | awk '{print $1" "$2}')
  if ! pg_lsclusters -h | head -n1 | grep -q online; then
    log "starting PostgreSQL $cluster"
    pg_ctlcluster $cluster start >&2
  fi
  port=$(pg_lsclusters -h | head -n1 | awk '{print $3}')
  su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname='helix'\"" | grep -q 1 ||
    su postgres -c "psql -p $port -c \"CREATE ROLE helix LOGIN PASSWORD 'helix' CREATEDB\"" >&2
  su postgres -c "psql -p $port -tAc \"SELECT 1 FROM pg_database WHERE datname='helix'\"" | grep -q 1 ||
    su postgres -c "createdb -p $port -O helix helix" >&2
  echo "export HELIX_PG_URL=postgres://helix:helix@127.0.0.1:$port/helix"
elif [ -z "$only_redis" ] && [ -z "${HELIX_PG_URL:-}" ]; then
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    log "no PostgreSQL server binaries (apt-get install postgresql) and no HELIX_PG_URL: the PostgreSQL pass will be skipped"
  else
    data=${HELIX_PG_DATA:-${TMPDIR:-/tmp}/helix-pg-$(id -un)}
    port=${HELIX_PG_PORT:-55432}
    export PGPASSWORD=helix
    if [ ! -s "$data/PG_VERSION" ]; then
      log "creating a PostgreSQL cluster of your own in $data (superuser helix, loopback port $port)"
      pwfile=$(mktemp)
      echo helix >"$pwfile"
      "$bin/initdb" -D "$data" -U helix --pwfile="$pwfile" --auth=scram-sha-256 -E UTF8 >&2
      rm -f "$pwfile"
    fi
    if ! "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      log "starting PostgreSQL in $data"
      "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w \
        -o "-p $port -k $data -c listen_addresses=127.0.0.1" start >&2
    fi
    "$bin/psql" -h 127.0.0.1 -p "$port" -U helix -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='helix'" |
      grep -q 1 || "$bin/createdb" -h 127.0.0.1 -p "$port" -U helix helix >&2
    echo "export HELIX_PG_URL=postgres://helix:helix@127.0.0.1:$port/helix"
  fi
fi
