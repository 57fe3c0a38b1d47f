// Part 2: ns per `task.delta` of a 24-byte fragment from Node, against the Rust library's
// `Task::delta` measured by the project's criterion bench (`bench/benches/harness.rs`,
// `harness_delta/typed_delta_24b`) in the same run.
//
// Node: one fresh store per round (opened outside the timing, default options: 32 MiB
// segments), a warm-up run, then `runs` timed runs of `perRun` calls each, cycling through
// the 1,024 fragments the Rust bench uses (seed 4, task `session-0`); each run's time is
// divided by `perRun`.
//
// Rust: the criterion bench's executable, built once by `cargo bench --no-run` and then run
// directly (no cargo in the timing loop, and no wait on the build directory's lock while
// other cargo commands run), with `CRITERION_HOME` in the scratch directory; the figure of a
// round is the median of its 20 samples' per-iteration times (criterion's `estimates.json`).

import { execFileSync, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { Store } from "factlog";
import { DELTA_TEXT_BYTES, Text } from "./workload.mjs";

const FRAGMENTS = 1024;
const TASK_ID = "session-0";
const FRAGMENT_SEED = 4;

function fragments() {
  const text = new Text(FRAGMENT_SEED);
  return Array.from({ length: FRAGMENTS }, () => text.words(DELTA_TEXT_BYTES));
}

/** One round of Node runs: `runs` figures in ns per delta. */
export async function nodeDeltaRound(dir, runs, perRun) {
  const texts = fragments();
  const mask = FRAGMENTS - 1;
  const store = await Store.open(path.join(dir, "store"));
  const task = store.task(TASK_ID);
  // The task's takeover happens at its first call; then a warm-up run for the JIT.
  let sink = 0;
  for (let i = 0; i < perRun; i++) sink += task.delta(texts[i & mask]);
  const figures = [];
  for (let run = 0; run < runs; run++) {
    globalThis.gc?.();
    const start = process.hrtime.bigint();
    for (let i = 0; i < perRun; i++) sink += task.delta(texts[i & mask]);
    const end = process.hrtime.bigint();
    figures.push(Number(end - start) / perRun);
  }
  await store.close();
  if (sink === 0) throw new Error("no delta was appended");
  return figures;
}

/** The same round through the addon's hot path called directly, the task's delta function
 * (`nativeTask.deltaFunction()`, node/src/hot.rs): the difference to the package's
 * `Task.delta` is what its wrapper adds (the error mapping and the seq's null), the difference
 * to Rust what crossing Node-API adds. */
export async function nativeDeltaRound(dir, runs, perRun) {
  const native = createRequire(import.meta.url)("../factlog.node");
  const texts = fragments();
  const mask = FRAGMENTS - 1;
  const store = await native.NativeStore.open(path.join(dir, "native-store"), {});
  const delta = store.task(TASK_ID).deltaFunction();
  let sink = 0;
  for (let i = 0; i < perRun; i++) sink += delta(texts[i & mask]);
  const figures = [];
  for (let run = 0; run < runs; run++) {
    globalThis.gc?.();
    const start = process.hrtime.bigint();
    for (let i = 0; i < perRun; i++) sink += delta(texts[i & mask]);
    const end = process.hrtime.bigint();
    figures.push(Number(end - start) / perRun);
  }
  await store.close();
  if (sink === 0) throw new Error("no delta was appended");
  return figures;
}

/** Builds the criterion bench once; returns its executable, or an error message. */
export function buildRustBench(repo) {
  const build = spawnSync(
    "cargo",
    ["bench", "-p", "factlog-bench", "--bench", "harness", "--no-run", "--message-format=json"],
    { cwd: repo, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
  );
  if (build.status !== 0) {
    return { error: `cargo bench --no-run failed: ${build.stderr.split("\n").slice(-5).join(" ")}` };
  }
  for (const line of build.stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line);
    if (message.reason === "compiler-artifact" && message.target?.name === "harness" && message.executable) {
      return { executable: message.executable };
    }
  }
  return { error: "cargo bench --no-run named no harness executable" };
}

/** One criterion measurement of `typed_delta_24b`: the median ns per delta of its samples. */
export function rustDeltaRound(executable, benchDir, scratch) {
  const home = path.join(scratch, "criterion");
  execFileSync(executable, ["--bench", "typed_delta_24b", "--noplot"], {
    cwd: benchDir,
    env: { ...process.env, CRITERION_HOME: home },
    stdio: ["ignore", "ignore", "ignore"],
  });
  const estimates = JSON.parse(
    fs.readFileSync(path.join(home, "harness_delta", "typed_delta_24b", "new", "estimates.json"), "utf8"),
  );
  return estimates.median.point_estimate;
}
