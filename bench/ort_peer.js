#!/usr/bin/env node
// ONNX Runtime peer of `rlx run --bench`, for bench/race.py.
//
//   node bench/ort_peer.js MODEL.onnx INPUTS.safetensors [--runs N] [--warmup W]
//        [--threads T] [--out OUT.safetensors] [--peers DIR] [--profile [--profile-nodes K]]
//
// Loads onnxruntime-node 1.30 from DIR/node_modules (default $RLX_PEERS_DIR or
// ~/.cache/rlx-peers; scripts/install-peers.sh installs it there), binds the
// inputs by name from the safetensors file, runs W untimed warm-up runs and N
// timed runs on one session (CPU, intraOpNumThreads T, interOpNumThreads 1,
// graphOptimizationLevel 'all', sequential execution) and prints one JSON line:
// {"min_ms", "median_ms", "max_ms", "ms": [every run], "create_ms",
//  "rss_peak_bytes" (VmHWM), "rss_before_session_bytes"}. The median is sorted[n/2],
// as rlx run computes it. --out writes the first run's outputs by name.
// --profile turns on ORT's profiler for the timed runs and prints, to stderr,
// the time per op kind and the slowest nodes (ms per run), as `rlx run
// --profile` does, so the two can be read side by side: the 25 slowest nodes,
// or K (--profile-nodes K), or with K = 0 every node in the order it first ran
// (to line a model's layers up with `rlx.Model.profile()`'s).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function parseArgs(argv) {
  const a = {runs: 10, warmup: 2, threads: 2, out: '', pos: [], profileNodes: 25,
             peers: process.env.RLX_PEERS_DIR || path.join(os.homedir(), '.cache', 'rlx-peers')};
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    if (k === '--runs') a.runs = parseInt(argv[++i], 10);
    else if (k === '--warmup') a.warmup = parseInt(argv[++i], 10);
    else if (k === '--threads') a.threads = parseInt(argv[++i], 10);
    else if (k === '--out') a.out = argv[++i];
    else if (k === '--peers') a.peers = argv[++i];
    else if (k === '--profile') a.profile = true;
    else if (k === '--profile-nodes') a.profileNodes = parseInt(argv[++i], 10);
    else a.pos.push(k);
  }
  if (a.pos.length !== 2) {
    process.stderr.write('usage: ort_peer.js MODEL.onnx INPUTS.safetensors [--runs N] ' +
                         '[--warmup W] [--threads T] [--out OUT.safetensors] [--peers DIR]\n');
    process.exit(2);
  }
  return a;
}

// safetensors dtype <-> (ORT tensor type, typed array)
const DTYPES = {
  F32: ['float32', Float32Array], F64: ['float64', Float64Array],
  I64: ['int64', BigInt64Array], I32: ['int32', Int32Array], I16: ['int16', Int16Array],
  I8: ['int8', Int8Array], U8: ['uint8', Uint8Array], BOOL: ['bool', Uint8Array],
};
const BACK = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v[0], k]));

function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n;
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const dt = DTYPES[info.dtype];
    if (!dt) throw new Error(`${file}: tensor '${name}' has dtype ${info.dtype}, not supported`);
    const [b, e] = info.data_offsets;
    // Copy into a fresh, aligned buffer: typed arrays need element alignment.
    const bytes = new Uint8Array(e - b);
    bytes.set(buf.subarray(base + b, base + e));
    out[name] = {type: dt[0], data: new dt[1](bytes.buffer), dims: info.shape};
  }
  return out;
}

function writeSafetensors(file, tensors) {
  const header = {};
  const parts = [];
  let off = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const dt = BACK[t.type];
    if (!dt) throw new Error(`output '${name}' has type ${t.type}, not writable`);
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = {dtype: dt, shape: t.dims.map(Number), data_offsets: [off, off + bytes.length]};
    parts.push(bytes);
    off += bytes.length;
  }
  let h = Buffer.from(JSON.stringify(header), 'utf8');
  const pad = (8 - (h.length % 8)) % 8;
  h = Buffer.concat([h, Buffer.alloc(pad, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  fs.writeFileSync(file, Buffer.concat([len, h, ...parts]));
}

function vmHWM() {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\s*(\d+) kB/);
  return m ? parseInt(m[1], 10) * 1024 : null;
}

// ORT's trace: one "Node" event per kernel run, `dur` in microseconds.
function printProfile(file, runs, nodes) {
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  const byKind = {}, byNode = {};
  let total = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const ms = e.dur / 1000 / runs, kind = e.args.op_name;
    const node = e.name.slice(0, -'_kernel_time'.length);
    byKind[kind] = (byKind[kind] || 0) + ms;
    byNode[node] = byNode[node] || {kind, ms: 0};
    byNode[node].ms += ms;
    total += ms;
  }
  const lines = [`ORT profile: ${total.toFixed(3)} ms per run in kernels`];
  for (const [k, v] of Object.entries(byKind).sort((x, y) => y[1] - x[1]))
    lines.push(`  ${k.padEnd(24)} ${v.toFixed(3).padStart(8)}`);
  const all = Object.entries(byNode);  // in the order each node first ran
  lines.push(nodes > 0 ? '  slowest nodes:' : '  every node, in run order:');
  for (const [n, v] of nodes > 0 ? all.sort((x, y) => y[1].ms - x[1].ms).slice(0, nodes) : all)
    lines.push(`  ${v.ms.toFixed(3).padStart(8)} ms  ${v.kind.padEnd(18)} ${n}`);
  process.stderr.write(lines.join('\n') + '\n');
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require(path.join(a.peers, 'node_modules', 'onnxruntime-node'));
  const [modelPath, inputsPath] = a.pos;
  const raw = readSafetensors(inputsPath);
  const rssBefore = process.memoryUsage().rss;
  let t0 = performance.now();
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    enableProfiling: !!a.profile,
    profileFilePrefix: path.join(os.tmpdir(), `ort_peer_${process.pid}`),
  });
  const createMs = performance.now() - t0;
  const feeds = {};
  for (const name of session.inputNames) {
    if (!raw[name]) {
      throw new Error(`${modelPath} takes inputs [${session.inputNames}]; '${name}' is missing ` +
                      `from ${inputsPath} (has [${Object.keys(raw)}])`);
    }
    feeds[name] = new ort.Tensor(raw[name].type, raw[name].data, raw[name].dims);
  }
  const first = await session.run(feeds);
  if (a.out) writeSafetensors(a.out, first);
  for (let i = 1; i < a.warmup; ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.runs; ++i) {
    t0 = performance.now();
    await session.run(feeds);
    ms.push(performance.now() - t0);
  }
  if (a.profile) {
    await session.endProfiling();  // writes <profileFilePrefix>_<date>.json
    const prefix = `ort_peer_${process.pid}`;
    const file = fs.readdirSync(os.tmpdir()).find((f) => f.startsWith(prefix));
    printProfile(path.join(os.tmpdir(), file), a.runs + a.warmup, a.profileNodes);
  }
  const s = [...ms].sort((x, y) => x - y);
  const res = {
    min_ms: s[0], median_ms: s[Math.floor(s.length / 2)], max_ms: s[s.length - 1], ms,
    create_ms: createMs, threads: a.threads, version: ort.env.versions ? ort.env.versions.common : '',
    // The whole node process's peak (runtime + weights + arena): VmHWM, as maxRSS
    // would also count the memory of the process that started this one before exec.
    rss_peak_bytes: vmHWM(), rss_before_session_bytes: rssBefore,
  };
  process.stdout.write(JSON.stringify(res) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_peer: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
