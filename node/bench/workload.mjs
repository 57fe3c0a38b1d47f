// The agent-session workload (/work/shared/mission/workload.md) in JavaScript, with the shape,
// sizes and text of bench/src/workload.rs: the same seed gives the same words, so every
// backend of this bench writes the same bytes, and they are the bytes the Rust benches write.
//
// Per turn: turn/start, a user/message of 360 bytes of text, then per step step/start,
// `tokens` assistant/delta fragments of 24 bytes, a tool/call (24-byte query), a tool/result
// (output text of result_bytes - 64 bytes) and step/end; then turn/end. Critical events
// (synced before the append returns): tool/call, tool/result, turn/end.

/** Bytes of text of each streamed delta (bench/src/workload.rs `DELTA_TEXT_BYTES`). */
export const DELTA_TEXT_BYTES = 24;
const USER_MESSAGE_TEXT_BYTES = 360;
const TOOL_QUERY_BYTES = 24;
const TOOL_RESULT_OVERHEAD_BYTES = 64;

/** The fixed clock of the Rust benches, so JSONL and SQLite rows are the same every run. */
export const FIXED_CLOCK_US = 1_750_000_000_000_000;

/** The workload's default shape: 50 turns x 4 steps x 200 deltas, ~1 KiB results. */
export const DEFAULT_SHAPE = Object.freeze({
  turns: 50,
  steps: 4,
  tokens: 200,
  deltaBytes: DELTA_TEXT_BYTES,
  resultBytes: 1024,
});

const WORDS = [
  "the", "agent", "reads", "file", "and", "then", "calls", "tool", "with", "query", "result",
  "token", "stream", "model", "plan", "step", "user", "asks", "for", "report", "data", "rows",
  "table", "search", "found", "three", "matches", "in", "log", "segment", "write", "sync",
];

const MASK_64 = (1n << 64n) - 1n;

/** Deterministic pseudo-random words: xorshift64* seeded as `workload::Text::new`. */
export class Text {
  #state;

  constructor(seed) {
    this.#state = ((BigInt(seed) * 0x9e3779b97f4a7c15n) & MASK_64) | 1n;
  }

  #next() {
    let x = this.#state;
    x ^= x >> 12n;
    x ^= (x << 25n) & MASK_64;
    x ^= x >> 27n;
    this.#state = x;
    return (x * 0x2545f4914f6cdd1dn) & MASK_64;
  }

  /** Exactly `bytes` bytes of ASCII words separated by spaces. */
  words(bytes) {
    let out = "";
    while (out.length < bytes) {
      out += WORDS[Number(this.#next() >> 59n)] + " ";
    }
    return out.slice(0, bytes);
  }
}

/** Counts of one session of `shape`. */
export function counts(shape) {
  const { turns, steps, tokens } = shape;
  return {
    events: turns * (3 + steps * (tokens + 4)),
    deltas: turns * steps * tokens,
    critical: turns * (2 * steps + 1),
  };
}

/**
 * The actions of one session, as `workload::session` builds them. Each action is one of
 * - `{ kind: "delta", text }`: one assistant/delta;
 * - `{ kind: "append", event, durability, critical }`: one event with its durability class;
 * - `{ kind: "close", events: [toolResult, stepEnd] }`: a step's close (critical: its
 *   tool/result is synced, and its step/end goes with it).
 * Events are protocol objects without `task` (`{ type, ...body }`), body fields in the order
 * the Rust types serialize them.
 */
export function session(shape, seed) {
  const text = new Text(seed);
  const outputBytes = Math.max(0, shape.resultBytes - TOOL_RESULT_OVERHEAD_BYTES);
  const actions = [];
  const append = (event, durability) =>
    actions.push({ kind: "append", event, durability, critical: durability === "synced" });
  for (let turn = 0; turn < shape.turns; turn++) {
    append({ type: "turn/start" }, "buffered");
    append({ type: "user/message", text: text.words(USER_MESSAGE_TEXT_BYTES) }, "flushed");
    for (let step = 0; step < shape.steps; step++) {
      append({ type: "step/start" }, "buffered");
      for (let token = 0; token < shape.tokens; token++) {
        actions.push({ kind: "delta", text: text.words(shape.deltaBytes) });
      }
      const callId = `call-${seed}-${turn}-${step}`;
      append(
        {
          type: "tool/call",
          call_id: callId,
          tool: "search",
          effect: "read_only",
          args: { query: text.words(TOOL_QUERY_BYTES) },
        },
        "synced",
      );
      actions.push({
        kind: "close",
        events: [
          { type: "tool/result", call_id: callId, outcome: "ok", output: { text: text.words(outputBytes) } },
          { type: "step/end" },
        ],
      });
    }
    append({ type: "turn/end" }, "synced");
  }
  let events = 0;
  for (const action of actions) events += action.kind === "close" ? 2 : 1;
  if (events !== counts(shape).events) {
    throw new Error(`the session has ${events} events, not the workload's ${counts(shape).events}`);
  }
  return { task: `session-${seed}`, actions };
}
