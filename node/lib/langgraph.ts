/**
 * A LangGraph.js checkpointer on a factlog store: {@link FactlogSaver}, exported from
 * `factlog/langgraph` (it needs `@langchain/langgraph-checkpoint` and `@langchain/core`).
 *
 * ```ts
 * import { FactlogSaver } from "factlog/langgraph";
 * const saver = await FactlogSaver.fromPath("agent.factlog");
 * const graph = builder.compile({ checkpointer: saver });
 * await graph.invoke(inputs, { configurable: { thread_id: "t1" } });
 * await saver.close();
 * ```
 *
 * ## Storage mapping
 *
 * Each LangGraph thread is one factlog task, whose id is {@link taskIdFor}`(thread_id)`:
 * `"langgraph:" + thread_id` when that is at most 128 bytes of UTF-8, otherwise
 * `"langgraph#" + sha256(thread_id as UTF-8)` in lowercase hex (the two prefixes cannot collide,
 * and every record also names its `thread_id`, which reads check). The mapping is the Python
 * adapter's (`factlog.langgraph`), with three differences that LangGraph.js asks for or allows:
 * channel values are stored once per version, serialized values keep their structure, and a
 * checkpoint is never a `record/blob` (the Python saver keeps its serialized bytes in one).
 *
 * - A checkpoint is one `record/put` event of kind `langgraph/checkpoint` whose `key` is the
 *   checkpoint id and whose `value` is a {@link CheckpointRecord}: `thread_id`,
 *   `checkpoint_ns`, `checkpoint_id`, `parent_checkpoint_id`, `checkpoint` (the checkpoint
 *   without its channel values), `metadata`, and `channel_values`: one entry
 *   `{channel, version, ...}` for each channel that `put`'s `newVersions` names, holding the
 *   value of that version. A channel the checkpoint did not change is not stored again: a read
 *   takes each channel's value from the record that stored its version (as LangGraph's own
 *   Postgres saver does with its blobs table).
 * - One `putWrites` call is one `record/put` event of kind `langgraph/writes` (`key`: the
 *   checkpoint id) whose `value` is a {@link WritesRecord}: `thread_id`, `checkpoint_ns`,
 *   `checkpoint_id`, `task_id`, `task_path`, and `writes`: `[{idx, channel, ...}]`.
 * - A serialized value (a {@link StoredValue}) is what `serde.dumpsTyped` returned, kept as
 *   structure: `{"type": "json", "value": V}` with `V` the JSON value itself when the type is
 *   `"json"`; `{"type": T, "base64": B}` otherwise, and also for JSON that would not come back
 *   byte for byte (text that is not `JSON.stringify`'s own output), that holds a `"$secret"`
 *   key (the store would replace the object by a reference: `format-spec/events.md`, Secrets),
 *   or a lone surrogate (which the store's JSON refuses). `factlog dump --json` therefore shows
 *   a checkpoint's channel values and metadata as they are.
 * - `deleteThread` appends two `record/removed` events (one per kind, in one synced atomic
 *   batch) whose `through_seq` is the thread's last event: the log stays append-only and reads
 *   fold a thread's events applying them. A removal naming `seqs` (written by another tool) is
 *   applied the same way; a re-put checkpoint whose last put is removed counts again with the
 *   put before it.
 * - `factlog state` shows each thread's task with its revision and nothing else: the store
 *   does not interpret records. Writes are not mapped onto typed events (`user/message`,
 *   `tool/call`, ...): a forked or replayed thread may carry the same tool-call ids again,
 *   which the typed events refuse.
 *
 * ## Reading and memory
 *
 * The saver keeps, per thread it has used, an index built from one fold of the thread's events
 * and kept current by its own appends (folded again from where it stopped when the task's
 * revision moved behind it: another saver appended to the same thread, in this process or,
 * through a served store, in another): for each live checkpoint the seq of its record, its
 * parent id and its decoded metadata (for `list`'s filter); for each stored channel version
 * the seq of the record holding it; for each pending write its seq, task id, index, channel and
 * task path. Values themselves are read back from the log, through one cache of record values
 * shared by the saver's threads, least recently used out, bounded by `valueCacheBytes`
 * (default 32 MiB, measured as JSON text; a record this process wrote counts twice, since the
 * serde's text of each value stays beside its structure so that reading it back hands the
 * serde that text instead of writing it out again). Records missing from the cache are read
 * from the log in runs of nearby seqs, each in pages no longer than the run (`pageEvents`), so
 * reading one checkpoint reads its records and not the ones after them. At most `threadsCached` threads (default 256) are
 * indexed at once, least recently used out; an evicted thread is folded again on its next use.
 * So memory is bounded by those threads' live checkpoints and channel versions (about the size
 * of their metadata each) plus the cache, not by the store. The first use of a thread in a
 * process reads the thread's events from the log's start (the store skips other tasks' events
 * by their envelope). `list` without a `thread_id` visits every LangGraph thread of the store,
 * and `list` sorts the ids of every checkpoint it matches before reading them back 64 at a time.
 *
 * ## Limits
 *
 * A checkpoint's record, or one `putWrites` call, must fit one event body (4 MiB of JSON); a
 * bigger one is refused with `LimitExceeded` and nothing is stored. A store opened with
 * `refuseUnmarkedSecrets` refuses (`UnmarkedSecret`) a checkpoint or write holding a
 * credential-shaped string, as it refuses any other event; without it the append only warns.
 *
 * ## Durability
 *
 * LangGraph tells the saver its durability mode (`graph.invoke(..., { durability })`, in
 * `config.configurable.__pregel_durability`, absent meaning LangGraph's default `"async"`).
 * Without the `durability` option the saver maps it onto factlog's tiers:
 *
 * - `sync` -> `synced`: the checkpoint is on stable storage (`fdatasync`) before the next step
 *   starts; it survives a power loss.
 * - `async` -> `flushed`: LangGraph runs the next step while the save is in flight; the save
 *   resolves once the record is in the kernel (it survives a process crash; the group commit
 *   makes it power-loss safe within milliseconds).
 * - `exit` -> `synced`: LangGraph saves only when the run ends; that one save is synced.
 *
 * The `durability` option (`"synced"`, `"flushed"`, `"buffered"` or `"replicated"`) fixes the
 * tier of every checkpoint and write whatever the mode. Deletions are always synced.
 *
 * @module
 */

export {
  CHECKPOINT_KIND,
  TASK_DIGEST_PREFIX,
  TASK_PREFIX,
  WRITES_KIND,
  taskIdFor,
  type CheckpointRecord,
  type StoredChannelValue,
  type StoredValue,
  type StoredWrite,
  type WritesRecord,
} from "./langgraph/records.js";
export type { FactlogSaverOpenOptions, FactlogSaverOptions } from "./langgraph/config.js";
export { FactlogSaver } from "./langgraph/saver.js";
