/**
 * `FactlogSession` (`factlog/agents`), the OpenAI Agents JS session on a factlog task: the
 * cases of the Python adapter's suite (`python/tests/test_agents_session.py`) ported to the JS
 * SDK's item shapes: every item kind comes back equal and lands in the expected event type;
 * the limit semantics; pop and clear are events a reopened store folds the same way; shared
 * stores; long and unicode session ids; batches, large and secret items; a child process
 * killed with SIGKILL loses no acknowledged item; sessions of one id in three processes; and
 * the history transactions, idempotent by request key. Every case that takes a store
 * directory runs twice: on a store this process opens, and on a client of a store another
 * process holds and shares (`servedStore`). The crash of a run between a tool call and its
 * result is `agents-recovery.test.ts`.
 */

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import {
  Agent,
  run,
  setTracingDisabled,
  type AgentInputItem,
  type SessionHistoryTransactionArgs,
} from "@openai/agents-core";
import { ScriptedModel, assistantMessage } from "@openai/agents-core/testing";
import {
  Closed,
  InvalidEvent,
  InvalidOptions,
  LimitExceeded,
  Store,
  requestKey,
  type StoredEvent,
} from "factlog";
import {
  BATCH_ITEMS_MAX,
  FactlogSession,
  ITEM_KIND,
  TRANSACTION_KIND,
  taskIdFor,
} from "factlog/agents";
import { packageDir, servedStore, tempDir } from "./helpers.js";

setTracingDisabled(true);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Mode = "embedded" | "served";
const MODES: Mode[] = ["embedded", "served"];

/** A new store directory: opened by the test's own process (`embedded`), or held and shared
 * by another process, so that every `Store.open` of it is a client (`served`). */
async function storePath(mode: Mode): Promise<string> {
  const { dir, cleanup } = tempDir("factlog-agents-");
  cleanups.push(cleanup);
  if (mode === "served") {
    const held = await servedStore(dir);
    cleanups.push(held.stop);
  }
  return dir;
}

/** A session to be closed at the end of the test. */
function session(options: ConstructorParameters<typeof FactlogSession>[0]): FactlogSession {
  const made = new FactlogSession(options);
  cleanups.push(() => made.close());
  return made;
}

/** A store to be closed at the end of the test. */
async function openStore(path: string): Promise<Store> {
  const store = await Store.open(path);
  cleanups.push(() => store.close());
  return store;
}

async function taskEvents(store: Store, task: string): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  for await (const event of store.events({ task })) events.push(event);
  return events;
}

const item = (value: unknown): AgentInputItem => value as AgentInputItem;
const user = (n: number): AgentInputItem => item({ role: "user", content: `message ${n}` });

const USER_TEXT = item({ role: "user", content: "What is the weather in Paris?" });
const USER_PARTS = item({
  type: "message",
  role: "user",
  content: [
    { type: "input_text", text: "Look at " },
    { type: "input_image", image: "data:image/png;base64,AAAA", detail: "auto" },
    { type: "input_text", text: "this" },
  ],
});
const SYSTEM = item({ role: "system", content: "Be brief." });
const DEVELOPER = item({ role: "developer", content: [{ type: "input_text", text: "No tools." }] });
const ASSISTANT_EASY = item({ role: "assistant", content: "Sunny." });
const ASSISTANT_OUTPUT = item({
  id: "msg_1",
  type: "message",
  role: "assistant",
  status: "completed",
  content: [
    { type: "output_text", text: "It is ", providerData: { annotations: [] } },
    { type: "output_text", text: "sunny." },
  ],
});
const REFUSAL = item({
  id: "msg_2",
  type: "message",
  role: "assistant",
  status: "completed",
  content: [{ type: "refusal", refusal: "I cannot help with that." }],
});
const FUNCTION_CALL = item({
  id: "fc_1",
  type: "function_call",
  callId: "call_1",
  name: "get_weather",
  arguments: '{"city":"Paris"}',
  status: "completed",
});
const FUNCTION_OUTPUT = item({
  type: "function_call_result",
  callId: "call_1",
  name: "get_weather",
  status: "completed",
  output: { type: "text", text: "18 C, sunny" },
});
const REASONING = item({
  id: "rs_1",
  type: "reasoning",
  content: [{ type: "input_text", text: "The user wants weather." }],
});
const HANDOFF_CALL = item({
  id: "fc_2",
  type: "function_call",
  callId: "call_2",
  name: "transfer_to_billing",
  arguments: "{}",
  status: "completed",
});
const HANDOFF_OUTPUT = item({
  type: "function_call_result",
  callId: "call_2",
  name: "transfer_to_billing",
  status: "completed",
  output: { type: "text", text: '{"assistant": "Billing"}' },
});
const APPROVAL_REQUEST = item({
  id: "mcpr_1",
  type: "hosted_tool_call",
  name: "mcp_approval_request",
  arguments: '{"path": "/tmp/x"}',
  providerData: { server_label: "files" },
});
const APPROVAL_RESPONSE = item({
  type: "hosted_tool_call",
  name: "mcp_approval_response",
  providerData: { approval_request_id: "mcpr_1", approve: false, reason: "not now" },
});
const UNKNOWN = item({ type: "x_future_item", payload: { nested: [1, 2.5, null, true, "ü"] } });

const ALL_ITEMS = [
  USER_TEXT,
  USER_PARTS,
  SYSTEM,
  DEVELOPER,
  ASSISTANT_EASY,
  ASSISTANT_OUTPUT,
  REFUSAL,
  FUNCTION_CALL,
  FUNCTION_OUTPUT,
  REASONING,
  HANDOFF_CALL,
  HANDOFF_OUTPUT,
  APPROVAL_REQUEST,
  APPROVAL_RESPONSE,
  UNKNOWN,
];

const summary = (): AgentInputItem => item({ role: "assistant", content: "summary of 3 and 4" });

describe.each(MODES)("FactlogSession on a %s store", (mode) => {
  test("every item kind round-trips into the expected event type", async () => {
    const path = await storePath(mode);
    const s1 = session({ path, sessionId: "s1" });
    await s1.addItems(ALL_ITEMS);
    expect(await s1.getItems()).toEqual(ALL_ITEMS);
    const events = await taskEvents(await s1.store(), "s1");
    await s1.close();
    expect(events.map((event) => [event.type, event.kind ?? null])).toEqual([
      ["user/message", null],
      ["user/message", null],
      ["record/put", ITEM_KIND], // system
      ["record/put", ITEM_KIND], // developer
      ["assistant/message", null],
      ["assistant/message", null],
      ["assistant/message", null], // a refusal: no output_text, empty text
      ["assistant/message", null], // the function call the model asked for
      ["record/put", ITEM_KIND],
      ["record/put", ITEM_KIND],
      ["assistant/message", null],
      ["record/put", ITEM_KIND],
      ["record/put", ITEM_KIND],
      ["record/put", ITEM_KIND],
      ["record/put", ITEM_KIND],
    ]);
    expect(events[0]!.text).toBe("What is the weather in Paris?");
    expect(events[1]!.text).toBe("Look at this");
    expect(events[5]!.text).toBe("It is sunny.");
    expect(events[6]!.text).toBe("");
    expect(events[7]!.tool_calls).toEqual([
      { call_id: "call_1", tool: "get_weather", args: '{"city":"Paris"}' },
    ]);
    expect(events[0]!.item).toEqual(USER_TEXT);
    expect(events[8]!.value).toEqual(FUNCTION_OUTPUT);
    // One addItems is one atomic batch: one revision step per item.
    expect(events.map((event) => event.revision)).toEqual(ALL_ITEMS.map((_, at) => at + 1));
    // The store's own view: a call asked for, not dispatched, so no holder rules apply.
    const store = await openStore(path);
    type Calls = { session: { calls: Record<string, { status: string }> } };
    const state = (await store.task("s1").state()) as unknown as Calls;
    expect(state.session.calls.call_1!.status).toBe("not_started");
  });

  test("returned items are fresh objects", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    const added = { role: "user", content: [{ type: "input_text", text: "hi" }] as unknown[] };
    await s1.addItems([item(added)]);
    added.content.push("changed after the add");
    const first = (await s1.getItems()) as unknown as Array<Record<string, unknown>>;
    first[0]!.content = "changed by the caller";
    expect(await s1.getItems()).toEqual([
      { role: "user", content: [{ type: "input_text", text: "hi" }] },
    ]);
  });

  test.each([
    [undefined, [0, 1, 2, 3, 4, 5]],
    [1, [5]],
    [4, [2, 3, 4, 5]],
    [6, [0, 1, 2, 3, 4, 5]],
    [50, [0, 1, 2, 3, 4, 5]],
    [0, []],
    [-1, [0, 1, 2, 3, 4, 5]],
  ])("limit %s gives the latest items in chronological order", async (limit, expected) => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await s1.addItems([0, 1, 2, 3, 4, 5].map(user));
    expect(await s1.getItems(limit)).toEqual(expected.map(user));
  });

  test("sessionSettings.limit is the default and an explicit limit wins", async () => {
    const store = await openStore(await storePath(mode));
    const s1 = session({ store, sessionId: "s1", sessionSettings: { limit: 2 } });
    await s1.addItems([0, 1, 2, 3, 4].map(user));
    expect(await s1.getItems()).toEqual([user(3), user(4)]);
    expect(await s1.getItems(3)).toEqual([user(2), user(3), user(4)]);
    expect(session({ store, sessionId: "s2" }).sessionSettings).toEqual({});
    expect(
      () => new FactlogSession({ store, sessionId: "s3", sessionSettings: { limitt: 1 } as never }),
    ).toThrow(InvalidOptions);
  });

  test("pop and clear are events, and a reopened store folds the same", async () => {
    const path = await storePath(mode);
    const s1 = session({ path, sessionId: "s1" });
    expect(await s1.popItem()).toBeUndefined();
    await s1.clearSession(); // nothing to clear: nothing written
    expect(await taskEvents(await s1.store(), "s1")).toEqual([]);
    await s1.addItems([0, 1, 2, 3].map(user));
    expect(await s1.popItem()).toEqual(user(3));
    expect(await s1.popItem()).toEqual(user(2));
    await s1.addItems([user(10)]);
    expect(await s1.getItems()).toEqual([user(0), user(1), user(10)]);
    const events = await taskEvents(await s1.store(), "s1");
    await s1.close();
    const removals = events.filter((event) => event.type === "record/removed");
    expect(removals.map((event) => [event.kind, event.seqs])).toEqual([
      [ITEM_KIND, [events[3]!.seq]],
      [ITEM_KIND, [events[2]!.seq]],
    ]);

    const reopened = session({ path, sessionId: "s1" });
    expect(await reopened.getItems()).toEqual([user(0), user(1), user(10)]);
    await reopened.clearSession();
    expect(await reopened.getItems()).toEqual([]);
    await reopened.addItems([user(20)]);
    const afterClear = await taskEvents(await reopened.store(), "s1");
    const lastRemoval = afterClear.filter((event) => event.type === "record/removed").at(-1)!;
    expect(lastRemoval.through_seq).toBe(events.at(-1)!.seq);
    await reopened.close();

    const again = session({ path, sessionId: "s1" });
    expect(await again.getItems()).toEqual([user(20)]);
    // The log keeps every item ever added: the removals only fold them away.
    const puts = (await taskEvents(await again.store(), "s1")).filter(
      (event) => event.type === "user/message",
    );
    expect(puts).toHaveLength(6);
  });

  test("a popped function call added again falls back to a record", async () => {
    const path = await storePath(mode);
    const s1 = session({ path, sessionId: "s1" });
    await s1.addItems([USER_TEXT, FUNCTION_CALL]);
    expect(await s1.popItem()).toEqual(FUNCTION_CALL);
    // The runner adds the same call (same call id) again after a rewind: the store would
    // refuse a second assistant/message naming call_1 (CallIdReused), so it is a record.
    await s1.addItems([FUNCTION_CALL, FUNCTION_CALL, FUNCTION_OUTPUT]);
    const expected = [USER_TEXT, FUNCTION_CALL, FUNCTION_CALL, FUNCTION_OUTPUT];
    expect(await s1.getItems()).toEqual(expected);
    const types = (await taskEvents(await s1.store(), "s1")).map((event) => event.type);
    await s1.close();
    expect(types).toEqual([
      "user/message",
      "assistant/message",
      "record/removed",
      "record/put",
      "record/put",
      "record/put",
    ]);
    expect(await session({ path, sessionId: "s1" }).getItems()).toEqual(expected);
  });

  test("a call id another writer made known still adds", async () => {
    const store = await openStore(await storePath(mode));
    const s1 = session({ store, sessionId: "s1" });
    await s1.getItems();
    // The harness dispatches call_1 on the same task behind the session's back.
    await store.task("s1").append({
      type: "tool/call",
      call_id: "call_1",
      tool: "get_weather",
      effect: "read_only",
    });
    await s1.addItems([FUNCTION_CALL]);
    expect(await s1.getItems()).toEqual([FUNCTION_CALL]);
  });

  test("sessions share a store and see only their own task", async () => {
    const store = await openStore(await storePath(mode));
    await store.task("harness").append({ type: "turn/start" });
    const a = session({ store, sessionId: "a" });
    const b = session({ store, sessionId: "b" });
    const aAgain = session({ store, sessionId: "a" });
    await a.addItems([user(1)]);
    await b.addItems([user(2)]);
    expect(await aAgain.getItems()).toEqual([user(1)]);
    await aAgain.addItems([user(3)]);
    // a's fold notices the revision aAgain moved and reads only what it missed.
    expect(await a.getItems()).toEqual([user(1), user(3)]);
    expect(await a.popItem()).toEqual(user(3));
    expect(await aAgain.getItems()).toEqual([user(1)]);
    expect(await b.getItems()).toEqual([user(2)]);
    await a.close();
    expect(store.closed).toBe(false); // a shared store stays open
    expect(await b.getItems()).toEqual([user(2)]);
    await expect(a.getItems()).rejects.toThrow(Closed);
    await expect(a.getItems()).rejects.toThrow(/is closed/);
    await expect(a.addItems([])).rejects.toThrow(Closed);
  });

  test("an owned store closes with the session", async () => {
    const path = await storePath(mode);
    const s1 = new FactlogSession({ path, sessionId: "s1" });
    const store = await s1.store();
    await s1.close();
    await s1.close();
    expect(s1.closed).toBe(true);
    expect(store.closed).toBe(true);
    const again = await Store.open(path); // not locked any more
    await again.close();
  });

  test("constructor refusals", async () => {
    const path = await storePath(mode);
    expect(() => new FactlogSession({ path, sessionId: "" })).toThrow(/sessionId/);
    expect(() => new FactlogSession({ path, sessionId: "" })).toThrow(InvalidOptions);
    expect(() => new FactlogSession({ sessionId: "s1" })).toThrow(/either path/);
    expect(
      () => new FactlogSession({ path, sessionId: "s1", durability: "eventually" as never }),
    ).toThrow(/durability/);
    const store = await openStore(path);
    expect(() => new FactlogSession({ path, store, sessionId: "s1" })).toThrow(/either path/);
  });

  test("long and unicode session ids map to distinct valid tasks", async () => {
    const longA = "conversation/" + "x".repeat(300) + "/a";
    const longB = "conversation/" + "x".repeat(300) + "/b";
    const emoji = "会話-😊-".repeat(20); // 220 bytes of UTF-8
    const ids = ["会話 😊", "x".repeat(128), longA, longB, emoji, "sha256:looks-like-a-digest"];
    const tasks = ids.map(taskIdFor);
    expect(tasks[0]).toBe("会話 😊"); // short ids are their own task
    expect(tasks[1]).toBe("x".repeat(128));
    expect(new Set(tasks).size).toBe(tasks.length);
    ids.slice(2).forEach((sessionId, at) => {
      const task = tasks[at + 2]!;
      expect(task).toMatch(/^sha256:[0-9a-f]{64}:/s);
      const bytes = Buffer.byteLength(task, "utf8");
      expect(bytes).toBeGreaterThanOrEqual(1);
      expect(bytes).toBeLessThanOrEqual(128);
      expect(taskIdFor(sessionId)).toBe(task); // deterministic
      expect(sessionId.startsWith(task.split(":").slice(2).join(":"))).toBe(true); // a readable head
    });
    const store = await openStore(await storePath(mode));
    for (const [n, sessionId] of ids.entries()) {
      await session({ store, sessionId }).addItems([user(n)]);
    }
    for (const [n, sessionId] of ids.entries()) {
      const again = session({ store, sessionId });
      expect(again.taskId).toBe(tasks[n]);
      expect(await again.getItems()).toEqual([user(n)]);
    }
    expect((await store.taskIds()).sort()).toEqual([...tasks].sort());
  });

  test("more than one batch of items round-trips", async () => {
    const items = Array.from({ length: 2 * BATCH_ITEMS_MAX + 100 }, (_, n) => user(n));
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await s1.addItems(items);
    expect(await s1.getItems()).toEqual(items);
    expect(await s1.getItems(3)).toEqual(items.slice(-3));
  });

  test("unicode and large items round-trip", async () => {
    const path = await storePath(mode);
    const big = item({ role: "user", content: "ü€😊".repeat(100_000) }); // about 1 MiB of UTF-8
    const odd = item({ type: "x", keys: { "": 0, "😊": [{ "a\u0000b": "\u2028" }] }, n: 2 ** 52 });
    const s1 = session({ path, sessionId: "s1", durability: "synced" });
    await s1.addItems([big, odd]);
    expect(await s1.getItems()).toEqual([big, odd]);
    await s1.close();
    expect(await session({ path, sessionId: "s1" }).getItems()).toEqual([big, odd]);
  });

  test("an item over the body limit writes nothing of its batch", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await expect(
      s1.addItems([user(1), item({ type: "x", v: "y".repeat(5 * 1024 * 1024) })]),
    ).rejects.toThrow(LimitExceeded);
    expect(await s1.getItems()).toEqual([]);
  });

  test("an item over the request line limit is refused and the session goes on", async () => {
    // Over a served store's request line limit (16 MiB) too: the client refuses the line
    // before sending it, so the connection goes on as an embedded store does.
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await expect(s1.addItems([item({ type: "x", v: "y".repeat(17 * 1024 * 1024) })])).rejects.toThrow(
      LimitExceeded,
    );
    await s1.addItems([user(1)]);
    expect(await s1.getItems()).toEqual([user(1)]);
  });

  test("a marked secret comes back as the store's reference", async () => {
    const store = await openStore(await storePath(mode));
    const s1 = session({ store, sessionId: "s1" });
    const output = item({
      type: "function_call_result",
      callId: "c1",
      name: "login",
      status: "completed",
      output: { $secret: "hunter2" },
    });
    await s1.addItems([user(1), output]);
    const items = (await s1.getItems()) as unknown as Array<Record<string, any>>;
    expect(items[0]).toEqual(user(1));
    expect(items[1]!.output.$secret_ref).toMatch(/^sec_[0-9a-f]{32}$/);
    expect(await session({ store, sessionId: "s1" }).getItems()).toEqual(items);
  });

  test("an item that is not JSON writes nothing", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await expect(
      s1.addItems([user(1), item({ role: "user", content: 10n })]),
    ).rejects.toThrow(InvalidEvent);
    await expect(s1.addItems([user(1), item(undefined)])).rejects.toThrow(InvalidEvent);
    await s1.addItems([user(2)]);
    expect(await s1.getItems()).toEqual([user(2)]);
  });

  test("concurrent calls on one session keep every item, each add in one piece", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await Promise.all(
      Array.from({ length: 8 }, (_, k) => s1.addItems([user(k), user(k + 1000)])),
    );
    const items = await s1.getItems();
    expect(items.map((x) => (x as { content: string }).content).sort()).toEqual(
      Array.from({ length: 8 }, (_, k) => [`message ${k}`, `message ${k + 1000}`]).flat().sort(),
    );
    for (let k = 0; k < 8; k += 1) {
      const at = items.findIndex((x) => JSON.stringify(x) === JSON.stringify(user(k)));
      expect(items[at + 1]).toEqual(user(k + 1000));
    }
  });

  test("a replace_suffix transaction replaces the suffix atomically", async () => {
    const path = await storePath(mode);
    const s1 = session({ path, sessionId: "s1" });
    await s1.addItems([0, 1, 2, 3, 4].map(user));
    await s1.applyHistoryTransaction({
      operationId: "compact-1",
      transaction: { type: "replace_suffix", expectedSuffix: [user(3), user(4)], replacement: [summary()] },
    });
    expect(await s1.getItems()).toEqual([user(0), user(1), user(2), summary()]);
    // A precondition that no longer holds is refused and writes nothing.
    const revision = await (await s1.store()).task("s1").revision();
    await expect(
      s1.applyHistoryTransaction({
        operationId: "compact-2",
        transaction: { type: "replace_suffix", expectedSuffix: [user(4)], replacement: [summary()] },
      }),
    ).rejects.toThrow(InvalidEvent);
    expect(await (await s1.store()).task("s1").revision()).toBe(revision);
    const events = await taskEvents(await s1.store(), "s1");
    await s1.close();
    const batch = events.slice(-3);
    expect(batch.map((event) => [event.type, event.kind ?? null])).toEqual([
      ["record/removed", ITEM_KIND],
      ["assistant/message", null],
      ["record/put", TRANSACTION_KIND],
    ]);
    expect(batch[0]!.revision + 2).toBe(batch[2]!.revision);
    expect(await session({ path, sessionId: "s1" }).getItems()).toEqual([
      user(0),
      user(1),
      user(2),
      summary(),
    ]);
  });

  test("a transaction removing more than 4096 items is still one batch", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    const items = Array.from({ length: 5000 }, (_, n) => user(n));
    await s1.addItems(items);
    await s1.applyHistoryTransaction({
      operationId: "compact-all",
      transaction: { type: "replace_suffix", expectedSuffix: items, replacement: [summary()] },
    });
    expect(await s1.getItems()).toEqual([summary()]);
    const batch = await taskEvents(await s1.store(), "s1").then((events) => events.slice(5000));
    expect(batch.map((event) => [event.type, (event.seqs as unknown[] | undefined)?.length ?? 0])).toEqual([
      ["record/removed", 4096],
      ["record/removed", 904],
      ["assistant/message", 0],
      ["record/put", 0],
    ]);
    expect(batch[0]!.revision + 3).toBe(batch[3]!.revision);
  });

  test("a retried history transaction is a no-op, found by its request key", async () => {
    const path = await storePath(mode);
    const s1 = session({ path, sessionId: "s1" });
    const args: SessionHistoryTransactionArgs = {
      operationId: "run-7:1:append:0:2",
      transaction: { type: "append_items", items: [user(1), user(2)] },
    };
    await s1.applyHistoryTransaction(args);
    await s1.applyHistoryTransaction(structuredClone(args));
    expect(await s1.getItems()).toEqual([user(1), user(2)]);
    const events = await taskEvents(await s1.store(), "s1");
    expect(events).toHaveLength(3);
    expect(events[2]).toMatchObject({
      type: "record/put",
      kind: TRANSACTION_KIND,
      key: requestKey("s1", "agents/history-transaction:run-7:1:append:0:2", 0),
    });
    // The same id with another transaction is refused, and writes nothing.
    await expect(
      s1.applyHistoryTransaction({
        operationId: args.operationId,
        transaction: { type: "append_items", items: [user(3)] },
      }),
    ).rejects.toThrow(/different transaction/);
    // A clear keeps the record: a retry after it is still a no-op.
    await s1.clearSession();
    await s1.applyHistoryTransaction(args);
    expect(await s1.getItems()).toEqual([]);
    await s1.close();
    // Another handle (a new process, after a crash) folds the record from the log.
    const reopened = session({ path, sessionId: "s1" });
    await reopened.applyHistoryTransaction(args);
    await reopened.applyHistoryTransaction({
      operationId: "run-7:1:append:2:3",
      transaction: { type: "append_items", items: [user(3)] },
    });
    expect(await reopened.getItems()).toEqual([user(3)]);
  });

  test("sessions of one id applying the same operation at once apply it once", async () => {
    const store = await openStore(await storePath(mode));
    const sessions = [0, 1, 2].map(() => session({ store, sessionId: "s1" }));
    const args: SessionHistoryTransactionArgs = {
      operationId: "op-1",
      transaction: { type: "append_items", items: [user(1)] },
    };
    await Promise.all(sessions.map((each) => each.applyHistoryTransaction(args)));
    for (const each of sessions) expect(await each.getItems()).toEqual([user(1)]);
  });

  test("transaction arguments of the wrong shape are refused before anything is written", async () => {
    const s1 = session({ path: await storePath(mode), sessionId: "s1" });
    await expect(
      s1.applyHistoryTransaction({ operationId: " ", transaction: { type: "append_items", items: [] } }),
    ).rejects.toThrow(InvalidOptions);
    await expect(
      s1.applyHistoryTransaction({ operationId: "x", transaction: { type: "nope" } as never }),
    ).rejects.toThrow(InvalidOptions);
    await expect(
      s1.applyHistoryTransaction({
        operationId: "x",
        transaction: { type: "append_items", items: Array.from({ length: BATCH_ITEMS_MAX }, (_, n) => user(n)) },
      }),
    ).rejects.toThrow(LimitExceeded);
    expect(await taskEvents(await s1.store(), "s1")).toEqual([]);
  });

  test("a run of the SDK's Runner with a ScriptedModel keeps its turns", async () => {
    const path = await storePath(mode);
    const model = new ScriptedModel([
      [assistantMessage("Paris.")],
      [assistantMessage("About 2 million.")],
    ]);
    const agent = new Agent({ name: "guide", model });
    const s1 = session({ path, sessionId: "user-42" });
    await run(agent, "Capital of France?", { session: s1 });
    const result = await run(agent, "Its population?", { session: s1 });
    expect(result.finalOutput).toBe("About 2 million.");
    // The second call saw the first turn through the session.
    const secondInput = model.calls[1]!.request.input as Array<{ role?: string }>;
    expect(secondInput.map((x) => x.role)).toEqual(["user", "assistant", "user"]);
    expect(await s1.getItems()).toHaveLength(4);
    expect(await s1.popItem()).toMatchObject({ role: "assistant" });
    await s1.close();
    const reopened = session({ path, sessionId: "user-42" });
    expect((await reopened.getItems()).map((x) => (x as { role?: string }).role)).toEqual([
      "user",
      "assistant",
      "user",
    ]);
  });

  test("a killed process keeps every acknowledged item", async () => {
    const path = await storePath(mode);
    // The child adds [user(n), an output] pairs and prints n after each acknowledged add.
    const child = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { FactlogSession } from "factlog/agents";
         const session = new FactlogSession({ path: process.argv[1], sessionId: "crash" });
         for (let n = 0; ; n += 1) {
           await session.addItems([{ role: "user", content: "message " + n }, ${JSON.stringify(FUNCTION_OUTPUT)}]);
           process.stdout.write((n + 1) + "\\n");
         }`,
        path,
      ],
      { cwd: packageDir, stdio: ["ignore", "pipe", "inherit"] },
    );
    // "close", not "exit": its stdout is read to the end first, so every acknowledged add the
    // child printed before the kill is counted.
    const exited = new Promise<NodeJS.Signals | null>((done) =>
      child.on("close", (_, signal) => done(signal)),
    );
    let acknowledged = 0;
    let buffered = "";
    await new Promise<void>((enough, failed) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split("\n");
        buffered = lines.pop()!;
        for (const line of lines) acknowledged = Number(line);
        if (acknowledged >= 50) {
          child.kill("SIGKILL");
          enough();
        }
      });
      child.on("exit", () => failed(new Error("the child exited before adding 50 pairs")));
    });
    expect(await exited).toBe("SIGKILL");
    // Lines the child wrote before the kill arrive after it: each one is acknowledged too.
    acknowledged = Math.max(acknowledged, ...buffered.split("\n").filter(Boolean).map(Number));
    const reopened = session({ path, sessionId: "crash" });
    const items = await reopened.getItems();
    // Every acknowledged add is there, whole; at most the one in flight follows it.
    expect(items.length % 2).toBe(0);
    expect(items.length / 2).toBeGreaterThanOrEqual(acknowledged);
    expect(items.length / 2).toBeLessThanOrEqual(acknowledged + 1);
    expect(items).toEqual(
      Array.from({ length: items.length / 2 }, (_, n) => [user(n), FUNCTION_OUTPUT]).flat(),
    );
  });
});

describe("FactlogSession across processes", () => {
  test("sessions of one id in three processes add and pop at once", async () => {
    // Two client processes add items while this one pops: every pop removes the item that
    // was the latest when its removal was written (a compare-and-set on the task's revision),
    // and every item is either popped or still there, once.
    const path = await storePath("served");
    const count = 30;
    const s1 = session({ path, sessionId: "shared" });
    await s1.getItems();
    expect((await s1.store()).servedBy).not.toBeNull();
    const children = ["a", "b"].map((name) =>
      spawn(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `import { FactlogSession } from "factlog/agents";
           import { createInterface } from "node:readline";
           const [path, name, count] = process.argv.slice(1);
           const session = new FactlogSession({ path, sessionId: "shared" });
           if ((await session.store()).servedBy === null) throw new Error("not a client");
           await session.getItems();
           process.stdout.write("ready\\n");
           const lines = createInterface({ input: process.stdin });
           for await (const line of lines) if (line === "go") break;
           for (let n = 0; n < Number(count); n += 1) {
             await session.addItems([{ role: "user", content: name + " " + n }]);
           }
           await session.close();
           process.exit(0);`,
          path,
          name,
          String(count),
        ],
        { cwd: packageDir, stdio: ["pipe", "pipe", "inherit"] },
      ),
    );
    const exits = children.map(
      (child) => new Promise<number | null>((done) => child.on("exit", (code) => done(code))),
    );
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((ready) => {
            let out = "";
            child.stdout!.on("data", (chunk: Buffer) => {
              out += chunk.toString();
              if (out.includes("ready\n")) ready();
            });
          }),
      ),
    );
    for (const child of children) child.stdin!.write("go\n");
    const popped: string[] = [];
    for (let n = 0; n < count; n += 1) {
      const got = (await s1.popItem()) as { content: string } | undefined;
      if (got !== undefined) popped.push(got.content);
    }
    expect(await Promise.all(exits)).toEqual([0, 0]);
    const left = ((await s1.getItems()) as Array<{ content: string }>).map((x) => x.content);
    const other = session({ path, sessionId: "shared" }); // a new connection folds the same
    expect(((await other.getItems()) as Array<{ content: string }>).map((x) => x.content)).toEqual(left);
    const events = await taskEvents(await s1.store(), "shared");
    const added = ["a", "b"].flatMap((name) => Array.from({ length: count }, (_, n) => `${name} ${n}`));
    expect([...left, ...popped].sort()).toEqual(added.sort());
    for (const name of ["a", "b"]) {
      const own = left.filter((content) => content.startsWith(name));
      expect(own).toEqual([...own].sort((x, y) => Number(x.split(" ")[1]) - Number(y.split(" ")[1])));
    }
    const live: number[] = [];
    for (const event of events) {
      if (event.type === "record/removed") {
        expect(event.seqs).toEqual([live.at(-1)]); // a pop removed the latest item
        live.pop();
      } else {
        live.push(event.seq);
      }
    }
    expect(live).toHaveLength(left.length);
  });
});

describe("the module", () => {
  test("every export of factlog/agents has TSDoc", () => {
    const source = readFileSync(join(packageDir, "lib", "agents.ts"), "utf8");
    expect(source.startsWith("/**")).toBe(true);
    const exports = [...source.matchAll(/^export (?:const|function|class|interface|type) (\w+)/gm)];
    expect(exports.length).toBeGreaterThan(5);
    for (const found of exports) {
      const before = source.slice(0, found.index).trimEnd();
      expect(before.endsWith("*/"), `${found[1]} has no TSDoc`).toBe(true);
    }
    // And every public member of the class.
    const start = source.indexOf("export class FactlogSession");
    const body = source.slice(start, source.indexOf("\n}\n", start));
    const members = [...body.matchAll(/^ {2}(?:readonly |async |get |static )*(\w+)[(:]/gm)];
    for (const found of members) {
      const before = body.slice(0, found.index).trimEnd();
      expect(before.endsWith("*/"), `FactlogSession.${found[1]} has no TSDoc`).toBe(true);
    }
  });
});
