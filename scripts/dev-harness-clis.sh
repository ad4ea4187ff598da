#!/usr/bin/env bash
# Installs the pinned harness CLIs (Claude Code and the Codex CLI, npm) under one prefix and
# exports where they are.
#
# Usage:
#   source scripts/dev-harness-clis.sh   install (or reuse) them, check each native binary against
#                                        the SHA-256 the harnesses crate pins, and export
#                                        AUTO_SWE_CLAUDE_CLI and AUTO_SWE_CODEX_CLI (their paths)
#
# Both packages ship a native binary per platform (an optional dependency npm picks); the
# adapters run that binary, not the package's Node launcher. The versions and hashes here and
# in crates/harnesses/src/lib.rs move together.
#
# Environment: AUTO_SWE_HARNESS_CLIS_HOME (default /opt/auto-swe/harness-clis as root,
# ~/.cache/auto-swe/harness-clis otherwise).

auto_swe_harness_clis_main() {
  local claude_version="2.1.332"
  local claude_sha256="a2df1f41bb00250992926420d0063f89b127cb81abdd284dbefb80c50ff1d026"
  local codex_version="0.171.0"
  local codex_sha256="b76a027d6b210f9a8da7aaf321dd235c700f0ef7a794d4a5314b9af6c134f0f0"
  if [ "$(uname -m)" != "x86_64" ]; then
    echo "dev-harness-clis: only the linux-x64 binaries are pinned" >&2
    return 1
  fi
  local home
  if [ "$(id -u)" = "0" ]; then
    home="${AUTO_SWE_HARNESS_CLIS_HOME:-/opt/auto-swe/harness-clis}"
  else
    home="${AUTO_SWE_HARNESS_CLIS_HOME:-${HOME}/.cache/auto-swe/harness-clis}"
  fi
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ]; then
      apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
    else
      echo "dev-harness-clis: node and npm are required" >&2
      return 1
    fi
  fi
  local claude="$home/claude-code-$claude_version"
  local codex="$home/codex-$codex_version"
  if [ ! -x "$claude/node_modules/.bin/claude" ]; then
    mkdir -p "$claude"
    npm install --prefix "$claude" --no-audit --no-fund --silent \
      "@anthropic-ai/claude-code@$claude_version" >/dev/null || return 1
  fi
  if [ ! -x "$codex/node_modules/.bin/codex" ]; then
    mkdir -p "$codex"
    npm install --prefix "$codex" --no-audit --no-fund --silent \
      "@openai/codex@$codex_version" >/dev/null || return 1
  fi
  chmod -R a+rX "$home"
  local claude_bin="$claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
  local codex_bin="$codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
  if [ "$(sha256sum "$claude_bin" | cut -d' ' -f1)" != "$claude_sha256" ]; then
    echo "dev-harness-clis: $claude_bin is not the pinned build" >&2
    return 1
  fi
  if [ "$(sha256sum "$codex_bin" | cut -d' ' -f1)" != "$codex_sha256" ]; then
    echo "dev-harness-clis: $codex_bin is not the pinned build" >&2
    return 1
  fi
  AUTO_SWE_CLAUDE_CLI="$claude_bin"
  AUTO_SWE_CODEX_CLI="$codex_bin"
  export AUTO_SWE_CLAUDE_CLI AUTO_SWE_CODEX_CLI
  echo "claude: $AUTO_SWE_CLAUDE_CLI"
  echo "codex: $AUTO_SWE_CODEX_CLI"
}

auto_swe_harness_clis_main "$@"
