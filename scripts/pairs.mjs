// pairs.mjs compares two builds of memory-mcp on the os backend with the side-by-side
// script's mix (see sidebyside.mjs), in pairs of runs: A then B, B then A, and so on, each
// run on a store of its own, and prints the median calls/s of each and the median of the
// pairs' ratios B/A. It has no other server between the runs, so it resolves differences of
// a percent or two in about a minute, where a side-by-side set needs several sets for that
// on a shared machine; the side-by-side script remains the measure against
// server-filesystem.
//
//   node scripts/pairs.mjs /tmp/sbs/node_modules /tmp/memory-mcp-before /tmp/memory-mcp [pairs=40] [rounds=300]
//
// Every run leaves its files until the end: on ext4 without a journal, the inodes a run
// removed would make the next run's creations dearer in the same directory's block group.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { memoryMix } from './mix.mjs';

const [modules, A, B, pairsArg, roundsArg] = process.argv.slice(2);
if (!modules || !A || !B) {
  console.error('usage: node scripts/pairs.mjs NODE_MODULES BUILD_A BUILD_B [pairs] [rounds]');
  process.exit(2);
}
const pairs = Number(pairsArg ?? 40), rounds = Number(roundsArg ?? 300);
const sdk = (p) => import(path.join(modules, '@modelcontextprotocol/sdk/dist/esm', p));
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

const dirs = [];
async function measure(bin) {
  execFileSync('sync');
  const dir = mkdtempSync(path.join(tmpdir(), 'pairs-'));
  dirs.push(dir);
  const transport = new StdioClientTransport({ command: bin, args: ['-log-level', 'error', '-root', dir], env: { ...process.env, XDG_DATA_HOME: dir }, stderr: 'ignore' });
  const client = new Client({ name: 'pairs', version: '1' });
  await client.connect(transport);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) {
    for (const [tool, args] of memoryMix(i)) {
      const res = await client.callTool({ name: tool, arguments: args });
      if (res.isError) throw new Error(`${tool}: ${JSON.stringify(res.content)}`);
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  await client.close();
  return (rounds * 7) / secs;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const ra = [], rb = [], ratios = [];
for (let p = 0; p < pairs; p++) {
  let a, b;
  if (p % 2 === 0) { a = await measure(A); b = await measure(B); } else { b = await measure(B); a = await measure(A); }
  ra.push(a); rb.push(b); ratios.push(b / a);
}
for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
console.log(`${pairs} pairs of runs of ${rounds} rounds × 7 calls, os backend; medians`);
console.log(`A ${median(ra).toFixed(0)} calls/s, B ${median(rb).toFixed(0)} calls/s, B/A ${median(ratios).toFixed(3)} (pairs ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`);
