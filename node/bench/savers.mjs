// The savers of part 3, each opened on a fresh directory, and their durabilities.
//
// - factlog synced: FactlogSaver with the `synced` tier: every put and putWrites fdatasynced
//   before its promise resolves.
// - sqlite FULL: SqliteSaver on a better-sqlite3 database, WAL (the saver's own setup sets
//   it), `synchronous = FULL` (SQLite's default, and so the saver's): every commit (one per
//   put, one per putWrites) syncs the WAL. The equal-durability peer of factlog synced.
// - factlog flushed: FactlogSaver with the `flushed` tier: in the kernel before the promise
//   resolves (survives a crash of the process, not a power loss).
// - sqlite NORMAL: WAL, `synchronous = NORMAL`: commits are written to the WAL but not synced
//   (survive a crash of the process): the equal-durability peer of factlog flushed.

import path from "node:path";
import Database from "better-sqlite3";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { Store } from "factlog";

let factlogLangGraph;

/** Loads `factlog/langgraph`; returns null, or the reason it cannot be used. */
export async function loadFactlogSaver() {
  try {
    factlogLangGraph = await import("factlog/langgraph");
    if (typeof factlogLangGraph.FactlogSaver !== "function") {
      return "factlog/langgraph exports no FactlogSaver";
    }
    return null;
  } catch (error) {
    return `cannot import factlog/langgraph: ${error instanceof Error ? error.message : error}`;
  }
}

async function openFactlog(dir, durability) {
  const { FactlogSaver } = factlogLangGraph;
  const store = await Store.open(path.join(dir, "store"));
  const saver = new FactlogSaver(store, { durability });
  return { saver, close: () => store.close() };
}

async function openSqlite(dir, synchronous) {
  const db = new Database(path.join(dir, "checkpoints.sqlite"));
  const saver = new SqliteSaver(db);
  saver.setup();
  db.pragma(`synchronous = ${synchronous}`);
  const mode = db.pragma("synchronous", { simple: true });
  const expected = { FULL: 2, NORMAL: 1 }[synchronous];
  if (mode !== expected) throw new Error(`SQLite synchronous is ${mode}, not ${synchronous}`);
  return { saver, close: async () => db.close() };
}

/** The savers by name, with what each one's durability is. */
export const SAVERS = {
  "factlog synced": {
    open: (dir) => openFactlog(dir, "synced"),
    durability: "factlog tier synced: fdatasync before each put/putWrites resolves",
  },
  "sqlite FULL": {
    open: (dir) => openSqlite(dir, "FULL"),
    durability: "SqliteSaver, WAL, synchronous=FULL: the WAL synced at each commit",
  },
  "factlog flushed": {
    open: (dir) => openFactlog(dir, "flushed"),
    durability: "factlog tier flushed: written to the kernel before each call resolves, no sync",
  },
  "sqlite NORMAL": {
    open: (dir) => openSqlite(dir, "NORMAL"),
    durability: "SqliteSaver, WAL, synchronous=NORMAL: commits written to the WAL, not synced",
  },
};

/** The pairs of equal durability: [factlog, sqlite]. */
export const SAVER_PAIRS = [
  ["factlog synced", "sqlite FULL"],
  ["factlog flushed", "sqlite NORMAL"],
];
