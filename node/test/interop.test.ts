/**
 * One store, three doors: a store written from Node is read by the `factlog` command and the
 * Python package with the same facts, and the reverse. Every door reads through the same
 * library, so the events, states and recovery reports must be equal, field for field.
 *
 * The Python package comes from `FACTLOG_PYTHON` (a Python with `pip install ./python` done;
 * `.ci/node-tests` makes one). Without it the Python cases are skipped, unless
 * `FACTLOG_PYTHON_REQUIRED=1` (as in CI), where a missing Python fails them.
 */

import { spawnSync } from "node:child_process";
import { cpSync } from "node:fs";
import { afterEach, describe, expect, test } from "vitest";
import { Store, type StoredEvent } from "factlog";
import { factlog, factlogCommand, tempDir } from "./helpers.js";

const python = process.env.FACTLOG_PYTHON;
const pythonRequired = process.env.FACTLOG_PYTHON_REQUIRED === "1";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function newDir(): string {
  const { dir, cleanup } = tempDir();
  cleanups.push(cleanup);
  return dir;
}

/** Runs `script` in the Python of `FACTLOG_PYTHON` with `args`; its stdout parsed as JSON. */
function runPython(script: string, ...args: string[]): unknown {
  if (!python) throw new Error("FACTLOG_PYTHON is not set: it names a Python with factlog installed");
  const run = spawnSync(python, ["-c", script, ...args], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`python exited ${run.status}: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

const pythonEvents = `
import json, sys, factlog
with factlog.Store(sys.argv[1]) as store:
    print(json.dumps(list(store.events())))
`;

const pythonRecover = `
import json, sys, factlog
with factlog.Store(sys.argv[1]) as store:
    print(json.dumps(store.recover()))
`;

const pythonWrite = `
import json, sys, factlog
with factlog.Store(sys.argv[1]) as store:
    task = store.task("py-1")
    task.append({"type": "turn/start"})
    task.delta("from ")
    task.delta("Python")
    task.append({"type": "tool/call", "call_id": "c1", "tool": "charge", "effect": "unsafe",
                 "args": {"amount": 5}})
print(json.dumps(True))
`;

/** The events of the store in `dir` as the command dumps them. */
function dumped(dir: string): StoredEvent[] {
  return factlog("dump", dir, "--json")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as StoredEvent);
}

/** The events of the store in `dir` as the Node package reads them. */
async function nodeEvents(dir: string): Promise<StoredEvent[]> {
  const store = await Store.open(dir);
  try {
    const events: StoredEvent[] = [];
    for await (const event of store.events()) events.push(event);
    return events;
  } finally {
    await store.close();
  }
}

/** Writes a small task from Node: a turn, streamed text, a call with its result, and an
 * unsafe call whose result never came. */
async function writeFromNode(dir: string): Promise<void> {
  const store = await Store.open(dir);
  const task = store.task("node-1");
  await task.append({ type: "turn/start" });
  task.delta("Sending ");
  task.delta("the mail ✉");
  await task.append({
    type: "tool/call",
    call_id: "c1",
    tool: "lookup",
    effect: "read_only",
    args: { q: "x" },
  });
  await task.append({ type: "tool/result", call_id: "c1", outcome: "ok", receipt: { hits: 1 } });
  await task.append({ type: "tool/call", call_id: "c2", tool: "send_mail", effect: "unsafe" });
  await store.close();
}

describe("a store written from Node", () => {
  test("is read by `factlog dump --json` and `factlog recover` with the same facts", async () => {
    const dir = newDir();
    await writeFromNode(dir);
    const events = await nodeEvents(dir);
    expect(events.map((e) => e.type)).toEqual([
      "turn/start",
      "assistant/delta",
      "assistant/delta",
      "tool/call",
      "tool/result",
      "tool/call",
    ]);
    expect(dumped(dir)).toEqual(events);

    // Recovery decided by the command and by the package, each on a copy of the store.
    const forCli = `${dir}-cli`;
    const forNode = `${dir}-node`;
    cpSync(dir, forCli, { recursive: true });
    cpSync(dir, forNode, { recursive: true });
    cleanups.push(() => {
      spawnSync("rm", ["-rf", forCli, forNode]);
    });
    const cli = JSON.parse(factlog("recover", forCli, "--json"));
    const store = await Store.open(forNode);
    const node = await store.recover();
    await store.close();
    expect(node).toEqual(cli);
    expect(node.tasks[0]).toMatchObject({
      task: "node-1",
      calls: [
        { call_id: "c1", outcome: "completed", plan: "reuse_receipt", receipt: { hits: 1 } },
        { call_id: "c2", tool: "send_mail", outcome: "outcome_unknown", plan: "ask_user" },
      ],
    });
    // And the facts recovery wrote are the same for both.
    const strip = (events: StoredEvent[]) =>
      events.map(({ timestamp_us: _us, time: _time, ...rest }) => rest);
    expect(strip(dumped(forNode))).toEqual(strip(dumped(forCli)));
  });

  test.skipIf(!python && !pythonRequired)(
    "is read by the Python package with the same events and recovery",
    async () => {
      const dir = newDir();
      await writeFromNode(dir);
      expect(runPython(pythonEvents, dir)).toEqual(await nodeEvents(dir));
      const forNode = `${dir}-node`;
      cpSync(dir, forNode, { recursive: true });
      cleanups.push(() => {
        spawnSync("rm", ["-rf", forNode]);
      });
      const fromPython = runPython(pythonRecover, dir);
      const store = await Store.open(forNode);
      const fromNode = await store.recover();
      await store.close();
      expect(fromNode).toEqual(fromPython);
    },
  );
});

describe("a store written by another door", () => {
  test("written by `factlog emit` is read from Node with the same facts", async () => {
    const dir = newDir();
    const lines = [
      { task: "cli-1", type: "turn/start" },
      { task: "cli-1", type: "user/message", text: "hi from the command" },
      { task: "cli-1", type: "tool/call", call_id: "c1", tool: "pay", effect: "unsafe" },
    ]
      .map((line) => JSON.stringify(line))
      .join("\n");
    const emitted = spawnSync(factlogCommandPath(), ["emit", dir], {
      input: `${lines}\n`,
      encoding: "utf8",
    });
    expect(emitted.status).toBe(0);
    const events = await nodeEvents(dir);
    expect(events).toEqual(dumped(dir));
    // Recovery from Node decides what the command's `recover` would.
    const store = await Store.open(dir);
    const report = await store.recover();
    await store.close();
    expect(report.tasks[0]).toMatchObject({
      task: "cli-1",
      calls: [{ call_id: "c1", tool: "pay", outcome: "outcome_unknown" }],
    });
  });

  test.skipIf(!python && !pythonRequired)(
    "written by the Python package is read from Node with the same facts",
    async () => {
      const dir = newDir();
      runPython(pythonWrite, dir);
      const events = await nodeEvents(dir);
      expect(events.map((e) => e.type)).toEqual([
        "turn/start",
        "assistant/delta",
        "assistant/delta",
        "tool/call",
      ]);
      expect(events).toEqual(dumped(dir));
      expect(events).toEqual(runPython(pythonEvents, dir));
      const store = await Store.open(dir);
      const state = await store.task("py-1").state();
      await store.close();
      const cli = JSON.parse(factlog("state", dir, "--task", "py-1", "--json"));
      expect(state).toEqual(cli.tasks["py-1"]);
    },
  );
});

function factlogCommandPath(): string {
  return factlogCommand();
}
