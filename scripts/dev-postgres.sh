#!/usr/bin/env bash
# Starts a local PostgreSQL 16 with pgvector for development and tests.
#
# The binaries come from the `pgserver` wheel on PyPI (PostgreSQL 16 with the pgvector extension
# built in); the wheel is downloaded with pip and unpacked, never installed into a Python
# environment. The server runs as an unprivileged user, listens on 127.0.0.1 only, on a free port,
# and requires a password (scram-sha-256) generated on first start.
#
# Usage:
#   scripts/dev-postgres.sh            start (or reuse) the server and print its URL
#   source scripts/dev-postgres.sh     the same, and export AUTO_SWE_POSTGRES_URL
#   scripts/dev-postgres.sh stop       stop the server
#
# Environment: AUTO_SWE_PG_HOME (default /var/cache/auto-swe/postgres as root,
# ~/.cache/auto-swe/postgres otherwise), AUTO_SWE_PG_USER (the unprivileged account used when
# running as root; default auto-swe-pg).

auto_swe_pg_main() {
  local pgserver_version="0.1.4"
  local home
  if [ "$(id -u)" = "0" ]; then
    home="${AUTO_SWE_PG_HOME:-/var/cache/auto-swe/postgres}"
  else
    home="${AUTO_SWE_PG_HOME:-${HOME}/.cache/auto-swe/postgres}"
  fi
  local install="$home/pgserver-$pgserver_version"
  local bin="$install/pgserver/pginstall/bin"
  local data="$home/data"
  local run_user="${AUTO_SWE_PG_USER:-auto-swe-pg}"

  as_pg() {
    if [ "$(id -u)" = "0" ]; then
      runuser -u "$run_user" -- "$@"
    else
      "$@"
    fi
  }

  if [ "${1:-start}" = "stop" ]; then
    if [ -f "$data/postmaster.pid" ]; then
      as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    fi
    return 0
  fi

  mkdir -p "$home"
  # 1. Binaries: unpack the wheel once.
  if [ ! -x "$bin/postgres" ]; then
    if ! python3 -m pip --version >/dev/null 2>&1; then
      if [ "$(id -u)" = "0" ]; then
        apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null
      else
        echo "dev-postgres: python3 -m pip is required" >&2
        return 1
      fi
    fi
    local download
    download="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      "pgserver==$pgserver_version" -d "$download" || return 1
    rm -rf "$install.partial"
    mkdir -p "$install.partial"
    python3 -m zipfile -e "$download"/pgserver-*.whl "$install.partial" || return 1
    chmod -R a+rX "$install.partial"
    chmod a+x "$install.partial"/pgserver/pginstall/bin/*
    rm -rf "$download" "$install"
    mv "$install.partial" "$install"
  fi
  if [ ! -f "$install/pgserver/pginstall/share/postgresql/extension/vector.control" ]; then
    echo "dev-postgres: the unpacked PostgreSQL has no pgvector extension" >&2
    return 1
  fi

  # 2. An unprivileged account: PostgreSQL refuses to run as root.
  if [ "$(id -u)" = "0" ] && ! id -u "$run_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir "$home" --shell /usr/sbin/nologin "$run_user"
  fi

  # 3. A cluster with a generated superuser password.
  if [ ! -f "$data/PG_VERSION" ]; then
    rm -rf "$data"
    mkdir -p "$data"
    local pwfile="$home/password"
    (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(24))' >"$pwfile")
    if [ "$(id -u)" = "0" ]; then
      chown "$run_user" "$data" "$pwfile"
    fi
    chmod 700 "$data"
    as_pg "$bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" --no-sync \
      --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 \
      >"$home/initdb.log" 2>&1 || { cat "$home/initdb.log" >&2; return 1; }
    # Test databases are disposable: trade durability for speed.
    cat >>"$data/postgresql.conf" <<'CONF'
listen_addresses = '127.0.0.1'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 400
shared_buffers = 256MB
maintenance_work_mem = 512MB
CONF
  fi

  # 4. Start on a free loopback port unless already running.
  local port
  if [ -f "$data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    port="$(sed -n 4p "$data/postmaster.pid")"
  else
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    local sockets="$home/sockets"
    mkdir -p "$sockets"
    if [ "$(id -u)" = "0" ]; then chown "$run_user" "$sockets" "$home"; fi
    as_pg "$bin/pg_ctl" -D "$data" -l "$home/server.log" -w -t 60 \
      -o "-p $port -k $sockets" start >/dev/null || { tail -20 "$home/server.log" >&2; return 1; }
  fi
  local password
  password="$(cat "$home/password")"
  AUTO_SWE_POSTGRES_URL="postgres://postgres:${password}@127.0.0.1:${port}/postgres"
  export AUTO_SWE_POSTGRES_URL
  if [ "${AUTO_SWE_PG_SOURCED:-0}" = "1" ]; then
    # Sourced (CI): keep the password out of the log.
    echo "dev-postgres: PostgreSQL with pgvector at postgres://postgres:***@127.0.0.1:${port}/postgres"
  else
    echo "$AUTO_SWE_POSTGRES_URL"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  auto_swe_pg_main "$@"
else
  AUTO_SWE_PG_SOURCED=1 auto_swe_pg_main "$@"
fi
