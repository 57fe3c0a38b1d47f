// Helpers of the console's browser tests: the real `factlog` binary (target/debug/factlog, under
// CARGO_TARGET_DIR when set, or FACTLOG_BIN), stores built with `factlog emit` and `factlog recover`, a `factlog ui` process
// and its URL, and the system's Chromium (/usr/bin/chromium, or FACTLOG_CHROMIUM) launched
// headless with a fresh profile. Nothing here downloads a browser.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const FACTLOG =
  process.env.FACTLOG_BIN || join(process.env.CARGO_TARGET_DIR || join(ROOT, "target"), "debug", "factlog");
export const CHROMIUM = process.env.FACTLOG_CHROMIUM || "/usr/bin/chromium";

// Screenshots go to docs/ only when asked (they are committed); else to a scratch directory.
export const WRITE_DOCS = process.env.FACTLOG_WRITE_SCREENSHOTS === "1";
export const SHOTS = WRITE_DOCS ? join(ROOT, "docs") : join(tmpdir(), "factlog-console-screenshots");

if (!existsSync(FACTLOG)) {
  throw new Error(`${FACTLOG} is missing: build it first with \`cargo build -p factlog-cli\``);
}
if (!existsSync(CHROMIUM)) {
  throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
}

// Scratch directories, removed by `removeScratch()` when the tests end.
const scratches = [];
export function scratch(prefix) {
  const dir = mkdtempSync(join(tmpdir(), `factlog-console-${prefix}-`));
  scratches.push(dir);
  return dir;
}
export function removeScratch() {
  for (const dir of scratches.splice(0)) rmSync(dir, { recursive: true, force: true });
}

// Runs `factlog ARGS` with `input` on standard input; its standard output, or a thrown error.
export function factlog(args, input) {
  const run = spawnSync(FACTLOG, args, { input: input ?? "", encoding: "utf8", maxBuffer: 1 << 30 });
  if (run.status !== 0) {
    throw new Error(`factlog ${args.join(" ")} exited ${run.status}: ${run.stderr}`);
  }
  return run.stdout;
}

// Appends `events` (objects of format-spec/protocol.md) with `factlog emit DIR`; the replies.
export function emit(dir, events) {
  const input = events.map((event) => JSON.stringify(event)).join("\n") + "\n";
  return factlog(["emit", dir], input).trim().split("\n").map((line) => JSON.parse(line));
}

// A store whose task `t2` has a crashed unsafe call (a `tool/call` with effect unsafe and no
// result) that `factlog recover` marked outcome_unknown, and a task `t1` with a conversation
// that waits for nobody.
export function crashedStore() {
  const dir = join(scratch("store"), "store");
  emit(dir, [
    { task: "t1", type: "task/contract", goal: "answer the user", risk: "low" },
    { task: "t1", type: "task/phase", phase: "chatting" },
    { task: "t1", type: "turn/start" },
    { task: "t1", type: "user/message", text: "What is the weather?" },
    { task: "t1", type: "step/start" },
    { task: "t1", type: "assistant/delta", text: "Let me " },
    { task: "t1", type: "assistant/delta", text: "check." },
    { task: "t1", type: "assistant/message", text: "Let me check." },
    { task: "t1", type: "tool/call", call_id: "w1", tool: "weather", effect: "read_only" },
    { task: "t1", type: "tool/result", call_id: "w1", outcome: "ok", output: { sky: "clear" } },
    { task: "t1", type: "step/end", status: "ok" },
    { task: "t2", type: "task/contract", goal: "pay the invoice", risk: "low" },
    { task: "t2", type: "task/phase", phase: "paying" },
    { task: "t2", type: "turn/start" },
    { task: "t2", type: "tool/call", call_id: "p1", tool: "wire_transfer", effect: "unsafe" },
  ]);
  factlog(["recover", dir]);
  return dir;
}

// Starts `factlog ui DIR EXTRA..`; resolves to {url, token, origin, stop()} once it printed
// its URL.
export function startUi(dir, extra = []) {
  const child = spawn(FACTLOG, ["ui", dir, ...extra], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "", stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  return new Promise((resolvePromise, reject) => {
    child.on("exit", (code) => reject(new Error(`factlog ui exited ${code}: ${stderr}`)));
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      const line = stdout.split("\n").find((text) => text.startsWith("http://"));
      if (!line) return;
      const url = new URL(line.trim());
      resolvePromise({
        url: url.href, token: url.searchParams.get("token"), origin: url.origin, stdout,
        stop: () => new Promise((done) => {
          if (child.exitCode !== null) { done(child.exitCode); return; }
          child.removeAllListeners("exit");
          child.on("exit", (code) => done(code));
          child.kill("SIGTERM");
        }),
      });
    });
  });
}

// Runs `factlog serve DIR` until `stop()`; `ready` resolves once its socket exists.
export function serveStore(dir) {
  const child = spawn(FACTLOG, ["serve", dir], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const ready = new Promise((resolvePromise, reject) => {
    child.on("exit", (code) => reject(new Error(`factlog serve exited ${code}: ${stderr}`)));
    const look = () => (existsSync(join(dir, "factlog.sock")) ? resolvePromise() : setTimeout(look, 20));
    look();
  });
  return { ready, stop: stopper(child, () => child.kill("SIGTERM")) };
}

// A `stop()` for `child`: `end()` asks it to end (a signal, its input closed), and the promise
// resolves with its exit code (at once if it already ended).
function stopper(child, end) {
  return () => new Promise((done) => {
    if (child.exitCode !== null) { done(child.exitCode); return; }
    child.removeAllListeners("exit");
    child.on("exit", (code) => done(code));
    end();
  });
}

// A harness that holds `task` of a served store: a `factlog emit DIR` process, connected
// through the store's socket, whose first line touches the task (taking it over); it holds the
// task until `stop()` closes its input.
export function harnessHolding(dir, task) {
  const child = spawn(FACTLOG, ["emit", dir], { stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk) => { stderr += chunk; });
  const ready = new Promise((resolvePromise, reject) => {
    child.on("exit", (code) => reject(new Error(`factlog emit exited ${code}: ${stderr}`)));
    child.stdout.once("data", () => resolvePromise());
  });
  child.stdin.write(`${JSON.stringify({ task, type: "user/message", text: "the harness is back" })}\n`);
  return { ready, stop: stopper(child, () => child.stdin.end()) };
}

// The system's Chromium, headless, with a fresh profile removed by `close()`.
export async function launchBrowser() {
  const profile = mkdtempSync(join(tmpdir(), "factlog-console-profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => { await context.close(); rmSync(profile, { recursive: true, force: true }); },
  };
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export function shot(name) {
  mkdirSync(SHOTS, { recursive: true });
  return join(SHOTS, `console-${name}.png`);
}
