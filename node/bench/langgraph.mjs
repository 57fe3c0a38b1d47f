// Part 3: the LangGraph.js savers on the agent-session workload as LangGraph hands it to a
// checkpointer, one thread per session, driven through the BaseCheckpointSaver API.
//
// Per turn: the user's message (360 bytes) as a pending write, then the input checkpoint; per
// step the model's message with its tool call (24-byte query) as a write and a checkpoint,
// the tool's result (960 bytes, the workload's ~1 KiB result) as a write and a checkpoint;
// then the final answer (200 bytes) as a write and the turn's last checkpoint. Messages are
// @langchain/core's HumanMessage, AIMessage and ToolMessage, and every checkpoint holds the
// whole conversation so far in its `messages` channel, as a MessagesAnnotation graph's do.
// Streamed tokens are not checkpointed by LangGraph, so no delta is written here.
//
// Phases, each timed per call:
// - put: the session's `put`s (and, separately, its `putWrites`), in order;
// - get: `getTuple` of the thread's latest checkpoint (no checkpoint_id), then of checkpoints
//   by id, spread evenly over the thread;
// - list: `list` of the thread with `limit: 10`, and one `list` of the whole thread.

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { Text } from "./workload.mjs";

const USER_TEXT_BYTES = 360;
const QUERY_BYTES = 24;
const TOOL_OUTPUT_BYTES = 960;
const ANSWER_BYTES = 200;

/** A checkpoint id: UUID-shaped, fixed width, increasing with `n` (as uuid6 ids are). */
function checkpointId(seed, n) {
  const hex = n.toString(16).padStart(12, "0");
  return `${seed.toString(16).padStart(8, "0").slice(-8)}-0000-6000-8000-${hex}`;
}

/** The saver calls of one session: `{ kind: "writes", channel, values, taskId }` and
 * `{ kind: "put", checkpoint, metadata, newVersions }`, in order. */
export function checkpointCalls(shape, seed) {
  const text = new Text(seed);
  const messages = [];
  const calls = [];
  let step = -1;
  let version = 0;
  const put = (source) => {
    version++;
    step++;
    calls.push({
      kind: "put",
      checkpoint: {
        v: 4,
        id: checkpointId(seed, step + 1),
        ts: new Date(Date.UTC(2025, 5, 15, 12, 0, 0, step)).toISOString(),
        channel_values: { messages: [...messages] },
        channel_versions: { __start__: 1, messages: version },
        versions_seen: { agent: { messages: version - 1 }, tools: { messages: version - 1 } },
      },
      metadata: { source, step, parents: {} },
      newVersions: { messages: version },
    });
  };
  const write = (message, taskId) => {
    calls.push({ kind: "writes", channel: "messages", values: [message], taskId });
    messages.push(message);
  };
  for (let turn = 0; turn < shape.turns; turn++) {
    write(new HumanMessage({ content: text.words(USER_TEXT_BYTES), id: `user-${turn}` }), `input-${turn}`);
    put("input");
    for (let s = 0; s < shape.steps; s++) {
      const callId = `call-${turn}-${s}`;
      write(
        new AIMessage({
          content: "",
          id: `ai-${turn}-${s}`,
          tool_calls: [{ id: callId, name: "search", args: { query: text.words(QUERY_BYTES) } }],
        }),
        `agent-${turn}-${s}`,
      );
      put("loop");
      write(
        new ToolMessage({ content: text.words(TOOL_OUTPUT_BYTES), tool_call_id: callId, id: `tool-${turn}-${s}` }),
        `tools-${turn}-${s}`,
      );
      put("loop");
    }
    write(new AIMessage({ content: text.words(ANSWER_BYTES), id: `ai-${turn}-final` }), `agent-${turn}-final`);
    put("loop");
  }
  return calls;
}

const now = () => process.hrtime.bigint();

/**
 * Drives one session through `saver` on thread `threadId` and reads it back. Returns
 * seconds per phase and call counts:
 * `{ put, putWrites, getLatest, getById, list10, listAll, counts }`.
 */
export async function driveSaver(saver, calls, threadId, reads) {
  let config = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
  const totals = { put: 0n, putWrites: 0n, getLatest: 0n, getById: 0n, list10: 0n, listAll: 0n };
  const counts = { put: 0, putWrites: 0, getLatest: 0, getById: 0, list10: 0, listAll: 0, listAllTuples: 0 };
  const ids = [];
  for (const call of calls) {
    if (call.kind === "put") {
      const start = now();
      config = await saver.put(config, call.checkpoint, call.metadata, call.newVersions);
      totals.put += now() - start;
      counts.put++;
      ids.push(call.checkpoint.id);
    } else {
      if (config.configurable.checkpoint_id === undefined) continue; // No checkpoint yet.
      const writes = call.values.map((value) => [call.channel, value]);
      const start = now();
      await saver.putWrites(config, writes, call.taskId);
      totals.putWrites += now() - start;
      counts.putWrites++;
    }
  }
  const thread = { configurable: { thread_id: threadId, checkpoint_ns: "" } };
  for (let i = 0; i < reads.gets; i++) {
    const start = now();
    const tuple = await saver.getTuple(thread);
    totals.getLatest += now() - start;
    counts.getLatest++;
    if (tuple?.checkpoint.id !== ids[ids.length - 1]) throw new Error("getTuple missed the latest checkpoint");
  }
  for (let i = 0; i < reads.gets; i++) {
    const id = ids[Math.floor(((i + 0.5) * ids.length) / reads.gets)];
    const start = now();
    const tuple = await saver.getTuple({ configurable: { ...thread.configurable, checkpoint_id: id } });
    totals.getById += now() - start;
    counts.getById++;
    if (tuple?.checkpoint.id !== id) throw new Error(`getTuple missed checkpoint ${id}`);
  }
  for (let i = 0; i < reads.lists; i++) {
    let listed = 0;
    const start = now();
    for await (const _ of saver.list(thread, { limit: 10 })) listed++;
    totals.list10 += now() - start;
    counts.list10++;
    if (listed !== Math.min(10, ids.length)) throw new Error(`list with limit 10 gave ${listed}`);
  }
  if (reads.listAll) {
    let listed = 0;
    const start = now();
    for await (const _ of saver.list(thread)) listed++;
    totals.listAll += now() - start;
    counts.listAll++;
    counts.listAllTuples = listed;
    if (listed !== ids.length) throw new Error(`list gave ${listed} of ${ids.length} checkpoints`);
  }
  const seconds = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, Number(v) / 1e9]));
  return { seconds, counts };
}
