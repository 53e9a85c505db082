// sidebyside.mjs measures memory-mcp against the reference filesystem MCP server
// (@modelcontextprotocol/server-filesystem) with the same TypeScript client
// (@modelcontextprotocol/sdk) over stdio: a 7-call mix per round on a file of its own
// (create, view, str_replace, insert, list the directory, rename, view again), the
// servers taking turns run by run, and the median of the runs for each. It prints calls/s
// and the server's CPU time per call (Linux: /proc/PID/stat), and the ratios to
// server-filesystem. server-filesystem never flushes; memory-mcp's os backend makes every
// change durable before it answers.
//
//   npm install --prefix /tmp/sbs @modelcontextprotocol/sdk@1.32.2 @modelcontextprotocol/server-filesystem@2026.8.31
//   GOEXPERIMENT=jsonv2 go build -o /tmp/memory-mcp .
//   node scripts/sidebyside.mjs /tmp/sbs/node_modules /tmp/memory-mcp [runs=6] [rounds=300] [BEFORE]
//
// BEFORE, another build of memory-mcp (an earlier commit, say), adds its os backend to the
// turns: a before-and-after measured in the same rounds. The two os builds swap turns from
// run to run, since the turn right after server-filesystem's is the slower one: in one
// day's sets on this project's machine, a build measured 9.4% faster than another when it
// took the later turn and 0.2–6.9% faster when it took that one.
//
// SBS_SETTLE=SECONDS waits that long after the sync before each server's run. On ext4
// without a journal every file creation skips the inodes freed in the last minute after
// they were written back (fs/ext4/ialloc.c, recently_deleted), so a run otherwise pays for
// the inodes the run before it freed (server-filesystem frees one per edit); 65 lets them
// age out, at a minute more per run.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { memoryMix } from './mix.mjs';

const [modules, binary, runsArg, roundsArg, before] = process.argv.slice(2);
if (!modules || !binary) {
  console.error('usage: node scripts/sidebyside.mjs NODE_MODULES MEMORY_MCP_BINARY [runs] [rounds] [BEFORE_BINARY]');
  process.exit(2);
}
const runs = Number(runsArg ?? 6), rounds = Number(roundsArg ?? 300);
const settle = Number(process.env.SBS_SETTLE ?? 0);
const sdk = (p) => import(path.join(modules, '@modelcontextprotocol/sdk/dist/esm', p));
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');

// cpuSeconds is the user and system CPU time a process has used so far.
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

// servers: how to start each, and the mix in its tools.
const servers = {
  'server-filesystem': {
    start: (dir) => ({ command: process.execPath, args: [path.join(modules, '@modelcontextprotocol/server-filesystem/dist/index.js'), dir] }),
    mix: (dir, i) => {
      const f = path.join(dir, `note-${i}.md`), g = path.join(dir, `moved-${i}.md`);
      return [
        ['write_file', { path: f, content: '# notes\nfirst line\n' }],
        ['read_text_file', { path: f }],
        ['edit_file', { path: f, edits: [{ oldText: 'first line', newText: 'first LINE' }] }],
        ['edit_file', { path: f, edits: [{ oldText: '# notes', newText: '# notes\n- fact' }] }],
        ['list_directory', { path: dir }],
        ['move_file', { source: f, destination: g }],
        ['read_text_file', { path: g }],
      ];
    },
  },
};
for (const backend of before ? ['os', 'os (before)', 'memory'] : ['os', 'memory']) {
  const bin = backend === 'os (before)' ? before : binary;
  servers[`memory-mcp ${backend}`] = {
    start: (dir) => ({ command: bin, args: ['-log-level', 'error', ...(backend !== 'memory' ? ['-root', dir] : ['-backend', 'memory'])] }),
    mix: (_dir, i) => memoryMix(i),
  };
}

async function measure(name) {
  // Each server starts with nothing of the one before left to write: server-filesystem never
  // flushes, so the kernel would otherwise write its files back during the next server's
  // run, and (on ext4 without a journal) each file created in the next six minutes would
  // scan past the inodes it freed (in the next minute still, once they are written back).
  execFileSync('sync');
  if (settle > 0) await new Promise((resolve) => setTimeout(resolve, settle * 1000));
  const dir = mkdtempSync(path.join(tmpdir(), 'sbs-'));
  const s = servers[name];
  const transport = new StdioClientTransport({ ...s.start(dir), env: { ...process.env, XDG_DATA_HOME: dir }, stderr: 'ignore' });
  const client = new Client({ name: 'sidebyside', version: '1' });
  await client.connect(transport);
  const pid = transport.pid;
  const cpu0 = cpuSeconds(pid), t0 = process.hrtime.bigint();
  let calls = 0;
  for (let i = 0; i < rounds; i++) {
    for (const [tool, args] of s.mix(dir, i)) {
      const res = await client.callTool({ name: tool, arguments: args });
      if (res.isError) throw new Error(`${name} ${tool}: ${JSON.stringify(res.content)}`);
      calls++;
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9, cpu = cpuSeconds(pid) - cpu0;
  await client.close();
  // Removed after all runs: on ext4 without a journal, thousands of inodes freed just
  // before a run make its file creations slow (the allocator skips recently freed
  // inodes), which would penalise whichever server runs next.
  dirs.push(dir);
  return { callsPerSec: calls / secs, cpuPerCallUs: (cpu / calls) * 1e6 };
}

const dirs = [];
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const results = Object.fromEntries(Object.keys(servers).map((n) => [n, []]));
for (let r = 0; r < runs; r++) {
  const order = Object.keys(servers);
  if (before && r % 2 === 1) order.splice(1, 2, order[2], order[1]); // the os builds swap turns
  for (const name of order) results[name].push(await measure(name));
}
for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
const base = results['server-filesystem'];
const baseRate = median(base.map((x) => x.callsPerSec)), baseCPU = median(base.map((x) => x.cpuPerCallUs));
console.log(`${runs} runs of ${rounds} rounds × 7 calls, servers interleaved; medians`);
console.log('server'.padEnd(23), 'calls/s'.padStart(9), 'ratio'.padStart(7), 'CPU µs/call'.padStart(12), 'ratio'.padStart(7));
for (const [name, rs] of Object.entries(results)) {
  const rate = median(rs.map((x) => x.callsPerSec)), cpu = median(rs.map((x) => x.cpuPerCallUs));
  console.log(name.padEnd(23), rate.toFixed(0).padStart(9), (rate / baseRate).toFixed(2).padStart(7), cpu.toFixed(0).padStart(12), (cpu / baseCPU).toFixed(2).padStart(7));
}
