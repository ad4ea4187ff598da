#!/usr/bin/env bash
# Runs schemathesis against a live auto-swe-server's own OpenAPI document, with a valid token:
# every documented route and status is exercised with generated (valid and invalid) input, and
# any 5xx, undocumented status or schema violation fails. Every check runs but the two that
# scripts/api-fuzz.toml switches off, each with its reason. Needs AUTO_SWE_POSTGRES_URL (an
# admin URL), psql, the server binary (argument 1) and `st` (PyPI schemathesis). To replay a
# failed run, set API_FUZZ_SEED to the seed it printed.
set -euo pipefail
server_bin=${1:?usage: api-fuzz.sh PATH/TO/auto-swe-server [MAX_EXAMPLES]}
examples=${2:-40}
: "${AUTO_SWE_POSTGRES_URL:?AUTO_SWE_POSTGRES_URL must name the PostgreSQL admin URL}"

work=$(mktemp -d)
chmod 711 "$work"
db="api_fuzz_$$_$(date +%s)"
psql "$AUTO_SWE_POSTGRES_URL" -qc "CREATE DATABASE \"$db\"" >/dev/null
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  psql "$AUTO_SWE_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/server.toml" <<TOML
listen = "127.0.0.1:0"
bodyLimitBytes = 65536
[bootstrap]
adminEmail = "fuzz-admin@example.test"
tokenFile = "$work/admin.token"
[pool]
workers = 0
stateDir = "$work/state"
TOML

AUTO_SWE_STORE_URL="${AUTO_SWE_POSTGRES_URL%/*}/$db" \
AUTO_SWE_STORE_KEY=0707070707070707070707070707070707070707070707070707070707070707 \
AUTO_SWE_JWT_SECRET=api-fuzz-only-secret-0123456789abcdef \
AUTO_SWE_LOG=warn \
  "$server_bin" --config "$work/server.toml" 2> "$work/server.log" &
server_pid=$!
base=""
for _ in $(seq 1 300); do
  base=$(sed -n 's/^auto-swe-server: listening on //p' "$work/server.log" | head -n1)
  [ -n "$base" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "the server did not start"; cat "$work/server.log"; exit 1; }
token=$(cat "$work/admin.token")

status=0
st --config-file "$(dirname "$0")/api-fuzz.toml" run "$base/api/v1/openapi.json" --url "$base" \
  --header "Authorization: Bearer $token" \
  --max-examples "$examples" --workers 1 ${API_FUZZ_SEED:+--seed "$API_FUZZ_SEED"} \
  --request-timeout 10 --no-color || status=$?
if grep -q '"level":"ERROR"' "$work/server.log"; then
  echo "the server logged errors:"; grep '"level":"ERROR"' "$work/server.log" | head -20
  status=1
fi
exit "$status"
