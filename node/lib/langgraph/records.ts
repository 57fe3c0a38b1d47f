/**
 * The records of the LangGraph checkpointer as the store holds them: the event kinds, the task
 * id of a thread ({@link taskIdFor}), and the shapes of the `value` of a checkpoint record
 * ({@link CheckpointRecord}) and of a writes record ({@link WritesRecord}), with the stored
 * values they carry ({@link StoredValue}). The mapping itself is documented in
 * `factlog/langgraph`'s module documentation.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** The `kind` of the `record/put` events that hold checkpoints. */
export const CHECKPOINT_KIND = "langgraph/checkpoint";

/** The `kind` of the `record/put` events that hold one `putWrites` call. */
export const WRITES_KIND = "langgraph/writes";

/** Task ids of threads whose id fits: this prefix, then the thread id. */
export const TASK_PREFIX = "langgraph:";

/** Task ids of threads whose id is too long: this prefix, then the SHA-256 hex digest of the
 * thread id's UTF-8 bytes. */
export const TASK_DIGEST_PREFIX = "langgraph#";

/** The longest task id the store takes, in bytes of UTF-8 (`format-spec/events.md`). */
const TASK_ID_BYTES_MAX = 128;

/**
 * A serialized value as a record holds it: what `serde.dumpsTyped` returned, as structure
 * (`value`, the JSON value itself, when the type is `"json"` and its text is plain JSON) or as
 * bytes in standard base64 (`base64`) otherwise.
 */
export type StoredValue = { type: string; value: unknown } | { type: string; base64: string };

/** One channel value of a {@link CheckpointRecord}: the value of `channel` at `version`. */
export type StoredChannelValue = StoredValue & { channel: string; version: number | string };

/** One pending write of a {@link WritesRecord}. */
export type StoredWrite = StoredValue & { idx: number; channel: string };

/** The `value` of a `langgraph/checkpoint` record. */
export interface CheckpointRecord {
  /** The LangGraph thread. */
  thread_id: string;
  /** The checkpoint namespace (`""` at the root graph). */
  checkpoint_ns: string;
  /** The checkpoint's id (also the event's `key`). */
  checkpoint_id: string;
  /** The id of the checkpoint it follows, or `null`. */
  parent_checkpoint_id: string | null;
  /** The checkpoint without `channel_values`. */
  checkpoint: StoredValue;
  /** The checkpoint's metadata. */
  metadata: StoredValue;
  /** The values of the channels `put`'s `newVersions` named, at those versions. */
  channel_values: StoredChannelValue[];
}

/** The `value` of a `langgraph/writes` record: one `putWrites` call. */
export interface WritesRecord {
  /** The LangGraph thread. */
  thread_id: string;
  /** The checkpoint namespace. */
  checkpoint_ns: string;
  /** The checkpoint the writes are pending for (also the event's `key`). */
  checkpoint_id: string;
  /** The LangGraph task that wrote them. */
  task_id: string;
  /** The task's path (`""` when none was given), the first part of the writes' order. */
  task_path: string;
  /** The writes, each with its index (negative for LangGraph's special channels). */
  writes: StoredWrite[];
}

/** The factlog task id that holds LangGraph thread `threadId`: `"langgraph:" + threadId` when
 * that is at most 128 bytes of UTF-8, otherwise `"langgraph#"` and the SHA-256 hex digest of
 * the thread id's UTF-8 bytes. */
export function taskIdFor(threadId: string): string {
  const plain = TASK_PREFIX + threadId;
  if (Buffer.byteLength(plain, "utf8") <= TASK_ID_BYTES_MAX) {
    return plain;
  }
  return TASK_DIGEST_PREFIX + createHash("sha256").update(threadId, "utf8").digest("hex");
}
