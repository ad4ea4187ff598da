#!/usr/bin/env bash
# Starts the reference MCP server `@modelcontextprotocol/server-everything` (npm) in
# streamable-HTTP mode for the runtime's MCP tests, on a free port, as an unprivileged user.
#
# Usage:
#   source scripts/dev-mcp-everything.sh   start (or reuse) it and export AUTO_SWE_MCP_EVERYTHING_URL
#                                          (streamable HTTP) and AUTO_SWE_MCP_EVERYTHING_SSE_URL (legacy SSE)
#   scripts/dev-mcp-everything.sh stop     stop it
#
# Environment: AUTO_SWE_MCP_HOME (default /var/cache/auto-swe/mcp-everything as root,
# ~/.cache/auto-swe/mcp-everything otherwise).
# The package's server binds every interface (it takes only PORT); the tests reach it on
# 127.0.0.1 and nothing else talks to it.

auto_swe_mcp_main() {
  local version="2026.8.31"
  local home
  if [ "$(id -u)" = "0" ]; then
    home="${AUTO_SWE_MCP_HOME:-/var/cache/auto-swe/mcp-everything}"
  else
    home="${AUTO_SWE_MCP_HOME:-${HOME}/.cache/auto-swe/mcp-everything}"
  fi
  local install="$home/$version"
  local entry="$install/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

  if [ "${1:-start}" = "stop" ]; then
    local mode
    for mode in streamableHttp sse; do
      if [ -f "$home/$mode.pid" ]; then
        kill "$(cat "$home/$mode.pid")" 2>/dev/null || true
        rm -f "$home/$mode.pid" "$home/$mode.port"
      fi
    done
    return 0
  fi

  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ]; then
      apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    else
      echo "dev-mcp-everything: node and npm are required" >&2
      return 1
    fi
  fi
  mkdir -p "$install"
  if [ ! -f "$entry" ]; then
    npm install --prefix "$install" --no-audit --no-fund --silent \
      "@modelcontextprotocol/server-everything@$version" >/dev/null || return 1
  fi

  if [ "$(id -u)" = "0" ]; then
    chmod -R a+rX "$install"
  fi
  auto_swe_mcp_start "$home" "$entry" streamableHttp /mcp AUTO_SWE_MCP_EVERYTHING_URL || return 1
  # The same server in the legacy HTTP+SSE mode, for the client's fallback.
  auto_swe_mcp_start "$home" "$entry" sse /sse AUTO_SWE_MCP_EVERYTHING_SSE_URL || return 1
}

# Starts (or reuses) one server in MODE and exports VARIABLE as its URL (PATH on loopback).
auto_swe_mcp_start() {
  local home="$1" entry="$2" mode="$3" path="$4" variable="$5"
  local pidfile="$home/$mode.pid"
  local portfile="$home/$mode.port"
  local log="$home/$mode.log"
  # Reused only when the recorded process is still this server (a pid is recycled) and its
  # port still takes connections.
  if [ -f "$pidfile" ] && [ -f "$portfile" ] \
    && grep -qs "server-everything" "/proc/$(cat "$pidfile")/cmdline" \
    && (exec 3<>"/dev/tcp/127.0.0.1/$(cat "$portfile")") 2>/dev/null; then
    export "$variable=http://127.0.0.1:$(cat "$portfile")$path"
    echo "${!variable}"
    return 0
  fi

  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
  local runner=()
  if [ "$(id -u)" = "0" ]; then
    # setpriv execs node itself, so the recorded pid is the server's own.
    runner=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  fi
  PORT="$port" nohup "${runner[@]}" node "$entry" "$mode" >"$log" 2>&1 &
  echo $! >"$pidfile"
  echo "$port" >"$portfile"
  local i
  for i in $(seq 1 100); do
    if grep -qi "listening on port\|running on" "$log" 2>/dev/null; then
      export "$variable=http://127.0.0.1:$port$path"
      echo "${!variable}"
      return 0
    fi
    sleep 0.1
  done
  echo "dev-mcp-everything: the $mode server did not start; see $log" >&2
  return 1
}

auto_swe_mcp_main "$@"
