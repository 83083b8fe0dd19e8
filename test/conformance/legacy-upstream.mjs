// Judges a 2026-07-28 suite run through the sidecar in front of a 2025-era
// upstream (go-sdk v1.4.1's everything-server over HTTP, or over stdio behind
// the stdio bridge). Required: the 23 required server scenarios from
// server-stateless through caching (the input-required-result-* ones need
// test tools this older server does not have: they are run and reported,
// not scored). A check the suite itself marks untestable because the server
// lacks a diagnostic tool (details.untestable, e.g. test_missing_capability,
// which v1.4.1 does not have) is reported, not counted against the sidecar;
// every other failed check fails the run.
// Usage: node legacy-upstream.mjs <required-list.txt> <results-dir> <label>
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

const [listFile, dir, label] = process.argv.slice(2);
const all = [];
let inServer = false;
for (const line of readFileSync(listFile, "utf8").split("\n")) {
  if (line.startsWith("Server scenarios")) { inServer = true; continue; }
  if (inServer && /^\S/.test(line)) break;
  const m = line.match(/^\s+-\s+(\S+)/);
  if (inServer && m) all.push(m[1]);
}
const required = all.filter((s) => !s.startsWith("input-required-result-"));
const reported = all.filter((s) => s.startsWith("input-required-result-"));
if (required.length !== 23) { console.error(`expected 23 required scenarios before input-required-result-*, found ${required.length}`); process.exit(2); }

const results = new Map();
for (const d of readdirSync(dir)) {
  const m = d.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T/);
  if (m) results.set(m[1], JSON.parse(readFileSync(join(dir, d, "checks.json"), "utf8")));
}
let pass = 0, bad = 0;
for (const s of required) {
  const checks = results.get(s);
  if (!checks) { bad++; console.log(`[${label}] REQUIRED FAIL ${s}: not run`); continue; }
  const failed = checks.filter((c) => c.status === "FAILURE");
  const untestable = failed.filter((c) => c.details?.untestable === true);
  const real = failed.filter((c) => c.details?.untestable !== true);
  if (untestable.length) console.log(`[${label}] ${s}: not testable with this 2025-era server (it lacks the diagnostic tools): ${untestable.map((c) => c.id).join(", ")}`);
  if (real.length) { bad++; console.log(`[${label}] REQUIRED FAIL ${s}: ${real.map((c) => `${c.id} (${(c.errorMessage || "").slice(0, 160)})`).join("; ")}`); continue; }
  pass++;
}
let irPass = 0;
for (const s of reported) {
  const checks = results.get(s);
  const ok = checks && checks.every((c) => c.status !== "FAILURE");
  if (ok) irPass++;
  console.log(`[${label}] reported (not scored): ${s}: ${!checks ? "not run" : ok ? "pass" : "fail: " + checks.filter((c) => c.status === "FAILURE").map((c) => c.id).join(", ")}`);
}
console.log(`[${label}] required: ${pass}/${required.length} pass; input-required-result-*: ${irPass}/${reported.length} pass (not scored)`);
process.exit(bad === 0 ? 0 : 1);
