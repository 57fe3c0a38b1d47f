// The factlog package's benchmark: `npm run bench -- [options]` in node/ (or
// `node --expose-gc bench/run.mjs [options]` after `npm run build:ts`). README.md beside
// this file says what each figure is; results.schema.json describes the JSON it writes.
//
// One process runs every part, interleaved: each run measures every backend of every part
// once, in an order rotated from run to run, on fresh directories; figures are medians over
// the runs, and every ratio compares figures of the same process and minutes.

import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { DEFAULT_SHAPE, counts, session } from "./workload.mjs";
import { SESSION_BACKENDS } from "./session.mjs";
import { buildRustBench, nativeDeltaRound, nodeDeltaRound, rustDeltaRound } from "./delta.mjs";
import { checkpointCalls, driveSaver } from "./langgraph.mjs";
import { SAVERS, SAVER_PAIRS, loadFactlogSaver } from "./savers.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKAGE = path.dirname(HERE);
const REPO = path.dirname(PACKAGE);
const SEED = 7;
const SYNC_CALLS = ["fsync", "fdatasync", "sync_file_range", "msync", "sync", "syncfs"];

const HELP = `npm run bench -- [options]   (in node/; or node --expose-gc bench/run.mjs [options])

  --runs N            interleaved runs; figures are medians over them (default 5)
  --turns N           turns per session (default 50)
  --steps N           steps per turn (default 4)
  --tokens N          deltas per step (default 200)
  --delta-runs N      timed runs of task.delta per round (default 5)
  --delta-per-run N   task.delta calls per timed run (default 50000)
  --gets N            getTuple calls per saver and kind, per run (default 10)
  --lists N           list({limit: 10}) calls per saver, per run (default 5)
  --no-list-all       skip the list of the whole thread (the longest read)
  --parts LIST        comma-separated: session,delta,langgraph (default all)
  --no-rust           skip the Rust Task::delta measurement (no cargo)
  --no-strace         skip the counted-syncs pass (strace)
  --dir DIR           scratch directory (default: a fresh one under the OS temp dir)
  --out FILE          JSON results (default bench/results/latest.json; "-" for none)
  --help`;

function options() {
  const { values } = parseArgs({
    options: {
      runs: { type: "string", default: "5" },
      turns: { type: "string", default: String(DEFAULT_SHAPE.turns) },
      steps: { type: "string", default: String(DEFAULT_SHAPE.steps) },
      tokens: { type: "string", default: String(DEFAULT_SHAPE.tokens) },
      "delta-runs": { type: "string", default: "5" },
      "delta-per-run": { type: "string", default: "50000" },
      gets: { type: "string", default: "10" },
      lists: { type: "string", default: "5" },
      parts: { type: "string", default: "session,delta,langgraph" },
      "no-rust": { type: "boolean", default: false },
      "no-strace": { type: "boolean", default: false },
      "no-list-all": { type: "boolean", default: false },
      dir: { type: "string" },
      out: { type: "string", default: path.join(HERE, "results", "latest.json") },
      help: { type: "boolean", default: false },
      // Internal: run one backend's writes once, for the counted-syncs pass under strace.
      "count-syncs": { type: "string" },
    },
  });
  if (values.help) {
    console.log(HELP);
    process.exit(0);
  }
  const int = (name, min) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < min) {
      console.error(`--${name} must be an integer of at least ${min}, not ${values[name]}`);
      process.exit(2);
    }
    return value;
  };
  const parts = new Set(values.parts.split(",").map((p) => p.trim()).filter(Boolean));
  for (const part of parts) {
    if (!["session", "delta", "langgraph"].includes(part)) {
      console.error(`--parts: unknown part ${part} (session, delta, langgraph)`);
      process.exit(2);
    }
  }
  return {
    runs: int("runs", 1),
    shape: { ...DEFAULT_SHAPE, turns: int("turns", 0), steps: int("steps", 1), tokens: int("tokens", 1) },
    deltaRuns: int("delta-runs", 1),
    deltaPerRun: int("delta-per-run", 1),
    reads: { gets: int("gets", 1), lists: int("lists", 1), listAll: !values["no-list-all"] },
    parts,
    rust: !values["no-rust"],
    strace: !values["no-strace"],
    dir: values.dir,
    out: values.out,
    countSyncs: values["count-syncs"],
  };
}

// ---------------------------------------------------------------------------------------------
// Statistics

function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1], values };
}

/** A ratio of two series measured run by run: of their medians, and the spread of the
 * per-run ratios. */
function ratio(numerators, denominators) {
  const perRun = numerators.map((n, i) => n / denominators[i]);
  const s = summary(perRun);
  return { of_medians: summary(numerators).median / summary(denominators).median, per_run: s };
}

const rotate = (list, by) => list.slice(by % list.length).concat(list.slice(0, by % list.length));
const fmt = (value, digits = 0) =>
  value === undefined || value === null || Number.isNaN(value) ? "-" : value.toFixed(digits);
const spread = (s, digits = 0) => `${fmt(s.median, digits)} [${fmt(s.min, digits)}-${fmt(s.max, digits)}]`;

function scratchDir(root, name) {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// ---------------------------------------------------------------------------------------------
// The counted-syncs pass: each backend's writes once more in a child process under strace,
// which counts every sync system call of every thread (factlog's flusher included). The same
// child with no events counts what opening and closing cost; the difference is the session's.

async function countSyncsChild(opts) {
  const scratch = fs.mkdtempSync(path.join(opts.dir ?? os.tmpdir(), "factlog-bench-count-"));
  const [part, name] = opts.countSyncs.split(":");
  if (part === "session") {
    await SESSION_BACKENDS[name](scratch, session(opts.shape, SEED));
  } else {
    const reason = name.startsWith("factlog") ? await loadFactlogSaver() : null;
    if (reason) throw new Error(reason);
    const { saver, close } = await SAVERS[name].open(scratch);
    const calls = opts.shape.turns === 0 ? [] : checkpointCalls(opts.shape, SEED);
    await driveSaver(saver, calls, `session-${SEED}`, { gets: 0, lists: 0, listAll: false });
    await close();
  }
  fs.rmSync(scratch, { recursive: true, force: true });
}

function straceSyncs(args, scratch) {
  const log = path.join(scratch, `strace-${process.pid}-${Date.now()}.txt`);
  const result = spawnSync(
    "strace",
    ["-f", "-qq", "-c", "-o", log, "-e", `trace=${SYNC_CALLS.join(",")}`, process.execPath,
      fileURLToPath(import.meta.url), ...args],
    { encoding: "utf8", cwd: PACKAGE },
  );
  if (result.error) return { error: `strace: ${result.error.message}` };
  if (result.status !== 0) return { error: `strace child failed: ${result.stderr.trim().split("\n").slice(-3).join(" ")}` };
  const byCall = {};
  for (const line of fs.readFileSync(log, "utf8").split("\n")) {
    const match = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    if (match && SYNC_CALLS.includes(match[2])) byCall[match[2]] = Number(match[1]);
  }
  fs.rmSync(log, { force: true });
  return { total: Object.values(byCall).reduce((a, b) => a + b, 0), by_call: byCall };
}

function countSyncs(target, opts, scratch) {
  const common = ["--steps", String(opts.shape.steps), "--tokens", String(opts.shape.tokens), "--dir", scratch];
  const full = straceSyncs(["--count-syncs", target, "--turns", String(opts.shape.turns), ...common], scratch);
  if (full.error) return full;
  const empty = straceSyncs(["--count-syncs", target, "--turns", "0", ...common], scratch);
  if (empty.error) return empty;
  return { with_session: full, open_close_only: empty, session: full.total - empty.total };
}

// ---------------------------------------------------------------------------------------------
// The parts, one run at a time

async function main() {
  const opts = options();
  if (opts.countSyncs) {
    await countSyncsChild(opts);
    return;
  }
  const started = new Date();
  const scratch = opts.dir
    ? scratchDir(opts.dir, `factlog-bench-${process.pid}`)
    : fs.mkdtempSync(path.join(os.tmpdir(), "factlog-bench-"));
  const log = (line) => process.stderr.write(`${line}\n`);
  const shapeCounts = counts(opts.shape);
  const results = {
    schema: "factlog-node-bench/1",
    started_at: started.toISOString(),
    command: `node ${process.execArgv.join(" ")} bench/run.mjs ${process.argv.slice(2).join(" ")}`.replace(/\s+/g, " ").trim(),
    git_head: spawnSync("git", ["rev-parse", "HEAD"], { cwd: REPO, encoding: "utf8" }).stdout?.trim() || null,
    addon_modified_at: fs.statSync(path.join(PACKAGE, "factlog.node")).mtime.toISOString(),
    machine: {
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
      cpus: os.cpus().length,
      cpu_model: os.cpus()[0]?.model ?? null,
      load_average_start: os.loadavg(),
      scratch_dir: scratch,
    },
    options: {
      runs: opts.runs,
      shape: opts.shape,
      seed: SEED,
      delta_runs: opts.deltaRuns,
      delta_per_run: opts.deltaPerRun,
      reads: opts.reads,
      parts: [...opts.parts],
    },
  };

  // Set-up outside the runs: the workloads, the Rust bench's build, the saver's import.
  const workload = opts.parts.has("session") ? session(opts.shape, SEED) : null;
  let rust = null;
  if (opts.parts.has("delta") && opts.rust) {
    log("building the Rust criterion bench (cargo bench --no-run) ...");
    rust = buildRustBench(REPO);
    if (rust.error) log(rust.error);
  }
  let saverNames = [];
  let saverSkipped = null;
  let saverCalls = null;
  if (opts.parts.has("langgraph")) {
    saverSkipped = await loadFactlogSaver();
    saverNames = Object.keys(SAVERS).filter((name) => !(saverSkipped && name.startsWith("factlog")));
    if (saverSkipped) log(`langgraph: ${saverSkipped}; measuring the SQLite saver alone`);
    saverCalls = checkpointCalls(opts.shape, SEED);
  }

  const sessionTimes = Object.fromEntries(Object.keys(SESSION_BACKENDS).map((n) => [n, []]));
  const sessionFacts = {};
  const delta = { node: [], native: [], rust: [] };
  const saverTimes = Object.fromEntries(saverNames.map((n) => [n, []]));
  const saverCounts = {};

  for (let run = 0; run < opts.runs; run++) {
    const runDir = scratchDir(scratch, `run-${run}`);
    const line = [];
    if (workload) {
      for (const name of rotate(Object.keys(SESSION_BACKENDS), run)) {
        globalThis.gc?.();
        const result = await SESSION_BACKENDS[name](scratchDir(runDir, `session-${name}`), workload);
        sessionTimes[name].push(result.seconds);
        sessionFacts[name] = { syncs_requested: result.syncsRequested, bytes_on_disk: result.bytes };
        line.push(`${name} ${(result.seconds * 1e3).toFixed(0)} ms`);
      }
    }
    if (opts.parts.has("delta")) {
      const rounds = [
        async () => delta.node.push(...(await nodeDeltaRound(scratchDir(runDir, "delta"), opts.deltaRuns, opts.deltaPerRun))),
        async () => delta.native.push(...(await nativeDeltaRound(scratchDir(runDir, "delta"), opts.deltaRuns, opts.deltaPerRun))),
      ];
      if (rust?.executable) {
        rounds.push(async () => delta.rust.push(rustDeltaRound(rust.executable, path.join(REPO, "bench"), runDir)));
      }
      for (const round of rotate(rounds, run)) await round();
      line.push(`delta node ${fmt(delta.node.at(-1))} ns, native ${fmt(delta.native.at(-1))} ns` +
        (rust?.executable ? `, rust ${fmt(delta.rust.at(-1))} ns` : ""));
    }
    for (const name of rotate(saverNames, run)) {
      globalThis.gc?.();
      const dir = scratchDir(runDir, `saver-${name.replace(/\s+/g, "-")}`);
      const { saver, close } = await SAVERS[name].open(dir);
      const result = await driveSaver(saver, saverCalls, `session-${SEED}`, opts.reads);
      await close();
      saverTimes[name].push(result.seconds);
      saverCounts[name] = result.counts;
      line.push(`${name} put ${((result.seconds.put / result.counts.put) * 1e6).toFixed(0)} us`);
    }
    fs.rmSync(runDir, { recursive: true, force: true });
    log(`run ${run + 1}/${opts.runs}: ${line.join(", ")}`);
  }

  // The counted-syncs pass, after the timed runs.
  const counted = {};
  if (opts.strace && (workload || saverNames.length)) {
    log("counting sync system calls under strace (untimed) ...");
    const probe = spawnSync("strace", ["-V"], { encoding: "utf8" });
    if (probe.error || probe.status !== 0) {
      log("strace is not available: syncs are the ones requested, not counted");
    } else {
      if (workload) for (const name of Object.keys(SESSION_BACKENDS)) counted[`session:${name}`] = countSyncs(`session:${name}`, opts, scratch);
      for (const name of saverNames) counted[`langgraph:${name}`] = countSyncs(`langgraph:${name}`, opts, scratch);
    }
  }

  // Figures.
  if (workload) {
    const backends = {};
    for (const [name, times] of Object.entries(sessionTimes)) {
      const count = counted[`session:${name}`];
      backends[name] = {
        seconds: summary(times),
        ns_per_token: summary(times.map((s) => (s * 1e9) / shapeCounts.deltas)),
        syncs_requested: sessionFacts[name].syncs_requested,
        syncs_counted: count ?? null,
        syncs_per_critical_event: count && !count.error ? count.session / shapeCounts.critical : null,
        bytes_on_disk: sessionFacts[name].bytes_on_disk,
      };
    }
    results.session = {
      counts: shapeCounts,
      backends,
      ratios_to_jsonl: Object.fromEntries(
        Object.keys(sessionTimes).map((n) => [n, ratio(sessionTimes[n], sessionTimes.jsonl)]),
      ),
    };
  }
  if (opts.parts.has("delta")) {
    results.delta = {
      fragment_bytes: 24,
      node: summary(delta.node),
      node_native: summary(delta.native),
      rust: delta.rust.length ? summary(delta.rust) : null,
      rust_source: rust?.executable
        ? "criterion harness_delta/typed_delta_24b (bench/benches/harness.rs), median of its samples, one measurement per run"
        : (rust?.error ?? "not measured (--no-rust)"),
      node_to_rust: delta.rust.length ? summary(delta.node).median / summary(delta.rust).median : null,
      // Each round's Node median over the Rust figure of the same round.
      node_to_rust_per_round: delta.rust.length
        ? summary(delta.rust.map((rust, round) =>
          summary(delta.node.slice(round * opts.deltaRuns, (round + 1) * opts.deltaRuns)).median / rust))
        : null,
      native_to_rust: delta.rust.length ? summary(delta.native).median / summary(delta.rust).median : null,
      goal_node_to_rust_max: 2,
    };
  }
  if (opts.parts.has("langgraph")) {
    const perCall = (name, op) =>
      saverTimes[name].map((s) => (s[op] / saverCounts[name][op]) * 1e6);
    const ops = saverOps(opts);
    const savers = {};
    for (const name of saverNames) {
      const count = counted[`langgraph:${name}`];
      savers[name] = {
        durability: SAVERS[name].durability,
        us_per_call: Object.fromEntries(ops.map((op) => [op, summary(perCall(name, op))])),
        calls: saverCounts[name],
        syncs_counted: count ?? null,
      };
    }
    const pairs = {};
    for (const [ours, theirs] of SAVER_PAIRS) {
      if (!savers[ours] || !savers[theirs]) continue;
      pairs[`${ours} / ${theirs}`] = Object.fromEntries(
        ops.map((op) => [op, ratio(perCall(ours, op), perCall(theirs, op))]),
      );
    }
    results.langgraph = {
      skipped_factlog: saverSkipped,
      puts: saverCalls.filter((c) => c.kind === "put").length,
      savers,
      ratios: pairs,
    };
  }
  results.machine.load_average_end = os.loadavg();
  results.finished_at = new Date().toISOString();
  fs.rmSync(scratch, { recursive: true, force: true });

  print(results, opts);
  if (opts.out !== "-") {
    fs.mkdirSync(path.dirname(opts.out), { recursive: true });
    fs.writeFileSync(opts.out, `${JSON.stringify(results, null, 2)}\n`);
    log(`wrote ${opts.out}`);
  }
}

function saverOps(opts) {
  const ops = ["put", "putWrites", "getLatest", "getById", "list10", "listAll"];
  return opts.reads.listAll ? ops : ops.slice(0, -1);
}

function print(results, opts) {
  const out = [];
  const { turns, steps, tokens } = opts.shape;
  out.push(`factlog Node bench, ${opts.runs} interleaved runs, medians [min-max over runs]; ${results.machine.node}, ${results.machine.cpus} CPUs`);
  if (results.session) {
    const s = results.session;
    out.push("");
    out.push(`1. Agent session: ${turns} turns x ${steps} steps x ${tokens} tokens = ${s.counts.events} events, ` +
      `${s.counts.deltas} deltas, ${s.counts.critical} critical`);
    out.push(`${"backend".padEnd(10)} ${"ms/session".padStart(20)} ${"ns/token".padStart(20)} ${"x jsonl".padStart(18)} ` +
      `${"syncs asked".padStart(11)} ${"syncs counted".padStart(13)} ${"per critical".padStart(12)}`);
    for (const [name, b] of Object.entries(s.backends)) {
      const r = s.ratios_to_jsonl[name];
      const counted = b.syncs_counted?.error ? "error" : (b.syncs_counted?.session ?? "-");
      out.push(`${name.padEnd(10)} ${spread({ median: b.seconds.median * 1e3, min: b.seconds.min * 1e3, max: b.seconds.max * 1e3 }).padStart(20)} ` +
        `${spread(b.ns_per_token).padStart(20)} ${`${fmt(r.of_medians, 2)} [${fmt(r.per_run.min, 2)}-${fmt(r.per_run.max, 2)}]`.padStart(18)} ` +
        `${String(b.syncs_requested).padStart(11)} ${String(counted).padStart(13)} ${fmt(b.syncs_per_critical_event, 2).padStart(12)}`);
    }
  }
  if (results.delta) {
    const d = results.delta;
    out.push("");
    out.push(`2. Per-token delta, 24-byte fragment, ns per call, median [min-max] (${opts.deltaRuns} runs of ${opts.deltaPerRun} per round):`);
    out.push(`   Node task.delta          ${spread(d.node)}`);
    out.push(`   Node addon delta (raw)   ${spread(d.node_native)}`);
    out.push(`   Rust Task::delta         ${d.rust ? spread(d.rust) : d.rust_source}`);
    if (d.rust) {
      out.push(`   Node / Rust: ${fmt(d.node_to_rust, 2)} of the medians, ${spread(d.node_to_rust_per_round, 2)} round by round ` +
        `(goal <= ${d.goal_node_to_rust_max}); addon / Rust: ${fmt(d.native_to_rust, 2)}`);
    }
  }
  if (results.langgraph) {
    const l = results.langgraph;
    out.push("");
    out.push(`3. LangGraph savers: ${l.puts} puts per session (${turns} turns x ${steps} steps), us per call, median [min-max]`);
    if (l.skipped_factlog) out.push(`   FactlogSaver not measured: ${l.skipped_factlog}`);
    const ops = saverOps(opts);
    out.push(`${"saver".padEnd(16)} ${ops.map((o) => o.padStart(22)).join(" ")} ${"syncs/put+writes".padStart(17)}`);
    for (const [name, s] of Object.entries(l.savers)) {
      const writes = s.calls.put + s.calls.putWrites;
      const syncs = s.syncs_counted && !s.syncs_counted.error ? fmt(s.syncs_counted.session / writes, 2) : "-";
      out.push(`${name.padEnd(16)} ${ops.map((o) => spread(s.us_per_call[o]).padStart(22)).join(" ")} ${syncs.padStart(17)}`);
    }
    for (const [pair, r] of Object.entries(l.ratios)) {
      out.push(`   ${pair}: ${ops.map((o) => `${o} ${fmt(r[o].of_medians, 2)}`).join(", ")}`);
    }
  }
  console.log(out.join("\n"));
}

await main();
