#!/usr/bin/env bash
# Ships the audit trail through a real log agent and checks what arrives (docs/audit.md).
#
# A real sidecar (bin/sidecar) in front of the sample weather MCP server writes its audit
# records to a file and exports them over OTLP; the OpenTelemetry Collector built from
# hack/logagent (filelog receiver with the json parser tailing the file, OTLP/HTTP receiver)
# writes what it gets with its file exporter. The check: every record of the file arrives by
# both routes, its JSON line the log body, its fields the attributes, and the redacted key
# nowhere. Everything listens on 127.0.0.1 and stops at the end.
#
# Needs: go, curl, jq. Not part of `make test`: building the collector takes minutes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
BIN="$ROOT/bin"
WORK=$(mktemp -d /tmp/switchboard-logagent-XXXXXX)
SECRET="sk-live-0123456789abcdef"

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; echo "logs and outputs kept in $WORK" >&2; exit 1; }

# port picks a free loopback port.
port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}
# wait_for runs "$@" until it succeeds, for 60 s at most.
wait_for() {
  local what=$1; shift
  for _ in $(seq 600); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "$what did not happen within 60 s"
}

echo "== building the sidecar, the sample server and the collector (hack/logagent, its own module)"
mkdir -p "$BIN"
start=$(date +%s)
go build -o "$BIN/sidecar" ./cmd/sidecar
go build -o "$BIN/sample-server" ./cmd/sample-server
(cd hack/logagent && go build -o "$BIN/logagent" .)
echo "   built in $(( $(date +%s) - start )) s"

UP=$(port); OTLP=$(port); MCP=$(port); ADMIN=$(port)
mkdir -p "$WORK/audit" "$WORK/out"
AUDIT="$WORK/audit/audit.jsonl"
touch "$AUDIT"

cat >"$WORK/collector.yaml" <<EOF
receivers:
  filelog:
    include: [$AUDIT]
    start_at: beginning
    operators:
      - type: json_parser
        timestamp: {parse_from: attributes.time, layout_type: gotime, layout: "2006-01-02T15:04:05.999999999Z07:00"}
  otlp:
    protocols:
      http: {endpoint: "127.0.0.1:$OTLP"}
exporters:
  file/filelog: {path: $WORK/out/filelog.json}
  file/otlp: {path: $WORK/out/otlp.json}
service:
  telemetry:
    metrics: {level: none}
    logs: {level: warn}
  pipelines:
    logs/filelog: {receivers: [filelog], exporters: [file/filelog]}
    logs/otlp: {receivers: [otlp], exporters: [file/otlp]}
EOF

# The catalog: every tool of the sample server, audit with Redacted arguments to the file and
# to the collector.
cat >"$WORK/catalog.json" <<EOF
{"schemaVersion":1,"server":{"namespace":"tools","name":"weather","toolPolicy":"All","caching":{"discover":{"ttlMs":0,"cacheScope":"private"},"tools":{"ttlMs":0,"cacheScope":"private"},"prompts":{"ttlMs":0,"cacheScope":"private"},"resources":{"ttlMs":0,"cacheScope":"private"},"resourceTemplates":{"ttlMs":0,"cacheScope":"private"},"resourceRead":{"ttlMs":0,"cacheScope":"private"}}},"tools":[],"resources":[],"prompts":[],"audit":{"arguments":"Redacted","methods":["prompts/get","resources/read","tools/call"],"denials":true,"file":"$AUDIT","otlpEndpoint":"http://127.0.0.1:$OTLP/v1/logs"}}
EOF

echo "== starting the collector, the sample server and the sidecar"
"$BIN/logagent" --config "$WORK/collector.yaml" >"$WORK/logagent.log" 2>&1 & PIDS+=($!)
"$BIN/sample-server" --listen "127.0.0.1:$UP" >"$WORK/sample-server.log" 2>&1 & PIDS+=($!)
wait_for "the collector's OTLP receiver" bash -c "exec 3<>/dev/tcp/127.0.0.1/$OTLP"
OTEL_BSP_SCHEDULE_DELAY=100 "$BIN/sidecar" --upstream "http://127.0.0.1:$UP/mcp" --listen "127.0.0.1:$MCP" \
  --admin-listen "127.0.0.1:$ADMIN" --catalog-file "$WORK/catalog.json" --audit-dir "$WORK/audit" \
  --pod-name weather-0 >"$WORK/sidecar.log" 2>&1 & PIDS+=($!)
wait_for "the sidecar's readiness" curl -fsS "http://127.0.0.1:$ADMIN/readyz"

call() { # call ID NAME ARGUMENTS
  curl -sS -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$MCP/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" \
    -d '{"jsonrpc":"2.0","id":'"$1"',"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"check","version":"1"}},"name":"'"$2"'","arguments":'"$3"'}}'
}
echo "== two calls: one answered, one the MCP server refuses"
call 1 get_forecast '{"city":"Lyon","apiKey":"'"$SECRET"'"}'
call 2 no_such_tool '{}'

wait_for "two records in the audit file" bash -c "[ \$(wc -l <'$AUDIT') -ge 2 ]"
# Log records the file exporter wrote, one line per export: {resourceLogs:[{resource, scopeLogs:[{logRecords}]}]}.
records() { jq -c '.resourceLogs[] as $r | $r.scopeLogs[].logRecords[] | {resource: $r.resource, rec: .}' "$1" 2>/dev/null; }
count() { records "$1" | wc -l; }
wait_for "two records through the filelog receiver" bash -c "[ \$(jq -c '.resourceLogs[].scopeLogs[].logRecords[]' '$WORK/out/filelog.json' 2>/dev/null | wc -l) -ge 2 ]"
wait_for "two records over OTLP" bash -c "[ \$(jq -c '.resourceLogs[].scopeLogs[].logRecords[]' '$WORK/out/otlp.json' 2>/dev/null | wc -l) -ge 2 ]"
[ "$(count "$WORK/out/filelog.json")" -eq 2 ] || fail "filelog: $(count "$WORK/out/filelog.json") records, want 2"
[ "$(count "$WORK/out/otlp.json")" -eq 2 ] || fail "otlp: $(count "$WORK/out/otlp.json") records, want 2"

echo "== checking what arrived"
# attr FILE BODY KEY: the attribute KEY (a dotted path into kvlist values for the filelog route)
# of the log record whose body is BODY, as "type:value".
attr() {
  jq -r --arg body "$2" --arg key "$3" '
    def val: if .stringValue != null then "string:" + .stringValue
      elif .boolValue != null then "bool:" + (.boolValue|tostring)
      elif .intValue != null then "int:" + (.intValue|tostring)
      elif .doubleValue != null then "double:" + (.doubleValue|tostring)
      else tostring end;
    def lookup($path): if ($path|length) == 0 then val
      else (.kvlistValue.values[] | select(.key == $path[0]) | .value | lookup($path[1:])) end;
    .resourceLogs[].scopeLogs[].logRecords[] | select(.body.stringValue == $body) |
    (.attributes[] | select(.key == $key) | .value | val),
    ($key | split(".")) as $p | (.attributes[] | select(.key == $p[0]) | .value | lookup($p[1:]))' "$1" | head -n 1
}
expect() { # expect ROUTE FILE BODY KEY WANT
  local got; got=$(attr "$2" "$3" "$4")
  [ "$got" = "$5" ] || fail "$1: attribute $4 = '$got', want '$5'"
}
n=0
while IFS= read -r line; do
  n=$((n + 1))
  id=$(jq -r .requestId <<<"$line")
  for route in filelog otlp; do
    out="$WORK/out/$route.json"
    [ -n "$(attr "$out" "$line" method)" ] || fail "$route: no log record whose body is the record $line"
    expect "$route" "$out" "$line" method "string:tools/call"
    expect "$route" "$out" "$line" server.name "string:weather"
    expect "$route" "$out" "$line" pod "string:weather-0"
    expect "$route" "$out" "$line" decision.reason "string:Allowed"
    expect "$route" "$out" "$line" catalogRevision "string:$(jq -r .catalogRevision <<<"$line")"
    case $id in
      1) expect "$route" "$out" "$line" name "string:get_forecast"
         expect "$route" "$out" "$line" outcome.status "string:result" ;;
      2) expect "$route" "$out" "$line" name "string:no_such_tool"
         expect "$route" "$out" "$line" outcome.status "string:error" ;;
    esac
  done
  # The arguments: a JSON object parsed by the json parser; a JSON string over OTLP.
  if [ "$id" = 1 ]; then
    expect filelog "$WORK/out/filelog.json" "$line" arguments.apiKey "string:[REDACTED]"
    expect filelog "$WORK/out/filelog.json" "$line" arguments.city "string:Lyon"
    expect otlp "$WORK/out/otlp.json" "$line" arguments 'string:{"city":"Lyon","apiKey":"[REDACTED]"}'
  fi
done <"$AUDIT"
[ "$n" -eq 2 ] || fail "$n records in the audit file, want 2"
svc=$(jq -r '.resourceLogs[0].resource.attributes[] | select(.key == "service.name") | .value.stringValue' <(head -n 1 "$WORK/out/otlp.json"))
[ "$svc" = "switchboard-sidecar" ] || fail "otlp: service.name '$svc'"
if grep -rq "$SECRET" "$WORK/out" "$AUDIT"; then fail "the redacted key reached the log agent"; fi
echo "PASS: 2 records through the filelog receiver and over OTLP, fields as attributes, the key redacted"
rm -rf "$WORK"
