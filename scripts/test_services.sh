#!/usr/bin/env bash
# Makes the servers the tests talk to available: PostgreSQL (perf database) and redis-server
# (kernel cache tier). Installs the Debian packages when missing and we are root, starts a
# throw-away PostgreSQL cluster, and prints `export ...` lines for the test run to source.
# Redis is started by the tests themselves (they need a server they can stop and restart).
set -euo pipefail

PG_PORT="${WARPFORGE_TEST_PG_PORT:-54329}"
PG_DIR="${WARPFORGE_TEST_PG_DIR:-/tmp/warpforge-test-pg}"

log() { echo "[services] $*" >&2; }

find_pg_bin() {
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"; return 0
  fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "cannot install $* (not root or no apt-get)"; return 1
  fi
  log "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq "$@" >/dev/null 2>&1
}

command -v redis-server >/dev/null 2>&1 || apt_install redis-server || true
PG_BIN="$(find_pg_bin)" || { apt_install postgresql || true; PG_BIN="$(find_pg_bin)" || PG_BIN=""; }

if command -v redis-server >/dev/null 2>&1; then
  echo "export WARPFORGE_TEST_REDIS_SERVER=$(command -v redis-server)"
else
  log "redis-server unavailable: Redis tests will skip (fail under CI)"
fi

if [ -n "$PG_BIN" ]; then
  RUN_AS=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    RUN_AS=(runuser -u postgres --)
  fi
  if ! "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
    rm -rf "$PG_DIR"; mkdir -p "$PG_DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
    "${RUN_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR" -U warpforge --auth=trust >/dev/null
    "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" \
      -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1" -w start >/dev/null
    log "PostgreSQL started on 127.0.0.1:$PG_PORT"
  fi
  echo "export WARPFORGE_TEST_PG_URL=postgresql://warpforge@127.0.0.1:$PG_PORT/postgres"
else
  log "PostgreSQL unavailable: PostgreSQL tests will skip (fail under CI)"
fi
