#!/usr/bin/env bash
# `make serve`: a local Prefect server on 127.0.0.1 plus `benchcert serve`, for a user with no server yet.
# Stops the server when benchcert serve exits (Ctrl-C).
set -euo pipefail
PORT="${BENCHCERT_PREFECT_PORT:-4200}"
STATE="${BENCHCERT_SERVE_DIR:-serve-state}"
mkdir -p "$STATE"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/$STATE/prefect-home}"
export PREFECT_API_URL="http://127.0.0.1:${PORT}/api"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PREFECT_SERVER_UI_ENABLED="${PREFECT_SERVER_UI_ENABLED:-true}"

.venv/bin/prefect server start --host 127.0.0.1 --port "$PORT" > "$STATE/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 120); do
  if .venv/bin/python -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:${PORT}/api/health" 2>/dev/null; then break; fi
  kill -0 "$SERVER" 2>/dev/null || { echo "prefect server failed; see $STATE/server.log" >&2; exit 1; }
  sleep 1
done
echo "Prefect server on http://127.0.0.1:${PORT} (PREFECT_API_URL=${PREFECT_API_URL})"
.venv/bin/benchcert serve --db "${BENCHCERT_DB:-$STATE/benchcert.duckdb}" --inbox "${BENCHCERT_INBOX:-$STATE/inbox}" \
    --artifacts "${BENCHCERT_ARTIFACTS:-$STATE/artifacts}" --dashboard "${BENCHCERT_DASHBOARD:-$STATE/dashboard}" ${BENCHCERT_SERVE_ARGS:-}
