/**
 * The index of one thread ({@link ThreadIndex}): built from one fold of the thread's events,
 * it holds for each live checkpoint the seq of its record, its parent id and its metadata; for
 * each stored channel version the seqs of the records holding it; for each pending write its
 * seq, task id, index, channel and task path. Values themselves stay in the log.
 *
 * @module
 */

import {
  compareWritesSortKeys,
  writesSortKey,
  type CheckpointMetadata,
} from "@langchain/langgraph-checkpoint";
import type { Task } from "../index.js";
import type { CheckpointRecord, WritesRecord } from "./records.js";

/** One live checkpoint of a thread's index. */
export interface CheckpointEntry {
  /** Every live put of this id, oldest first: the last one counts (usually one). */
  versions: Array<{ seq: number; parentId: string | null; metadata: CheckpointMetadata }>;
}

/** One pending write of a thread's index. */
export interface WriteEntry {
  seq: number;
  taskId: string;
  idx: number;
  channel: string;
  taskPath: string;
}

/** A checkpoint's place in its thread: namespace and id. */
export type Place = readonly [ns: string, checkpointId: string];

/** The index of one thread: its task and its live checkpoints, channel versions and writes. */
export class ThreadIndex {
  /** The task's revision through the last event folded. */
  revision = 0;
  /** The seq of the last event folded (0: none yet). */
  lastSeq = 0;
  /** Settles when the operation holding the thread ends. */
  lock: Promise<void> = Promise.resolve();
  /** namespace -> checkpoint id -> entry. */
  readonly checkpoints = new Map<string, Map<string, CheckpointEntry>>();
  /** namespace -> the greatest live checkpoint id. */
  readonly newest = new Map<string, string>();
  /** namespace -> channel version key -> the seqs of the records holding it, oldest first. */
  readonly channels = new Map<string, Map<string, number[]>>();
  /** place key -> (task id, idx) key -> write. */
  readonly writes = new Map<string, Map<string, WriteEntry>>();

  constructor(
    readonly threadId: string,
    readonly task: Task,
  ) {}

  /** Whether the thread holds any live checkpoint or write. */
  get empty(): boolean {
    return this.checkpoints.size === 0 && this.writes.size === 0;
  }

  /** Folds in a checkpoint record put at `seq`, whose metadata the serde read as `metadata`. */
  addCheckpoint(seq: number, record: CheckpointRecord, metadata: CheckpointMetadata): void {
    const ns = record.checkpoint_ns;
    const id = record.checkpoint_id;
    let entries = this.checkpoints.get(ns);
    if (entries === undefined) {
      entries = new Map();
      this.checkpoints.set(ns, entries);
    }
    let entry = entries.get(id);
    if (entry === undefined) {
      entry = { versions: [] };
      entries.set(id, entry);
    }
    entry.versions.push({ seq, parentId: record.parent_checkpoint_id ?? null, metadata });
    let channels = this.channels.get(ns);
    if (channels === undefined) {
      channels = new Map();
      this.channels.set(ns, channels);
    }
    for (const stored of record.channel_values) {
      const key = channelKey(stored.channel, stored.version);
      const seqs = channels.get(key);
      if (seqs === undefined) {
        channels.set(key, [seq]);
      } else {
        seqs.push(seq);
      }
    }
    const newest = this.newest.get(ns);
    if (newest === undefined || id > newest) {
      this.newest.set(ns, id);
    }
  }

  /** Folds in a writes record put at `seq`. */
  addWrites(seq: number, record: WritesRecord): void {
    const key = placeKey(record.checkpoint_ns, record.checkpoint_id);
    let stored = this.writes.get(key);
    if (stored === undefined) {
      stored = new Map();
      this.writes.set(key, stored);
    }
    for (const write of record.writes) {
      const at = writeKey(record.task_id, write.idx);
      // A regular write (idx >= 0) is stored once: a repeated one is ignored. A special one
      // (an error, an interrupt, ...: a negative idx) replaces the earlier one.
      if (write.idx >= 0 && stored.has(at)) {
        continue;
      }
      stored.set(at, {
        seq,
        taskId: record.task_id,
        idx: write.idx,
        channel: write.channel,
        taskPath: record.task_path ?? "",
      });
    }
  }

  /** Drops the checkpoint puts (and the channel versions they hold) whose seq is `removed`. */
  removeCheckpoints(removed: (seq: number) => boolean): void {
    for (const [ns, entries] of this.checkpoints) {
      for (const [id, entry] of entries) {
        entry.versions = entry.versions.filter((version) => !removed(version.seq));
        if (entry.versions.length === 0) {
          entries.delete(id);
        }
      }
      if (entries.size === 0) {
        this.checkpoints.delete(ns);
      }
    }
    // Channel values live in checkpoint records: they go with them.
    for (const [ns, channels] of this.channels) {
      for (const [key, seqs] of channels) {
        const kept = seqs.filter((seq) => !removed(seq));
        if (kept.length === 0) {
          channels.delete(key);
        } else {
          channels.set(key, kept);
        }
      }
      if (channels.size === 0) {
        this.channels.delete(ns);
      }
    }
    this.newest.clear();
    for (const [ns, entries] of this.checkpoints) {
      let newest: string | undefined;
      for (const id of entries.keys()) {
        if (newest === undefined || id > newest) {
          newest = id;
        }
      }
      this.newest.set(ns, newest!);
    }
  }

  /** Drops the writes whose seq is `removed`. */
  removeWrites(removed: (seq: number) => boolean): void {
    for (const [key, stored] of this.writes) {
      for (const [at, write] of stored) {
        if (removed(write.seq)) {
          stored.delete(at);
        }
      }
      if (stored.size === 0) {
        this.writes.delete(key);
      }
    }
  }

  /** The live writes of one checkpoint, in `writesSortKey` order. */
  sortedWrites(ns: string, checkpointId: string): WriteEntry[] {
    const stored = this.writes.get(placeKey(ns, checkpointId));
    if (stored === undefined) {
      return [];
    }
    return [...stored.values()].sort((a, b) =>
      compareWritesSortKeys(
        writesSortKey(a.taskPath, a.taskId, a.idx),
        writesSortKey(b.taskPath, b.taskId, b.idx),
      ),
    );
  }
}

/** A checkpoint place as one map key. */
export function placeKey(ns: string, checkpointId: string): string {
  return `${ns}\u0000${checkpointId}`;
}

/** A channel version as one map key (`1` and `"1"` stay apart). */
export function channelKey(channel: string, version: unknown): string {
  return `${channel}\u0000${JSON.stringify(version)}`;
}

/** A write's (task id, idx) as one map key. */
export function writeKey(taskId: string, idx: number): string {
  return `${taskId}\u0000${idx}`;
}
