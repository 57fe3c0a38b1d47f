/**
 * The package's API on a store open in the test's process: appends and their replies, the
 * hot path, reads, tails, recovery, request keys, the durability tiers and the typed errors.
 */

import { spawn } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, test } from "vitest";
import {
  Closed,
  ERROR_CODES,
  FactlogError,
  InvalidEvent,
  InvalidOptions,
  LimitExceeded,
  Locked,
  NotReplicated,
  PROTOCOL_VERSION,
  StaleRevision,
  Store,
  errorClass,
  requestKey,
  type StoredEvent,
} from "factlog";
import { factlog, tempDir } from "./helpers.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A new store, closed and removed after the test. */
async function openStore(options = {}): Promise<{ store: Store; dir: string }> {
  const { dir, cleanup } = tempDir();
  cleanups.push(cleanup);
  const store = await Store.open(dir, options);
  cleanups.push(() => store.close());
  return { store, dir };
}

describe("appending", () => {
  test("an append resolves with the protocol's reply once its durability holds", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    expect(await task.append({ type: "turn/start" })).toEqual({
      seq: 1,
      task: "t1",
      revision: 1,
      durability: "buffered",
    });
    const call = { type: "tool/call", call_id: "c1", tool: "send_mail", effect: "unsafe" };
    // A high-risk type's floor is synced: asking for less is refused, nothing written.
    await expect(task.append(call, { durability: "flushed" })).rejects.toBeInstanceOf(InvalidEvent);
    const reply = await task.append(call);
    expect(reply).toMatchObject({ seq: 2, revision: 2, durability: "synced" });
    expect(await task.revision()).toBe(2);
  });

  test("deltas are synchronous, return their seq and merge into the history", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    expect(task.delta("Hello, ")).toBe(2);
    expect(task.delta("wörld ✓")).toBe(3);
    // A fragment longer than the package's reusable buffer.
    const long = "ж".repeat(5000);
    expect(task.delta(long)).toBe(4);
    await task.append({ type: "turn/end" });
    const events: StoredEvent[] = [];
    for await (const event of task.events()) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "turn/start",
      "assistant/delta",
      "assistant/delta",
      "assistant/delta",
      "turn/end",
    ]);
    expect(events[2].text).toBe("wörld ✓");
    expect(events[3].text).toBe(long);
    const history = await task.history();
    expect(JSON.stringify(history)).toContain("Hello, wörld ✓");
  });

  test("a delta's text arrives whole at every length and in every UTF-8 width", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    const texts: string[] = [""];
    // Around the addon's reusable buffer (4096 bytes) and up to the library's bound on a
    // delta's text (64 KiB), in 1- to 4-byte characters.
    for (const char of ["x", "ж", "€", "😀"]) {
      const width = Buffer.byteLength(char);
      for (let bytes = 4080; bytes <= 4100; bytes += 1) {
        if (bytes % width === 0) texts.push(char.repeat(bytes / width));
      }
      texts.push(char.repeat(Math.ceil(9000 / width)));
    }
    texts.push("y".repeat(65_536), "mixed ж€😀 text");
    for (const text of texts) task.delta(text);
    const stored: string[] = [];
    for await (const event of task.events()) stored.push(event.text as string);
    expect(stored.length).toBe(texts.length);
    stored.forEach((text, i) => expect(text === texts[i], `text ${i}`).toBe(true));
    // Past the bound (and past the most the addon's buffer grows to): refused, not written.
    expect(() => task.delta("z".repeat(65_537))).toThrow(LimitExceeded);
    expect(() => task.delta("z".repeat(1_000_000))).toThrow(LimitExceeded);
    expect(await task.revision()).toBe(texts.length);
  });

  test("a delta refuses what is not text", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    expect(() => task.delta(42 as never)).toThrow(InvalidOptions);
    expect(await task.revision()).toBe(0);
  });

  test("a batch is one atomic append", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    const reply = await task.appendBatch(
      [{ type: "turn/start" }, { type: "user/message", text: "hi" }, { type: "turn/end" }],
      { durability: "synced" },
    );
    expect(reply).toMatchObject({ seq: 1, revision: 3, count: 3, durability: "synced" });
    // One bad member refuses the whole batch: nothing of it is written.
    await expect(
      task.appendBatch([{ type: "turn/start" }, { type: "no/such" }]),
    ).rejects.toBeInstanceOf(InvalidEvent);
    expect(await task.revision()).toBe(3);
  });

  test("a stale revision is refused with both revisions and nothing is written", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    const refused = await task
      .append({ type: "user/message", text: "hi" }, { expectedRevision: 0 })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StaleRevision);
    expect(refused).toBeInstanceOf(FactlogError);
    const stale = refused as StaleRevision;
    expect([stale.code, stale.expected, stale.actual, stale.endsStream]).toEqual([
      "STALE_REVISION",
      0,
      1,
      false,
    ]);
    expect(stale.message).toMatch(/re-read the task/);
    expect(await task.revision()).toBe(1);
    await task.append({ type: "user/message", text: "hi" }, { expectedRevision: 1 });
  });

  test("a repeated call with a result comes back as a duplicate with its receipt", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    const key = requestKey("t1", "publish:draft-7", await task.revision());
    expect(key).toMatch(/^rk1_[0-9a-f]{32}$/);
    const call = {
      type: "tool/call",
      call_id: "c1",
      tool: "publish",
      effect: "idempotent",
      request_key: key,
    };
    await task.append(call);
    await task.append({ type: "tool/result", call_id: "c1", outcome: "ok", receipt: { id: 7 } });
    const again = await task.append(call);
    expect(again).toMatchObject({ duplicate: true, call_id: "c1", receipt: { id: 7 } });
    expect(await task.revision()).toBe(3);
  });

  test("bad input is refused with a typed error that says what to do", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    const unknown = await task.append({ type: "no/such" }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(InvalidEvent);
    expect((unknown as InvalidEvent).message).toMatch(/unknown event type/);
    // A `task` in the event that is not the handle's is refused, never silently replaced.
    await expect(task.append({ type: "turn/start", task: "other" })).rejects.toBeInstanceOf(
      InvalidEvent,
    );
    await expect(
      task.append({ type: "turn/start" }, { durability: "eventually" as never }),
    ).rejects.toBeInstanceOf(InvalidEvent);
    await expect(
      task.append({ type: "turn/start" }, { expectedRevision: -1 }),
    ).rejects.toBeInstanceOf(InvalidOptions);
    await expect(store.flush("sometimes" as never)).rejects.toBeInstanceOf(InvalidOptions);
    // A number that is not a whole count is refused, never rounded into another revision.
    for (const expectedRevision of [1.5, Number.NaN, -1, 2 ** 60]) {
      await expect(
        task.append({ type: "turn/start" }, { expectedRevision }),
      ).rejects.toBeInstanceOf(InvalidOptions);
    }
    await expect(
      task.appendBatch([{ type: "turn/start" }], { expectedRevision: 0.5 }),
    ).rejects.toBeInstanceOf(InvalidOptions);
    expect(() => requestKey("t1", "op", 1.5)).toThrow(InvalidOptions);
    await expect(store.tail({ waitMs: -1 }).next()).rejects.toBeInstanceOf(InvalidOptions);
    await expect(store.events({ fromSeq: 0.5 }).next()).rejects.toBeInstanceOf(InvalidOptions);
    expect(await task.revision()).toBe(0);
  });

  test("every protocol code has its class, and an unknown code falls back to the base", () => {
    expect(PROTOCOL_VERSION).toBe(1);
    for (const code of ERROR_CODES) {
      const cls = errorClass(code);
      expect(code === "ERROR" ? cls === FactlogError : cls.code === code).toBe(true);
    }
    expect(errorClass("SOMETHING_NEW")).toBe(FactlogError);
  });
});

describe("reading", () => {
  test("events, state and task ids read what was appended, in the CLI's shapes", async () => {
    const { store, dir } = await openStore();
    await store.task("b").append({ type: "turn/start" });
    await store.task("a").append({ type: "user/message", text: "hi" });
    await store.flush();
    expect(await store.taskIds()).toEqual(["a", "b"]);
    const all: StoredEvent[] = [];
    for await (const event of store.events()) all.push(event);
    expect(all.map((e) => [e.seq, e.task, e.type])).toEqual([
      [1, "b", "turn/start"],
      [2, "a", "user/message"],
    ]);
    expect(typeof all[0].time).toBe("string");
    const onlyA: StoredEvent[] = [];
    for await (const event of store.events({ task: "a" })) onlyA.push(event);
    expect(onlyA.map((e) => e.seq)).toEqual([2]);
    const state = await store.task("a").state();
    expect(state.revision).toBe(1);
    // The CLI reads the same state from the same directory (read-only, beside the writer).
    const cli = JSON.parse(factlog("state", dir, "--task", "a", "--json"));
    expect(cli.tasks.a.revision).toBe(1);
  });

  test("events stop at the last event the store held when the iteration began", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    for (let i = 0; i < 1500; i += 1) task.delta(`fragment ${i} `);
    const seen: number[] = [];
    for await (const event of store.events()) {
      seen.push(event.seq);
      if (seen.length === 1) task.delta("appended while reading");
    }
    expect(seen.length).toBe(1500);
    expect(seen[1499]).toBe(1500);
  });

  test("a tail yields the events there are, then each one as it is appended", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    const tailed: string[] = [];
    const tail = store.tail({ fromSeq: 1 });
    for await (const event of tail) {
      tailed.push(`${event.seq}:${event.type}`);
      // Appended only once the tail has read the event before it: the tail must wait.
      if (event.seq === 1) setImmediate(() => task.delta("live"));
      if (event.seq === 2) break;
    }
    expect(tailed).toEqual(["1:turn/start", "2:assistant/delta"]);
  });

  test("closing the store ends a waiting tail", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const store = await Store.open(dir);
    const tail = store.tail({ task: "quiet" });
    const next = tail.next();
    await store.close();
    expect(await next).toEqual({ done: true, value: undefined });
  });
});

describe("holders and recovery", () => {
  test("reopening recovers an unfinished unsafe call as an unknown outcome", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const first = await Store.open(dir);
    const task = first.task("t1");
    await task.append({ type: "turn/start" });
    await task.append({ type: "tool/call", call_id: "c1", tool: "send_mail", effect: "unsafe" });
    await first.close();
    await expect(task.append({ type: "turn/end" })).rejects.toBeInstanceOf(Closed);

    const second = await Store.open(dir);
    cleanups.push(() => second.close());
    expect(second.openReport).toMatchObject({ tasks: 1, last_seq: 2, tail_cut: null });
    const report = await second.recover();
    expect(report.tasks[0]).toMatchObject({
      task: "t1",
      calls: [{ call_id: "c1", tool: "send_mail", outcome: "outcome_unknown", plan: "ask_user" }],
    });
    // The CLI reads the same facts.
    const dump = factlog("dump", dir, "--json").trim().split("\n").map((l) => JSON.parse(l));
    expect(dump.map((e: StoredEvent) => e.type)).toContain("tool/outcome_unknown");
  });

  test("a store held by another process that does not share it is Locked, saying how to share it", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const index = pathToFileURL(join(__dirname, "..", "dist", "index.js")).href;
    const script =
      `const { Store } = await import(${JSON.stringify(index)});` +
      `const s = await Store.open(${JSON.stringify(dir)}); console.log("ready");` +
      `process.stdin.resume(); process.stdin.on("end", async () => { await s.close(); process.exit(0); });`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    await new Promise<void>((ready) =>
      child.stdout.on("data", (d: Buffer) => d.toString().includes("ready") && ready()),
    );
    const exited = new Promise((done) => child.on("exit", done));
    cleanups.push(async () => {
      child.stdin.end();
      await exited;
    });
    const refused = await Store.open(dir).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(Locked);
    expect((refused as Locked).message).toMatch(/share it/);
    expect((refused as Locked).message).toContain(String(child.pid));
  });

  test("options that need another are refused before anything is opened", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    await expect(Store.open(dir, { clientsMax: 4 })).rejects.toBeInstanceOf(InvalidOptions);
    await expect(Store.open(dir, { timeoutMs: 0 })).rejects.toBeInstanceOf(InvalidOptions);
    await expect(Store.open(dir, { share: true, clientsMax: 2.5 })).rejects.toBeInstanceOf(
      InvalidOptions,
    );
    await expect(Store.open(dir, { snapshotEveryEvents: -1 })).rejects.toBeInstanceOf(
      InvalidOptions,
    );
  });
});

describe("the replicated tier", () => {
  test("a replicated append resolves once its event is in the replica", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const replica = `${dir}-replica`;
    const store = await Store.open(dir, { replicateTo: pathToFileURL(replica).href });
    expect(store.replicating).toBe(true);
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    const reply = await task.append(
      { type: "tool/call", call_id: "c1", tool: "send_mail", effect: "unsafe" },
      { durability: "replicated" },
    );
    expect(reply).toMatchObject({ seq: 2, durability: "replicated" });
    await store.close();
    const verified = JSON.parse(factlog("replicas", "verify", pathToFileURL(replica).href, "--json"));
    expect(verified).toMatchObject({ ok: true, first_seq: 1, through_seq: 2 });
  });

  test("a replicated append on a store that does not replicate is refused, nothing written", async () => {
    const { store } = await openStore();
    const task = store.task("t1");
    const refused = await task
      .append({ type: "turn/start" }, { durability: "replicated" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NotReplicated);
    expect(await task.revision()).toBe(0);
  });
});

describe("off the event loop", () => {
  test("concurrent synced appends of many tasks all resolve, each with its own revision", async () => {
    const { store, dir } = await openStore();
    const tasks = Array.from({ length: 32 }, (_, i) => store.task(`session-${i}`));
    // Every append waits on the libuv pool, and the group commit serves them together.
    const replies = await Promise.all(
      tasks.flatMap((task) =>
        [1, 2, 3].map((n) =>
          task.append(
            { type: "tool/call", call_id: `c${n}`, tool: "charge", effect: "unsafe" },
            { durability: "synced" },
          ),
        ),
      ),
    );
    expect(replies).toHaveLength(96);
    expect(new Set(replies.map((r) => r.seq)).size).toBe(96);
    for (const task of tasks) expect(await task.revision()).toBe(3);
    await store.close();
    expect(factlog("dump", dir, "--json").trim().split("\n")).toHaveLength(96);
  });
});

describe("a program that ends without closing its store", () => {
  for (const ending of ["the event loop runs out of work", "process.exit()"]) {
    test(`loses nothing it buffered when ${ending}`, async () => {
      const { dir, cleanup } = tempDir();
      cleanups.push(cleanup);
      const index = pathToFileURL(join(__dirname, "..", "dist", "index.js")).href;
      const exit = ending === "process.exit()" ? "process.exit(0);" : "";
      const script =
        `const { Store } = await import(${JSON.stringify(index)});` +
        `const s = await Store.open(${JSON.stringify(dir)});` +
        `const t = s.task("t1"); await t.append({ type: "turn/start" });` +
        `for (let i = 0; i < 500; i += 1) t.delta("token " + i);` +
        exit;
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
        stdio: "inherit",
      });
      expect(await new Promise((done) => child.on("exit", done))).toBe(0);
      const store = await Store.open(dir);
      cleanups.push(() => store.close());
      // Closed cleanly, with every delta (the takeover's own events come after them).
      expect(store.openReport).toMatchObject({ mark: { clean: true }, last_seq: 501 });
    });
  }
});
