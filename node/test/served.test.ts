import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, test } from "vitest";
import {
  Disconnected,
  InvalidOptions,
  LimitExceeded,
  Locked,
  NotServed,
  StaleRevision,
  Store,
  type StoredEvent,
} from "factlog";
import { factlog, servedStore, tempDir } from "./helpers.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A new store directory held and shared by another process; both go after the test. */
async function servedDir(): Promise<{ dir: string; held: { pid: number } }> {
  const { dir, cleanup } = tempDir();
  cleanups.push(cleanup);
  const held = await servedStore(dir);
  cleanups.push(held.stop);
  return { dir, held };
}

describe("a store another process serves", () => {
  test("Store.open connects to it and appends through its socket", async () => {
    const { dir, held } = await servedDir();
    const store = await Store.open(dir);
    expect(store.servedBy).toBe(held.pid);
    expect(store.openReport).toBeNull();
    const task = store.task("t1");
    const reply = await task.append({ type: "turn/start" }, { durability: "synced" });
    expect(reply).toMatchObject({ seq: 1, task: "t1", revision: 1, durability: "synced" });
    expect(task.delta("pipelined")).toBeNull();
    // The socket's sync request: the fragment is sent first, then everything is synced.
    await store.flush();
    expect(await task.revision()).toBe(2);
    await store.close();
  });

  test("connect refuses a store nobody serves, and share refuses one already served", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    await expect(Store.connect(dir)).rejects.toBeInstanceOf(NotServed);
    const held = await servedStore(dir);
    cleanups.push(held.stop);
    await expect(Store.open(dir, { share: true })).rejects.toBeInstanceOf(Locked);
  });

  test("refusals through the socket are the same classes with the same fields", async () => {
    const { dir } = await servedDir();
    const store = await Store.open(dir);
    cleanups.push(() => store.close());
    const task = store.task("t1");
    await task.append({ type: "turn/start" });
    const stale = await task
      .append({ type: "turn/end" }, { expectedRevision: 0 })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(StaleRevision);
    expect([(stale as StaleRevision).expected, (stale as StaleRevision).actual]).toEqual([0, 1]);
    expect((stale as StaleRevision).message).toContain('"t1"');
  });

  test("a client that gives an option of the holder is refused before connecting", async () => {
    const { dir } = await servedDir();
    const refused = await Store.open(dir, { snapshotAtTurnEnd: true }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidOptions);
    expect((refused as InvalidOptions).message).toMatch(/option of the process that holds/);
  });

  test("a tail through a served store sees other clients' appends as they come", async () => {
    const { dir } = await servedDir();
    const reader = await Store.open(dir);
    const writer = await Store.open(dir);
    cleanups.push(() => writer.close());
    cleanups.push(() => reader.close());
    const task = writer.task("live");
    await task.append({ type: "turn/start" });
    const seen: StoredEvent[] = [];
    for await (const event of reader.tail({ task: "live", waitMs: 200 })) {
      seen.push(event);
      if (seen.length === 1) {
        await task.append({ type: "user/message", text: "after the tail began" });
      }
      if (seen.length === 2) break;
    }
    expect(seen.map((e) => [e.seq, e.type])).toEqual([
      [1, "turn/start"],
      [2, "user/message"],
    ]);
  });

  test("a server that goes away is Disconnected at the next call", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const held = await servedStore(dir);
    const store = await Store.open(dir);
    const task = store.task("t1");
    await task.append({ type: "turn/start" }, { durability: "synced" });
    await held.stop();
    await expect(task.append({ type: "turn/end" })).rejects.toBeInstanceOf(Disconnected);
    await store.close().catch(() => undefined);
    // What was acknowledged before is in the store.
    const reopened = await Store.open(dir);
    cleanups.push(() => reopened.close());
    const events: StoredEvent[] = [];
    for await (const event of reopened.events({ task: "t1" })) events.push(event);
    expect(events[0]).toMatchObject({ seq: 1, type: "turn/start" });
  });

  test("a client asks for the replicated tier of a holder that replicates", async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const replica = pathToFileURL(`${dir}-replica`).href;
    const held = await servedStore(dir, { replicateTo: replica });
    cleanups.push(held.stop);
    const store = await Store.open(dir);
    cleanups.push(() => store.close());
    const reply = await store
      .task("t1")
      .append(
        { type: "tool/call", call_id: "c1", tool: "pay", effect: "unsafe" },
        { durability: "replicated" },
      );
    expect(reply).toMatchObject({ seq: 1, durability: "replicated" });
    const verified = JSON.parse(factlog("replicas", "verify", replica, "--json"));
    expect(verified).toMatchObject({ ok: true, through_seq: 1 });
  });

  test("deltas made while the connection waits for replies all arrive, in order", async () => {
    const { dir } = await servedDir();
    const store = await Store.open(dir);
    const task = store.task("stream");
    await task.append({ type: "turn/start" });
    // Synced appends of other tasks hold the connection on the pool while the deltas are
    // made on this thread: those are queued and sent before the next call.
    const appends: Array<Promise<unknown>> = [];
    for (let i = 0; i < 300; i += 1) {
      if (i % 10 === 0) {
        const call = { type: "tool/call", call_id: `c${i}`, tool: "pay", effect: "unsafe" };
        appends.push(store.task(`other-${i}`).append(call));
      }
      expect(task.delta(`d${i} `)).toBeNull();
    }
    await Promise.all(appends);
    expect(await task.revision()).toBe(301);
    await store.close();
    const reader = await Store.open(dir);
    cleanups.push(() => reader.close());
    const texts: string[] = [];
    for await (const event of reader.events({ task: "stream" })) {
      if (event.type === "assistant/delta") texts.push(event.text as string);
    }
    expect(texts).toEqual(Array.from({ length: 300 }, (_, i) => `d${i} `));
  });

  test("a delta the store would refuse is refused at once, even while the connection is busy", async () => {
    const { dir } = await servedDir();
    const store = await Store.open(dir);
    cleanups.push(() => store.close());
    const busy = store
      .task("other")
      .append({ type: "tool/call", call_id: "c1", tool: "pay", effect: "unsafe" });
    expect(() => store.task("t1").delta("x".repeat(70_000))).toThrow(LimitExceeded);
    await busy;
  });
});
