// Part 1: one agent session written through each backend, timed from the first event to the
// closed file (opening and creating the file or store is outside the timing).
//
// - factlog: `task.delta(text)` for deltas, `await task.append(event, { durability })` for
//   the others (turn/start and step/start buffered, user/message flushed, tool/call and
//   turn/end synced), and each step's tool/result and step/end as one
//   `await task.appendBatch(...)` (synced, the strongest of the two: step/end's type is
//   synced by default and may not be appended for less, so appended alone it would cost a
//   sync of its own that the workload does not ask for). Then `await store.close()`.
// - sqlite: better-sqlite3, WAL, synchronous=FULL, one row per event, one transaction open
//   at a time and committed at each critical event (tool/call, tool/result, turn/end).
// - jsonl: one `fs.writeSync` per event line into one file, `fs.fdatasyncSync` after each
//   critical event's line.
//
// Each line or row is the event with its task and the fixed clock's timestamp, serialized
// inside the timing, as a user's harness would.

import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { Store } from "factlog";
import { FIXED_CLOCK_US } from "./workload.mjs";

const now = () => process.hrtime.bigint();
const seconds = (from, to) => Number(to - from) / 1e9;

/** Bytes of the files under `dir`. */
export function diskBytes(dir) {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const at = path.join(dir, entry.name);
    total += entry.isDirectory() ? diskBytes(at) : fs.statSync(at).size;
  }
  return total;
}

/** factlog through the package. Returns `{ seconds, syncsRequested, bytes }`. */
export async function runFactlog(dir, workload) {
  const store = await Store.open(path.join(dir, "store"));
  const task = store.task(workload.task);
  let syncsRequested = 0;
  const start = now();
  for (const action of workload.actions) {
    if (action.kind === "delta") {
      task.delta(action.text);
    } else if (action.kind === "append") {
      await task.append(action.event, { durability: action.durability });
      if (action.critical) syncsRequested++;
    } else {
      await task.appendBatch(action.events, { durability: "synced" });
      syncsRequested++;
    }
  }
  await store.close();
  const end = now();
  return { seconds: seconds(start, end), syncsRequested, bytes: diskBytes(path.join(dir, "store")) };
}

function eventOf(action) {
  return action.kind === "delta" ? { type: "assistant/delta", text: action.text } : action.event;
}

/** better-sqlite3, WAL, synchronous=FULL. */
export async function runSqlite(dir, workload) {
  const file = path.join(dir, "events.sqlite");
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(
    "CREATE TABLE events (seq INTEGER PRIMARY KEY, task TEXT NOT NULL, type TEXT NOT NULL, " +
      "timestamp_us INTEGER NOT NULL, body TEXT NOT NULL)",
  );
  const insert = db.prepare("INSERT INTO events (task, type, timestamp_us, body) VALUES (?, ?, ?, ?)");
  const timestamp = BigInt(FIXED_CLOCK_US);
  const begin = db.prepare("BEGIN");
  const commit = db.prepare("COMMIT");
  const row = (event) => {
    const { type, ...body } = event;
    insert.run(workload.task, type, timestamp, JSON.stringify(body));
  };
  let commits = 0;
  const start = now();
  begin.run();
  for (const action of workload.actions) {
    if (action.kind === "close") {
      row(action.events[0]);
      commit.run();
      commits++;
      begin.run();
      row(action.events[1]);
    } else {
      row(eventOf(action));
      if (action.kind === "append" && action.critical) {
        commit.run();
        commits++;
        begin.run();
      }
    }
  }
  commit.run(); // The last event is a turn/end: this transaction is empty.
  db.close();
  const end = now();
  return { seconds: seconds(start, end), syncsRequested: commits, bytes: diskBytes(dir) };
}

/** One JSONL file: writeSync per line, fdatasyncSync after each critical event. */
export async function runJsonl(dir, workload) {
  const file = path.join(dir, "events.jsonl");
  const fd = fs.openSync(file, "a");
  const prefix = `{"task":${JSON.stringify(workload.task)},"type":`;
  const line = (event) => {
    const { type, ...body } = event;
    const fields = JSON.stringify(body);
    const rest = fields === "{}" ? "}" : `,${fields.slice(1)}`;
    fs.writeSync(fd, `${prefix}${JSON.stringify(type)},"timestamp_us":${FIXED_CLOCK_US}${rest}\n`);
  };
  let syncs = 0;
  const start = now();
  for (const action of workload.actions) {
    if (action.kind === "close") {
      line(action.events[0]);
      fs.fdatasyncSync(fd);
      syncs++;
      line(action.events[1]);
    } else {
      line(eventOf(action));
      if (action.kind === "append" && action.critical) {
        fs.fdatasyncSync(fd);
        syncs++;
      }
    }
  }
  fs.closeSync(fd);
  const end = now();
  return { seconds: seconds(start, end), syncsRequested: syncs, bytes: diskBytes(dir) };
}

export const SESSION_BACKENDS = { factlog: runFactlog, sqlite: runSqlite, jsonl: runJsonl };
