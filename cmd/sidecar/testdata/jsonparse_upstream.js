// A minimal MCP upstream that reads every message with JSON.parse (exact
// keys, the last duplicate wins), as TypeScript servers do. It records each
// request it would run (one JSON line per request in RECORD) so that
// TestParserDifferential can compare what it saw with what the sidecar
// decided on.
//
//   node jsonparse_upstream.js http   PORT RECORD   2026-07-28 server over HTTP
//   node jsonparse_upstream.js legacy PORT RECORD   2025-11-25 server over HTTP
//   node jsonparse_upstream.js stdio  -    RECORD   2025-11-25 server on stdin/stdout
'use strict';
const fs = require('fs');
const http = require('http');
const readline = require('readline');

const [mode, port, record] = process.argv.slice(2);
const legacy = mode !== 'http';
const tools = ['allowed_tool', 'disabled_tool', 'undeclared_tool'].map((name) => ({
  name,
  inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } },
}));

const str = (v) => (typeof v === 'string' ? v : '');

// answer returns [HTTP status, response message or null].
function answer(raw, paramHeader) {
  let m;
  try {
    m = JSON.parse(raw);
  } catch (e) {
    return [400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }];
  }
  if (m === null || typeof m !== 'object' || Array.isArray(m)) {
    return [400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } }];
  }
  const hasID = Object.prototype.hasOwnProperty.call(m, 'id');
  const ok = (result) => [200, { jsonrpc: '2.0', id: m.id, result }];
  if (!hasID) return [202, null]; // a notification: nothing runs
  const p = m.params !== null && typeof m.params === 'object' ? m.params : {};
  switch (m.method) {
    case 'server/discover':
      if (legacy) return [200, { jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } }];
      return ok({ resultType: 'complete', supportedVersions: ['2026-07-28'], capabilities: { tools: {}, resources: {} },
        serverInfo: { name: 'jsonparse', version: '1' } });
    case 'initialize':
      return ok({ protocolVersion: '2025-11-25', capabilities: { tools: {}, resources: {} }, serverInfo: { name: 'jsonparse', version: '1' } });
    case 'tools/list':
      return ok(legacy ? { tools } : { resultType: 'complete', tools });
    case 'ping':
      return ok({});
  }
  const args = p.arguments !== null && typeof p.arguments === 'object' ? p.arguments : {};
  fs.appendFileSync(record, JSON.stringify({ method: str(m.method), name: str(p.name), uri: str(p.uri),
    param: paramHeader || '', region: str(args.region) }) + '\n');
  const res = { content: [{ type: 'text', text: 'ran' }] };
  if (!legacy) res.resultType = 'complete';
  return ok(res);
}

if (mode === 'stdio') {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const [, msg] = answer(line, '');
    if (msg !== null) process.stdout.write(JSON.stringify(msg) + '\n');
  });
} else {
  http.createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(req.method === 'DELETE' ? 200 : 405).end();
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const [status, msg] = answer(Buffer.concat(chunks).toString('utf8'), req.headers['mcp-param-region']);
      const h = { 'Content-Type': 'application/json' };
      if (legacy) h['Mcp-Session-Id'] = 'jsonparse-session';
      res.writeHead(status, h).end(msg === null ? '' : JSON.stringify(msg));
    });
  }).listen(Number(port), '127.0.0.1');
}
