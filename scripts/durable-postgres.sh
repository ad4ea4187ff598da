#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster with durable settings, for benchmarks that measure real
# flushes.
#
# The development server (scripts/dev-postgres.sh) runs with `fsync = off`: it is a test
# database. This makes a separate cluster in a directory the caller owns, from the same binaries,
# with the durability settings at their defaults (`fsync`, `synchronous_commit` and
# `full_page_writes` on) and the dev server's other settings. It listens on 127.0.0.1 only, on a
# free port, with a generated password (scram-sha-256), and never touches the dev server.
#
# Usage:
#   scripts/durable-postgres.sh DIR    initialise DIR/data, start the server, print two lines:
#                                      its admin URL, then the postmaster's PID
#
# The caller stops the server by that PID (SIGINT: a fast shutdown) and removes DIR. The
# binaries must be in place: run scripts/dev-postgres.sh once first.
#
# Environment: AUTO_SWE_PG_HOME and AUTO_SWE_PG_USER as for scripts/dev-postgres.sh (where its
# binaries are, and the unprivileged account the server runs as when run as root).

set -euo pipefail

dir="${1:?usage: scripts/durable-postgres.sh DIR}"
pgserver_version="0.1.4"
if [ "$(id -u)" = "0" ]; then
  home="${AUTO_SWE_PG_HOME:-/var/cache/auto-swe/postgres}"
else
  home="${AUTO_SWE_PG_HOME:-${HOME}/.cache/auto-swe/postgres}"
fi
bin="$home/pgserver-$pgserver_version/pgserver/pginstall/bin"
run_user="${AUTO_SWE_PG_USER:-auto-swe-pg}"

if [ ! -x "$bin/postgres" ]; then
  echo "durable-postgres: no PostgreSQL binaries at $bin; run scripts/dev-postgres.sh once" >&2
  exit 1
fi

as_pg() {
  if [ "$(id -u)" = "0" ]; then
    runuser -u "$run_user" -- "$@"
  else
    "$@"
  fi
}

data="$dir/data"
sockets="$dir/sockets"
pwfile="$dir/password"
mkdir -p "$data" "$sockets"
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(24))' >"$pwfile")
if [ "$(id -u)" = "0" ]; then
  chown "$run_user" "$dir" "$data" "$sockets" "$pwfile"
fi
chmod 700 "$data"
as_pg "$bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" \
  --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
cat >>"$data/postgresql.conf" <<'CONF'
listen_addresses = '127.0.0.1'
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 400
shared_buffers = 256MB
maintenance_work_mem = 512MB
CONF

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
as_pg "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
  -o "-p $port -k $sockets" start >/dev/null || { tail -20 "$dir/server.log" >&2; exit 1; }
echo "postgres://postgres:$(cat "$pwfile")@127.0.0.1:${port}/postgres"
head -1 "$data/postmaster.pid"
