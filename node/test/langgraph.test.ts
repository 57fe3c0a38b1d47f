/**
 * `FactlogSaver` beyond LangGraph's conformance suite: the storage mapping as the `factlog`
 * command reads it (`dump --json`, `state --json`), values kept as structure and the cases
 * that fall back to base64, reopening, a served store shared by two savers, the durability
 * mapping, the bounded indexes and cache, and the refusals.
 */

import { afterEach, describe, expect, test, vi } from "vitest";
import {
  emptyCheckpoint,
  uuid6,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
} from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { CorruptEvent, FactlogError, InvalidOptions, LimitExceeded, Store, Task } from "factlog";
import {
  CHECKPOINT_KIND,
  FactlogSaver,
  WRITES_KIND,
  taskIdFor,
  type CheckpointRecord,
  type WritesRecord,
} from "factlog/langgraph";
import { factlog, servedStore, tempDir } from "./helpers.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A new store directory, removed after the test. */
function storeDir(): string {
  const { dir, cleanup } = tempDir("factlog-langgraph-");
  cleanups.push(cleanup);
  return dir;
}

/** A saver on `dir` closed after the test (closing twice is harmless). */
async function openSaver(dir: string, options = {}): Promise<FactlogSaver> {
  const saver = await FactlogSaver.fromPath(dir, options);
  cleanups.push(() => saver.close());
  return saver;
}

const meta = (step: number, extra: Record<string, unknown> = {}): CheckpointMetadata => ({
  source: step < 0 ? "input" : "loop",
  step,
  parents: {},
  ...extra,
});

/** A checkpoint holding `values`, every channel at `version`. */
function checkpointOf(
  values: Record<string, unknown>,
  versions: Record<string, number>,
): Checkpoint {
  return {
    ...emptyCheckpoint(),
    id: uuid6(-3),
    channel_values: values,
    channel_versions: versions,
  };
}

/** The config of thread `threadId`'s root namespace, without a checkpoint. */
const threadOf = (threadId: string): RunnableConfig => ({ configurable: { thread_id: threadId } });

async function all(iterator: AsyncIterable<CheckpointTuple>): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const item of iterator) out.push(item);
  return out;
}

/** A short run of a graph, as LangGraph's loop drives a saver: an input checkpoint, then
 * steps that each write pending writes and put the next checkpoint with the changed channels.
 * Returns the config of the last checkpoint. */
async function run(saver: FactlogSaver, threadId: string, steps: number): Promise<RunnableConfig> {
  const versions: Record<string, number> = { messages: 1, count: 1 };
  const values: Record<string, unknown> = { messages: ["hi"], count: 0 };
  let config: RunnableConfig = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
  config = await saver.put(config, checkpointOf({ ...values }, { ...versions }), meta(-1), {
    ...versions,
  });
  for (let step = 0; step < steps; step += 1) {
    await saver.putWrites(config, [["count", step + 1]], `task-${step}`, `~step${step}`);
    values.count = step + 1;
    versions.count += 1;
    const changed: Record<string, number> = { count: versions.count };
    if (step % 2 === 1) {
      values.messages = [...(values.messages as string[]), `reply ${step}`];
      versions.messages += 1;
      changed.messages = versions.messages;
    }
    config = await saver.put(
      config,
      checkpointOf(structuredClone(values), { ...versions }),
      meta(step),
      changed,
    );
  }
  return config;
}

describe("the storage mapping", () => {
  test("checkpoints and writes are record/put events whose values keep structure", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const first = await saver.put(
      { configurable: { thread_id: "t1" } },
      checkpointOf(
        { messages: ["hello"], blob: new Uint8Array([1, 2, 3]) },
        { messages: 1, blob: 1 },
      ),
      meta(-1, { note: "first" }),
      { messages: 1, blob: 1 },
    );
    await saver.putWrites(first, [["messages", ["world"]]], "task-a", "~path");
    await saver.close();

    const events = factlog("dump", "--json", dir)
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events.map((event) => [event.type, event.task, event.kind])).toEqual([
      ["record/put", "langgraph:t1", CHECKPOINT_KIND],
      ["record/put", "langgraph:t1", WRITES_KIND],
    ]);
    const checkpoint = events[0].value as CheckpointRecord;
    expect(events[0].key).toBe(first.configurable!.checkpoint_id);
    expect(checkpoint).toMatchObject({
      thread_id: "t1",
      checkpoint_ns: "",
      checkpoint_id: first.configurable!.checkpoint_id,
      parent_checkpoint_id: null,
      metadata: { type: "json", value: { source: "input", step: -1, parents: {}, note: "first" } },
    });
    // The checkpoint itself, without its channel values, as structure.
    expect(checkpoint.checkpoint).toMatchObject({
      type: "json",
      value: {
        v: 4,
        id: first.configurable!.checkpoint_id,
        channel_versions: { messages: 1, blob: 1 },
      },
    });
    expect(checkpoint.checkpoint).not.toHaveProperty("value.channel_values");
    // A JSON value is stored as itself; bytes keep the serde's type, in base64.
    expect(checkpoint.channel_values).toEqual([
      { channel: "messages", version: 1, type: "json", value: ["hello"] },
      { channel: "blob", version: 1, type: "bytes", base64: "AQID" },
    ]);
    const writes = events[1].value as WritesRecord;
    expect(writes).toEqual({
      thread_id: "t1",
      checkpoint_ns: "",
      checkpoint_id: first.configurable!.checkpoint_id,
      task_id: "task-a",
      task_path: "~path",
      writes: [{ idx: 0, channel: "messages", type: "json", value: ["world"] }],
    });

    const state = JSON.parse(factlog("state", "--json", dir));
    expect(state.tasks["langgraph:t1"]).toMatchObject({ revision: 2 });
  });

  test("LangChain messages are stored as serialized structure, read back as messages", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const messages = [
      new HumanMessage({ content: "hi", id: "m1" }),
      new AIMessage({ content: "hello", id: "m2" }),
    ];
    const config = await saver.put(
      { configurable: { thread_id: "t1" } },
      checkpointOf({ messages }, { messages: 1 }),
      meta(-1),
      { messages: 1 },
    );
    const tuple = await saver.getTuple(config);
    const read = tuple?.checkpoint.channel_values.messages as BaseMessage[];
    expect(read.map((message) => [message.constructor.name, message.content, message.id])).toEqual([
      ["HumanMessage", "hi", "m1"],
      ["AIMessage", "hello", "m2"],
    ]);
    await saver.close();
    const [event] = factlog("dump", "--json", dir)
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const [stored] = (event.value as CheckpointRecord).channel_values;
    expect(stored).toMatchObject({
      type: "json",
      value: [
        {
          lc: 1,
          type: "constructor",
          id: ["langchain_core", "messages", "HumanMessage"],
          kwargs: { content: "hi" },
        },
        { lc: 1, type: "constructor", kwargs: { content: "hello" } },
      ],
    });
  });

  test("JSON the store would change falls back to base64 and comes back unchanged", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const secretLike = { $secret: "not for the store's vault", nested: [1, 2] };
    const loneSurrogate = "half \ud800 a pair";
    const config = await saver.put(
      { configurable: { thread_id: "t1" } },
      checkpointOf(
        { secretLike, loneSurrogate, plain: "ok" },
        { secretLike: 1, loneSurrogate: 1, plain: 1 },
      ),
      meta(-1),
      { secretLike: 1, loneSurrogate: 1, plain: 1 },
    );
    const tuple = await saver.getTuple(config);
    expect(tuple?.checkpoint.channel_values).toEqual({ secretLike, loneSurrogate, plain: "ok" });
    await saver.close();
    const [event] = factlog("dump", "--json", dir)
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const stored = (event.value as CheckpointRecord).channel_values;
    expect(stored.map((value) => [value.channel, "base64" in value ? "base64" : "value"])).toEqual([
      ["secretLike", "base64"],
      ["loneSurrogate", "base64"],
      ["plain", "value"],
    ]);
  });

  test("a thread id too long for a task id is kept under its digest and still listed", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const long = "thread-".repeat(40);
    expect(taskIdFor(long)).toMatch(/^langgraph#[0-9a-f]{64}$/);
    expect(taskIdFor("short")).toBe("langgraph:short");
    const config = await saver.put(threadOf(long), checkpointOf({}, {}), meta(-1), {});
    expect((await saver.getTuple(config))?.config).toEqual(config);
    const listed = await all(saver.list({}));
    expect(listed.map((tuple) => tuple.config.configurable?.thread_id)).toEqual([long]);
    expect(await saver.store.taskIds()).toEqual([taskIdFor(long)]);
  });

  test("unchanged channels are read from the checkpoint that stored their version", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const last = await run(saver, "t1", 5);
    const tuple = await saver.getTuple({ configurable: { thread_id: "t1" } });
    expect(tuple?.config).toEqual(last);
    expect(tuple?.checkpoint.channel_values).toEqual({
      messages: ["hi", "reply 1", "reply 3"],
      count: 5,
    });
    const history = await all(saver.list({ configurable: { thread_id: "t1" } }));
    expect(history.map((item) => item.metadata?.step)).toEqual([4, 3, 2, 1, 0, -1]);
    expect(history.map((item) => item.checkpoint.channel_values.count)).toEqual([5, 4, 3, 2, 1, 0]);
    // Each checkpoint's parent is the one listed after it; writes are pending where written.
    for (let at = 0; at + 1 < history.length; at += 1) {
      expect(history[at]!.parentConfig).toEqual(history[at + 1]!.config);
      expect(history[at + 1]!.pendingWrites).toEqual([[`task-${4 - at}`, "count", 5 - at]]);
    }
    expect(await saver.getDeltaChannelHistory({ config: last, channels: ["count"] })).toEqual({
      count: { seed: 4, writes: [["task-4", "count", 5]] },
    });
  });
});

describe("reopening and serving", () => {
  test("a reopened store gives back every checkpoint, write and deletion", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    await run(saver, "kept", 3);
    await run(saver, "deleted", 2);
    await saver.deleteThread("deleted");
    const before = await all(saver.list({}));
    await saver.close();

    const reopened = await openSaver(dir);
    expect(await all(reopened.list({}))).toEqual(before);
    expect(before).toHaveLength(4);
    expect(await reopened.getTuple({ configurable: { thread_id: "deleted" } })).toBeUndefined();
    // A deleted thread can be used again.
    await run(reopened, "deleted", 1);
    expect(await all(reopened.list({ configurable: { thread_id: "deleted" } }))).toHaveLength(2);
  });

  test("two savers on a served store each see what the other wrote", async () => {
    const dir = storeDir();
    const held = await servedStore(dir);
    cleanups.push(held.stop);
    const a = await openSaver(dir);
    const b = await openSaver(dir);
    expect(a.store.servedBy).toBe(held.pid);
    const first = await run(a, "shared", 2);
    expect((await b.getTuple({ configurable: { thread_id: "shared" } }))?.config).toEqual(first);
    // b appends to the thread behind a's index: a folds b's records before its own next one.
    const nine = { count: 9 };
    const second = await b.put(first, checkpointOf(nine, nine), meta(2), nine);
    await b.putWrites(second, [["count", 10]], "from-b");
    const ten = { count: 10 };
    const third = await a.put(second, checkpointOf(ten, ten), meta(3), ten);
    const listedByA = await all(a.list({ configurable: { thread_id: "shared" } }));
    expect(listedByA).toHaveLength(5);
    expect(listedByA.slice(0, 3).map((tuple) => tuple.config)).toEqual([third, second, first]);
    expect(listedByA[1]!.pendingWrites).toEqual([["from-b", "count", 10]]);
    expect(await all(b.list({ configurable: { thread_id: "shared" } }))).toEqual(listedByA);
    await a.close();
    await b.close();
    await held.stop();

    // The store the other process held opens embedded with everything in it.
    const embedded = await openSaver(dir);
    expect(embedded.store.servedBy).toBeNull();
    expect(await all(embedded.list({}))).toEqual(listedByA);
  });

  test("two savers writing one thread at once both keep the log's order", async () => {
    const dir = storeDir();
    const store = await Store.open(dir);
    cleanups.push(() => store.close());
    const a = new FactlogSaver(store);
    const b = new FactlogSaver(store);
    const base = await a.put(threadOf("t1"), checkpointOf({}, {}), meta(-1), {});
    // Each saver's check of the task's revision and its append interleave with the other's:
    // an append that finds the other's events before its own folds them from the log.
    await Promise.all(
      Array.from({ length: 6 }, (_, at) =>
        (at % 2 === 0 ? a : b).putWrites(base, [["ch", at]], `task-${at}`),
      ),
    );
    const expected = Array.from({ length: 6 }, (_, at) => [`task-${at}`, "ch", at]);
    expect((await a.getTuple(base))?.pendingWrites).toEqual(expected);
    expect((await b.getTuple(base))?.pendingWrites).toEqual(expected);
    const fresh = new FactlogSaver(store);
    expect(await all(fresh.list({}))).toEqual(await all(a.list({})));
  });

  test("a saver given an open store leaves it open", async () => {
    const dir = storeDir();
    const store = await Store.open(dir);
    cleanups.push(() => store.close());
    const saver = new FactlogSaver(store);
    await saver.put({ configurable: { thread_id: "t1" } }, checkpointOf({}, {}), meta(-1), {});
    await saver.close();
    expect(store.closed).toBe(false);
    expect(await store.taskIds()).toEqual(["langgraph:t1"]);
  });
});

describe("durability", () => {
  /** The durability of each append the saver makes while `work` runs. */
  async function tiers(work: () => Promise<unknown>): Promise<Array<string | undefined>> {
    const seen: Array<string | undefined> = [];
    const append = Task.prototype.append;
    const appendBatch = Task.prototype.appendBatch;
    vi.spyOn(Task.prototype, "append").mockImplementation(function (this: Task, event, options) {
      seen.push(options?.durability);
      return append.call(this, event, options);
    });
    vi.spyOn(Task.prototype, "appendBatch").mockImplementation(
      function (this: Task, events, options) {
        seen.push(options?.durability);
        return appendBatch.call(this, events, options);
      },
    );
    await work();
    vi.restoreAllMocks();
    return seen;
  }

  const put = (saver: FactlogSaver, mode?: string) =>
    saver.put(
      { configurable: { thread_id: "t1", ...(mode ? { __pregel_durability: mode } : {}) } },
      checkpointOf({}, {}),
      meta(-1),
      {},
    );

  test("the mode picks the tier: sync and exit synced, async (the default) flushed", async () => {
    const saver = await openSaver(storeDir());
    expect(await tiers(() => put(saver, "sync"))).toEqual(["synced"]);
    expect(await tiers(() => put(saver, "exit"))).toEqual(["synced"]);
    expect(await tiers(() => put(saver, "async"))).toEqual(["flushed"]);
    expect(await tiers(() => put(saver))).toEqual(["flushed"]);
    const config = await put(saver);
    expect(
      await tiers(() =>
        saver.putWrites(
          { configurable: { ...config.configurable, __pregel_durability: "sync" } },
          [["a", 1]],
          "t",
        ),
      ),
    ).toEqual(["synced"]);
    expect(await tiers(() => saver.deleteThread("t1"))).toEqual(["synced"]);
  });

  test("the durability option fixes the tier whatever the mode", async () => {
    const saver = await openSaver(storeDir(), { durability: "buffered" });
    expect(await tiers(() => put(saver, "sync"))).toEqual(["buffered"]);
    expect(await tiers(() => put(saver))).toEqual(["buffered"]);
    expect((await saver.getTuple(threadOf("t1")))?.metadata).toEqual(meta(-1));
    expect(await tiers(() => saver.deleteThread("t1"))).toEqual(["synced"]);
  });
});

describe("bounds and refusals", () => {
  test("a checkpoint read back by id asks the log for a page of one record", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir, { valueCacheBytes: 0 });
    await run(saver, "t1", 5);
    const first = (await all(saver.list(threadOf("t1")))).at(-1)!;
    const pages = vi.spyOn(Store.prototype, "events");
    const tuple = await saver.getTuple(first.config);
    expect(tuple?.checkpoint.id).toBe(first.checkpoint.id);
    expect(pages.mock.calls.length).toBeGreaterThan(0);
    for (const [options] of pages.mock.calls) {
      expect(options?.pageEvents).toBeLessThanOrEqual(2);
    }
    // The option itself: pages of one event read the same events, a bad bound is refused.
    const task = saver.store.task(taskIdFor("t1"));
    const whole: number[] = [];
    for await (const event of task.events(1)) whole.push(event.seq);
    const paged: number[] = [];
    for await (const event of task.events(1, { pageEvents: 1 })) paged.push(event.seq);
    expect(paged).toEqual(whole);
    await expect(task.events(1, { pageEvents: 0 }).next()).rejects.toBeInstanceOf(InvalidOptions);
  });

  test("a one-thread index and no value cache still read everything back", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir, { threadsCached: 1, valueCacheBytes: 0 });
    const one = await run(saver, "one", 3);
    const two = await run(saver, "two", 2);
    const reference = await openSaver(storeDir());
    await run(reference, "one", 3);
    for (const [config, steps] of [
      [one, 3],
      [two, 2],
    ] as const) {
      const tuple = await saver.getTuple(config);
      expect(tuple?.checkpoint.channel_values.count).toBe(steps);
      expect(tuple?.metadata?.step).toBe(steps - 1);
    }
    expect(await all(saver.list({}))).toHaveLength(4 + 3);
  });

  test("a re-put checkpoint counts with its last put", async () => {
    const saver = await openSaver(storeDir());
    const checkpoint = checkpointOf({ a: 1 }, { a: 1 });
    const config = await saver.put(threadOf("t1"), checkpoint, meta(0), { a: 1 });
    await saver.put(threadOf("t1"), checkpoint, meta(0, { again: true }), {});
    const listed = await all(saver.list({ configurable: { thread_id: "t1" } }));
    expect(listed).toHaveLength(1);
    expect(listed[0]!.config).toEqual(config);
    expect(listed[0]!.metadata).toEqual(meta(0, { again: true }));
    expect(listed[0]!.checkpoint.channel_values).toEqual({ a: 1 });
  });

  test("calls LangGraph makes at once on one thread are applied in order", async () => {
    const saver = await openSaver(storeDir());
    const base = await saver.put(threadOf("t1"), checkpointOf({}, {}), meta(-1), {});
    await Promise.all(
      Array.from({ length: 8 }, (_, at) => saver.putWrites(base, [["ch", at]], `task-${at}`)),
    );
    const tuple = await saver.getTuple(base);
    const expected = Array.from({ length: 8 }, (_, at) => [`task-${at}`, "ch", at]);
    expect(tuple?.pendingWrites).toEqual(expected);
    // A regular write stored again under the same task and index is not stored twice.
    await saver.putWrites(base, [["ch", "again"]], "task-0");
    expect((await saver.getTuple(base))?.pendingWrites).toHaveLength(8);
    expect(await saver.store.task(taskIdFor("t1")).revision()).toBe(9);
  });

  test("configs without what LangGraph requires and bad options are InvalidOptions", async () => {
    const dir = storeDir();
    const saver = await openSaver(dir);
    const refusal = saver.put({}, checkpointOf({}, {}), meta(-1), {});
    await expect(refusal).rejects.toBeInstanceOf(InvalidOptions);
    await expect(refusal).rejects.toBeInstanceOf(FactlogError);
    await expect(
      saver.putWrites({ configurable: { thread_id: "t1" } }, [["a", 1]], "task"),
    ).rejects.toBeInstanceOf(InvalidOptions);
    await expect(FactlogSaver.fromPath(dir, { threadsCached: 0 })).rejects.toBeInstanceOf(
      InvalidOptions,
    );
    const badTier = { durability: "fast" as never };
    expect(() => new FactlogSaver(saver.store, badTier)).toThrow(InvalidOptions);
  });

  test("a thread the Python package's saver wrote is refused with CorruptEvent", async () => {
    const dir = storeDir();
    const store = await Store.open(dir);
    // The records as the Python saver writes them: no channel_values beside the checkpoint,
    // values in LangGraph's Python serialization.
    const msgpack = { type: "msgpack", value: { v: 4, id: "c1", channel_versions: {} } };
    await store.task(taskIdFor("py")).append({
      type: "record/put",
      kind: CHECKPOINT_KIND,
      key: "c1",
      value: {
        thread_id: "py",
        checkpoint_ns: "",
        checkpoint_id: "c1",
        parent_checkpoint_id: null,
        checkpoint: msgpack,
        metadata: { type: "msgpack", value: { step: -1 } },
      },
    });
    // A checkpoint of this saver's shape with a write of the Python saver's.
    await store.task(taskIdFor("py-writes")).append({
      type: "record/put",
      kind: CHECKPOINT_KIND,
      key: "c1",
      value: {
        thread_id: "py-writes",
        checkpoint_ns: "",
        checkpoint_id: "c1",
        parent_checkpoint_id: null,
        checkpoint: {
          type: "json",
          value: { v: 4, id: "c1", ts: "2026-12-06T00:00:00.000Z", channel_versions: {}, versions_seen: {} },
        },
        metadata: { type: "json", value: { source: "input", step: -1, parents: {} } },
        channel_values: [],
      },
    });
    await store.task(taskIdFor("py-writes")).append({
      type: "record/put",
      kind: WRITES_KIND,
      key: "c1",
      value: {
        thread_id: "py-writes",
        checkpoint_ns: "",
        checkpoint_id: "c1",
        task_id: "task-a",
        task_path: "",
        writes: [{ idx: 0, channel: "messages", type: "msgpack", base64: "kA==" }],
      },
    });
    // A checkpoint as the Python saver writes it now: its serialized bytes in a record/blob
    // (base64 in the JSON form).
    await store.task(taskIdFor("py-blob")).append({
      type: "record/blob",
      kind: CHECKPOINT_KIND,
      key: "c1",
      value: {
        thread_id: "py-blob",
        checkpoint_ns: "",
        checkpoint_id: "c1",
        parent_checkpoint_id: null,
        checkpoint: { type: "msgpack" },
        metadata: { type: "msgpack", value: { step: -1 } },
      },
      bytes: "gA==",
    });
    await store.close();
    const saver = await openSaver(dir);
    for (const thread of ["py", "py-writes", "py-blob"]) {
      const read = saver.getTuple({ configurable: { thread_id: thread, checkpoint_id: "c1" } });
      await expect(read).rejects.toBeInstanceOf(CorruptEvent);
      await expect(read).rejects.toThrow(/Python package's LangGraph saver/);
    }
  });

  test("a checkpoint over the store's event limit is refused and nothing is stored", async () => {
    const saver = await openSaver(storeDir());
    const huge = "x".repeat(5 * 1024 * 1024);
    await expect(
      saver.put(threadOf("t1"), checkpointOf({ huge }, { huge: 1 }), meta(-1), { huge: 1 }),
    ).rejects.toBeInstanceOf(LimitExceeded);
    expect(await saver.getTuple({ configurable: { thread_id: "t1" } })).toBeUndefined();
  });
});
