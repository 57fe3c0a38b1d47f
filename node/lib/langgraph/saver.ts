/**
 * The LangGraph.js checkpointer itself: {@link FactlogSaver}, which keeps an index per thread
 * ({@link ThreadIndex}) current with the thread's task and reads record values back through a
 * {@link ValueCache}. The storage mapping, the memory bound and the durability table are in
 * `factlog/langgraph`'s module documentation.
 *
 * @module
 */

import assert from "node:assert";
import { isDeepStrictEqual } from "node:util";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import {
  CorruptEvent,
  InvalidOptions,
  Store,
  type AppendReply,
  type Durability,
  type Event,
  type StoredEvent,
} from "../index.js";
import { dumpValue, loadValue, storedText } from "./codec.js";
import {
  checkSaverOptions,
  pointer,
  threadIdOf,
  tierOf,
  type FactlogSaverOpenOptions,
  type FactlogSaverOptions,
} from "./config.js";
import {
  CHECKPOINT_KIND,
  TASK_DIGEST_PREFIX,
  TASK_PREFIX,
  WRITES_KIND,
  taskIdFor,
  type CheckpointRecord,
  type StoredChannelValue,
  type StoredValue,
  type WritesRecord,
} from "./records.js";
import {
  ThreadIndex,
  channelKey,
  placeKey,
  writeKey,
  type CheckpointEntry,
  type Place,
  type WriteEntry,
} from "./thread-index.js";
import { ValueCache } from "./value-cache.js";

/** `list` reads back this many checkpoints at a time. */
const LIST_PAGE_CHECKPOINTS = 64;
/** `getDeltaChannelHistory` reads this many ancestors at a time. */
const HISTORY_PAGE_CHECKPOINTS = 16;
/** Two records the saver reads back are read in one pass when at most this many seqs apart,
 * in two passes otherwise. */
const READ_GAP_SEQS = 8;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Room for a record's fields besides its stored values, in the cache's measure. */
const RECORD_FIELDS_BYTES = 512;

/**
 * What a record keeps alive in the value cache, measured by the JSON text of its stored
 * values: twice each one kept as structure (the structure and its text beside it, `codec.ts`),
 * once each one kept as base64; `undefined` for a record of another shape (the cache then
 * measures its JSON text).
 */
function recordBytes(values: readonly unknown[]): number | undefined {
  let bytes = RECORD_FIELDS_BYTES;
  for (const stored of values) {
    if (!isObject(stored) || typeof stored.type !== "string") {
      return undefined;
    }
    if ("base64" in stored) {
      if (typeof stored.base64 !== "string") {
        return undefined;
      }
      bytes += stored.base64.length + RECORD_FIELDS_BYTES;
    } else if (stored.value === undefined) {
      return undefined;
    } else {
      bytes += 2 * storedText(stored as StoredValue & { value: unknown }).length;
      bytes += RECORD_FIELDS_BYTES;
    }
  }
  return bytes;
}

/** {@link recordBytes} of a record value of kind `kind`, whatever its shape. */
function recordValueBytes(kind: unknown, value: unknown): number | undefined {
  if (!isObject(value)) {
    return undefined;
  }
  if (kind === CHECKPOINT_KIND && Array.isArray(value.channel_values)) {
    return recordBytes([value.checkpoint, value.metadata, ...value.channel_values]);
  }
  if (kind === WRITES_KIND && Array.isArray(value.writes)) {
    return recordBytes(value.writes);
  }
  return undefined;
}

/**
 * A LangGraph.js checkpointer storing every thread in a factlog store.
 *
 * {@link FactlogSaver.fromPath} opens (or creates) the store in a directory, or connects to
 * the process serving it, and {@link FactlogSaver.close} closes it; `new FactlogSaver(store)`
 * uses an open {@link Store} and leaves closing it to its owner. The storage mapping, the
 * memory bound and the durability table are in the module's documentation.
 *
 * Implements `getTuple`, `list` (with `filter`, `before`, `limit`), `put`, `putWrites`,
 * `deleteThread` and `getDeltaChannelHistory`. Arguments LangGraph requires and a config
 * lacks are refused with `InvalidOptions`; the store's refusals are its `FactlogError`s.
 */
/** Why a thread written by the Python package's saver is refused. */
const PYTHON_THREAD =
  "this thread was written by the Python package's LangGraph saver, whose records hold " +
  "values in LangGraph's Python serialization (msgpack), which LangGraph.js cannot read: " +
  "read the thread from Python, or give each runtime threads of its own";

export class FactlogSaver extends BaseCheckpointSaver implements AsyncDisposable {
  /** The factlog store the saver writes to. */
  readonly store: Store;
  /** The fixed factlog tier, or `undefined` to follow LangGraph's durability mode. */
  readonly durability: Durability | undefined;
  #ownsStore = false;
  readonly #threadsCached: number;
  readonly #threads = new Map<string, ThreadIndex>();
  readonly #values: ValueCache;

  /** A saver on `store`, an open store it does not own (its `close()` leaves it open). */
  constructor(store: Store, options: FactlogSaverOptions = {}) {
    super(options.serde);
    checkSaverOptions(options);
    this.store = store;
    this.durability = options.durability;
    this.#threadsCached = options.threadsCached ?? 256;
    this.#values = new ValueCache(options.valueCacheBytes ?? 32 * 1024 * 1024);
  }

  /** Opens (or creates) the store in directory `path`, or connects to the process serving
   * it (`Store.open`), and returns a saver that owns it: its `close()` closes the store. */
  static async fromPath(
    path: string,
    options: FactlogSaverOpenOptions = {},
  ): Promise<FactlogSaver> {
    checkSaverOptions(options);
    const store = await Store.open(path, options.open ?? {});
    const saver = new FactlogSaver(store, options);
    saver.#ownsStore = true;
    return saver;
  }

  /** Closes the store if the saver opened it (a store given to the constructor stays open)
   * and forgets the indexes and cached values. Idempotent. */
  async close(): Promise<void> {
    this.#threads.clear();
    this.#values.clear();
    if (this.#ownsStore) {
      await this.store.close();
    }
  }

  /** `await using saver = await FactlogSaver.fromPath(dir)` closes it at the end of the
   * scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ------------------------------------------------------------------- values

  /** `value` serialized by the saver's serde, as a record holds it (see {@link StoredValue}),
   * after the record's own `fields`. */
  async #dump<F extends object>(value: unknown, fields: F): Promise<F & StoredValue> {
    return dumpValue(this.serde, value, fields);
  }

  /** The value a stored value holds, read by the saver's serde. */
  async #load(stored: StoredValue): Promise<unknown> {
    if (stored.type === "msgpack") {
      throw new CorruptEvent(PYTHON_THREAD);
    }
    return loadValue(this.serde, stored);
  }

  // ------------------------------------------------------------------- the index

  /** Runs `work` on the index of `threadId`, caught up with its task's events (unless
   * `catchUp` is false: for an append that does not read the index first, which
   * {@link FactlogSaver.#append} catches up after when it must), holding the thread: the
   * operations of one thread run one at a time, in the order they were called. */
  async #withThread<T>(
    threadId: string,
    work: (thread: ThreadIndex) => Promise<T>,
    catchUp = true,
  ): Promise<T> {
    let thread = this.#threads.get(threadId);
    if (thread === undefined) {
      thread = new ThreadIndex(threadId, this.store.task(taskIdFor(threadId)));
      this.#threads.set(threadId, thread);
      for (const oldest of this.#threads.keys()) {
        if (this.#threads.size <= this.#threadsCached) {
          break;
        }
        this.#threads.delete(oldest);
      }
    } else {
      this.#threads.delete(threadId);
      this.#threads.set(threadId, thread);
    }
    const held = thread;
    const before = held.lock;
    let release!: () => void;
    held.lock = new Promise((resolve) => (release = resolve));
    await before;
    try {
      if (catchUp) {
        await this.#catchUp(held);
      }
      return await work(held);
    } finally {
      release();
    }
  }

  /** Folds the task's events the index has not seen (none when the revision is known). */
  async #catchUp(thread: ThreadIndex): Promise<void> {
    if ((await thread.task.revision()) === thread.revision) {
      return;
    }
    for await (const event of thread.task.events(thread.lastSeq + 1)) {
      await this.#apply(thread, event.seq, event);
      thread.revision = event.revision;
    }
  }

  /** Folds one event of the thread's task into its index (and its value into the cache). */
  async #apply(thread: ThreadIndex, seq: number, event: Event | StoredEvent): Promise<void> {
    thread.lastSeq = Math.max(thread.lastSeq, seq);
    const kind = event.kind;
    if (kind !== CHECKPOINT_KIND && kind !== WRITES_KIND) {
      return;
    }
    if (event.type === "record/blob") {
      // The Python package's saver keeps its checkpoints' serialized bytes in record/blob
      // events (this saver never writes one): its thread is refused.
      const value = event.value;
      if (kind === CHECKPOINT_KIND && isObject(value) && value.thread_id === thread.threadId) {
        throw new CorruptEvent(PYTHON_THREAD);
      }
      return;
    }
    if (event.type === "record/put") {
      const value = event.value;
      // The Python package's saver writes the same kinds, with LangGraph's Python
      // serialization: its thread is refused, as the Python saver refuses this one's.
      if (
        kind === CHECKPOINT_KIND &&
        isObject(value) &&
        value.thread_id === thread.threadId &&
        !("channel_values" in value) &&
        "checkpoint" in value
      ) {
        throw new CorruptEvent(PYTHON_THREAD);
      }
      // A record of another writer that does not have this saver's shape is not folded.
      if (
        !isObject(value) ||
        value.thread_id !== thread.threadId ||
        typeof value.checkpoint_ns !== "string" ||
        typeof value.checkpoint_id !== "string" ||
        (kind === CHECKPOINT_KIND
          ? !Array.isArray(value.channel_values) || !isObject(value.metadata)
          : !Array.isArray(value.writes) || typeof value.task_id !== "string")
      ) {
        return;
      }
      if (kind === CHECKPOINT_KIND) {
        const record = value as unknown as CheckpointRecord;
        this.#values.set(seq, value, recordValueBytes(kind, value));
        const metadata = (await this.#load(record.metadata)) as CheckpointMetadata;
        thread.addCheckpoint(seq, record, metadata);
      } else {
        const record = value as unknown as WritesRecord;
        this.#values.set(seq, value, recordValueBytes(kind, value));
        thread.addWrites(seq, record);
      }
    } else if (event.type === "record/removed") {
      const through = typeof event.through_seq === "number" ? event.through_seq : undefined;
      const seqs = new Set(Array.isArray(event.seqs) ? (event.seqs as number[]) : []);
      const removed = (at: number) => seqs.has(at) || (through !== undefined && at <= through);
      if (kind === CHECKPOINT_KIND) {
        thread.removeCheckpoints(removed);
      } else {
        thread.removeWrites(removed);
      }
    }
  }

  // ------------------------------------------------------------------- appends

  /**
   * Appends `events` to the thread's task as one atomic batch and folds them; the caller holds
   * the thread. Other savers (of this process or of others, through a served store) may append
   * to the same task meanwhile: when the reply's revision shows that events came between what
   * the index folded and this batch, the index folds the log from where it stopped instead,
   * this batch included, so it keeps the log's order. No compare-and-set: it would make a busy
   * thread's writers retry, and a writer could lose every round.
   */
  async #append(thread: ThreadIndex, events: Event[], durability: Durability): Promise<void> {
    let reply: AppendReply;
    if (events.length === 1) {
      reply = await thread.task.append(events[0]!, { durability });
    } else {
      reply = await thread.task.appendBatch(events, { durability });
    }
    if (reply.revision !== thread.revision + events.length) {
      await this.#catchUp(thread);
      return;
    }
    for (const [offset, event] of events.entries()) {
      await this.#apply(thread, reply.seq + offset, event);
    }
    thread.revision = reply.revision;
  }

  /**
   * Stores `checkpoint` with its metadata under the thread and namespace of `config`, whose
   * `checkpoint_id` (if any) is its parent, with the values of the channels `newVersions`
   * names (the others are read from the records that stored their versions); resolves with
   * the config that points at it once the durability tier is met.
   */
  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (config.configurable === undefined) {
      throw new InvalidOptions("put needs config.configurable with a thread_id");
    }
    const threadId = threadIdOf(config);
    if (threadId === undefined) {
      throw new InvalidOptions("put needs config.configurable.thread_id");
    }
    const ns = String(config.configurable.checkpoint_ns ?? "");
    const parentId = getCheckpointId(config) || null;
    const { channel_values: channelValues, ...rest } = checkpoint;
    const stored: StoredChannelValue[] = [];
    for (const [channel, version] of Object.entries(newVersions)) {
      if (channelValues !== undefined && Object.hasOwn(channelValues, channel)) {
        const value = (channelValues as Record<string, unknown>)[channel];
        stored.push(await this.#dump(value, { channel, version }));
      }
    }
    const record: CheckpointRecord = {
      thread_id: threadId,
      checkpoint_ns: ns,
      checkpoint_id: checkpoint.id,
      parent_checkpoint_id: parentId,
      checkpoint: await this.#dump(rest, {}),
      metadata: await this.#dump(metadata, {}),
      channel_values: stored,
    };
    const event: Event = {
      type: "record/put",
      kind: CHECKPOINT_KIND,
      key: checkpoint.id,
      value: record,
    };
    const durability = tierOf(config, this.durability);
    // The index is not read before the append: no catching up first (one call to the store
    // fewer); the append's reply tells whether events came between.
    await this.#withThread(
      threadId,
      (thread) => this.#append(thread, [event], durability),
      false,
    );
    return pointer(threadId, ns, checkpoint.id);
  }

  /**
   * Stores the pending writes of task `taskId` against the checkpoint of `config` (which
   * must name its `thread_id` and `checkpoint_id`). A regular write already stored under the
   * same task and index is not stored again; a special one (error, interrupt, ...) replaces
   * the earlier one.
   */
  override async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath = "",
  ): Promise<void> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) {
      throw new InvalidOptions("putWrites needs config.configurable.thread_id");
    }
    const checkpointId: unknown = config.configurable?.checkpoint_id;
    if (typeof checkpointId !== "string" || checkpointId === "") {
      throw new InvalidOptions("putWrites needs config.configurable.checkpoint_id");
    }
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    const indexed = writes.map(
      ([channel, value], position) =>
        [WRITES_IDX_MAP[channel] ?? position, channel, value] as const,
    );
    const durability = tierOf(config, this.durability);
    await this.#withThread(threadId, async (thread) => {
      const stored = thread.writes.get(placeKey(ns, checkpointId));
      const fresh = indexed.filter(([idx]) => idx < 0 || !stored?.has(writeKey(taskId, idx)));
      if (fresh.length === 0) {
        return;
      }
      const record: WritesRecord = {
        thread_id: threadId,
        checkpoint_ns: ns,
        checkpoint_id: checkpointId,
        task_id: taskId,
        task_path: taskPath,
        writes: [],
      };
      for (const [idx, channel, value] of fresh) {
        record.writes.push(await this.#dump(value, { idx, channel }));
      }
      const event: Event = {
        type: "record/put",
        kind: WRITES_KIND,
        key: checkpointId,
        value: record,
      };
      await this.#append(thread, [event], durability);
    });
  }

  /** Removes every checkpoint and write of the thread, by appending (synced) removal events
   * that cover everything the thread holds so far. A thread without any is left alone. */
  override async deleteThread(threadId: string): Promise<void> {
    await this.#withThread(String(threadId), async (thread) => {
      if (thread.empty) {
        return;
      }
      const through = thread.lastSeq;
      await this.#append(
        thread,
        [
          { type: "record/removed", kind: CHECKPOINT_KIND, through_seq: through },
          { type: "record/removed", kind: WRITES_KIND, through_seq: through },
        ],
        "synced",
      );
    });
  }

  // ------------------------------------------------------------------- reads

  /** The record value of each of `seqs` (events of the thread's task), from the cache or
   * read back from the log in one pass. */
  async #read(thread: ThreadIndex, seqs: Iterable<number>): Promise<Map<number, unknown>> {
    const found = new Map<number, unknown>();
    const missing: number[] = [];
    for (const seq of new Set(seqs)) {
      const value = this.#values.get(seq);
      if (value === undefined) {
        missing.push(seq);
      } else {
        found.set(seq, value);
      }
    }
    if (missing.length === 0) {
      return found;
    }
    const wanted = new Set(missing);
    missing.sort((a, b) => a - b);
    // One pass per run of nearby seqs, each reading pages no longer than its run: the
    // records between two wanted ones far apart are not read at all.
    let start = 0;
    while (start < missing.length) {
      let end = start;
      while (end + 1 < missing.length && missing[end + 1]! - missing[end]! <= READ_GAP_SEQS) {
        end++;
      }
      const first = missing[start]!;
      const last = missing[end]!;
      const pageEvents = last - first + 1;
      for await (const event of thread.task.events(first, { pageEvents })) {
        if (wanted.has(event.seq)) {
          found.set(event.seq, event.value);
          this.#values.set(event.seq, event.value, recordValueBytes(event.kind, event.value));
        }
        if (event.seq >= last) {
          break;
        }
      }
      start = end + 1;
    }
    return found;
  }

  /** The value of one write, read by the serde. */
  async #writeValue(values: Map<number, unknown>, write: WriteEntry): Promise<unknown> {
    const record = values.get(write.seq) as WritesRecord | undefined;
    const stored = record?.writes.find((candidate) => candidate.idx === write.idx);
    if (record === undefined || record.task_id !== write.taskId || stored === undefined) {
      throw new CorruptEvent(
        `the langgraph/writes record at seq ${write.seq} no longer holds the write ` +
          `(${write.taskId}, ${write.idx}) it held when the saver folded it`,
      );
    }
    return this.#load(stored);
  }

  /**
   * The checkpoint tuples of `places` of a caught-up thread, in order; the caller holds the
   * thread. Reads the checkpoints' records first, then the records holding their channel
   * values and writes (each read from the cache, or in one pass over the log).
   */
  async #tuples(thread: ThreadIndex, places: readonly Place[]): Promise<CheckpointTuple[]> {
    const entries = places.map(([ns, id]) => {
      const entry = thread.checkpoints.get(ns)?.get(id);
      assert(entry !== undefined, "a caller asks only for the live checkpoints of the index");
      return entry.versions[entry.versions.length - 1]!;
    });
    // The writes of the checkpoints are read with their records: they sit between them in the
    // log, so the pass that reads the records meets them anyway.
    const first = entries.map((entry) => entry.seq);
    for (const [ns, id] of places) {
      for (const write of thread.sortedWrites(ns, id)) {
        first.push(write.seq);
      }
    }
    const records = await this.#read(thread, first);
    for (const entry of entries) {
      if (!records.has(entry.seq)) {
        throw new CorruptEvent(
          `the langgraph/checkpoint record at seq ${entry.seq} of thread ${thread.threadId} ` +
            "could not be read back",
        );
      }
    }
    const bodies: Array<Omit<Checkpoint, "channel_values">> = [];
    const needed: number[] = [];
    for (const [position, [ns, id]] of places.entries()) {
      const record = records.get(entries[position]!.seq) as CheckpointRecord;
      const body = (await this.#load(record.checkpoint)) as Omit<Checkpoint, "channel_values">;
      bodies.push(body);
      const channels = thread.channels.get(ns);
      for (const [channel, version] of Object.entries(body.channel_versions ?? {})) {
        const seqs = channels?.get(channelKey(channel, version));
        if (seqs !== undefined) {
          needed.push(seqs[seqs.length - 1]!);
        }
      }
      for (const write of thread.sortedWrites(ns, id)) {
        needed.push(write.seq);
      }
      const parentId = entries[position]!.parentId;
      if (body.v < 4 && parentId !== null) {
        for (const write of thread.sortedWrites(ns, parentId)) {
          needed.push(write.seq);
        }
      }
    }
    const values = await this.#read(
      thread,
      needed.filter((seq) => !records.has(seq)),
    );
    for (const [seq, value] of records) {
      values.set(seq, value);
    }
    const tuples: CheckpointTuple[] = [];
    for (const [position, [ns, id]] of places.entries()) {
      const entry = entries[position]!;
      const record = records.get(entry.seq) as CheckpointRecord;
      const body = bodies[position]!;
      const channelVersions = { ...(body.channel_versions ?? {}) };
      const channelValues: Record<string, unknown> = {};
      const channels = thread.channels.get(ns);
      for (const [channel, version] of Object.entries(channelVersions)) {
        const seqs = channels?.get(channelKey(channel, version));
        if (seqs === undefined) {
          continue;
        }
        const holder = values.get(seqs[seqs.length - 1]!) as CheckpointRecord | undefined;
        const key = channelKey(channel, version);
        const stored = holder?.channel_values.find(
          (candidate) => channelKey(candidate.channel, candidate.version) === key,
        );
        if (stored !== undefined) {
          Object.defineProperty(channelValues, channel, {
            value: await this.#load(stored),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
      }
      // A checkpoint of a format before 4 kept pending sends as writes of its parent: they
      // become the value of the tasks channel, as LangGraph's savers migrate them.
      if (body.v < 4 && entry.parentId !== null) {
        const sends = thread.sortedWrites(ns, entry.parentId).filter(
          (write) => write.channel === TASKS,
        );
        if (sends.length > 0) {
          const sent: unknown[] = [];
          for (const write of sends) {
            sent.push(await this.#writeValue(values, write));
          }
          channelValues[TASKS] = sent;
          const versions = Object.values(channelVersions);
          channelVersions[TASKS] =
            versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
        }
      }
      const pendingWrites: CheckpointPendingWrite[] = [];
      for (const write of thread.sortedWrites(ns, id)) {
        pendingWrites.push([write.taskId, write.channel, await this.#writeValue(values, write)]);
      }
      const tuple: CheckpointTuple = {
        config: pointer(thread.threadId, ns, id),
        checkpoint: { ...body, channel_values: channelValues, channel_versions: channelVersions },
        metadata: (await this.#load(record.metadata)) as CheckpointMetadata,
        pendingWrites,
      };
      if (entry.parentId !== null) {
        tuple.parentConfig = pointer(thread.threadId, ns, entry.parentId);
      }
      tuples.push(tuple);
    }
    return tuples;
  }

  /** The checkpoint of `config` (its `checkpoint_id`, or the newest of its thread and
   * namespace without one) with its pending writes, or `undefined`. */
  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) {
      return undefined;
    }
    const ns = String(config.configurable?.checkpoint_ns ?? "");
    return this.#withThread(threadId, async (thread) => {
      const id = getCheckpointId(config) || thread.newest.get(ns);
      if (id === undefined || !thread.checkpoints.get(ns)?.has(id)) {
        return undefined;
      }
      return (await this.#tuples(thread, [[ns, id]]))[0];
    });
  }

  /** Every LangGraph thread the store holds (a digest task's thread id is read from its
   * first record). */
  async #threadIds(): Promise<string[]> {
    const threadIds: string[] = [];
    for (const taskId of await this.store.taskIds()) {
      if (taskId.startsWith(TASK_PREFIX)) {
        threadIds.push(taskId.slice(TASK_PREFIX.length));
      } else if (taskId.startsWith(TASK_DIGEST_PREFIX)) {
        for await (const event of this.store.task(taskId).events()) {
          if (event.type === "record/put" && isObject(event.value)) {
            const threadId = event.value.thread_id;
            if (typeof threadId === "string" && taskIdFor(threadId) === taskId) {
              threadIds.push(threadId);
            }
            break;
          }
        }
      }
    }
    return threadIds;
  }

  /**
   * The checkpoints matching the criteria, newest (greatest checkpoint id) first: `config`'s
   * `thread_id` picks the thread (every thread of the store without one), its `checkpoint_ns`
   * the namespace (every one without it) and its `checkpoint_id` one checkpoint; `filter`
   * keeps those whose metadata has each given key deeply equal to the given value; `before`
   * keeps those whose id is smaller than its `checkpoint_id`; `limit` caps the count.
   */
  override async *list(
    config: RunnableConfig,
    options: CheckpointListOptions = {},
  ): AsyncGenerator<CheckpointTuple> {
    const { limit, before, filter } = options;
    if (limit !== undefined && limit <= 0) {
      return;
    }
    const wantedThread = threadIdOf(config);
    const threadIds = wantedThread !== undefined ? [wantedThread] : await this.#threadIds();
    const nsWanted: unknown = config?.configurable?.checkpoint_ns;
    const idWanted = config !== undefined ? getCheckpointId(config) : "";
    const beforeId = before !== undefined ? getCheckpointId(before) : "";
    const matches: Array<{ id: string; threadId: string; ns: string }> = [];
    for (const threadId of threadIds) {
      await this.#withThread(threadId, async (thread) => {
        for (const [ns, entries] of thread.checkpoints) {
          if (nsWanted !== undefined && ns !== nsWanted) {
            continue;
          }
          for (const [id, entry] of entries) {
            if ((idWanted && id !== idWanted) || (beforeId && id >= beforeId)) {
              continue;
            }
            const metadata = entry.versions[entry.versions.length - 1]!.metadata as Record<
              string,
              unknown
            >;
            if (
              filter !== undefined &&
              !Object.entries(filter).every(([key, value]) =>
                isDeepStrictEqual(metadata?.[key], value),
              )
            ) {
              continue;
            }
            matches.push({ id, threadId, ns });
          }
        }
      });
    }
    // Newest first; ties (one id in several threads or namespaces) in a fixed order.
    const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    matches.sort(
      (a, b) => order(b.id, a.id) || order(a.threadId, b.threadId) || order(a.ns, b.ns),
    );
    if (limit !== undefined) {
      matches.length = Math.min(matches.length, limit);
    }
    for (let start = 0; start < matches.length; start += LIST_PAGE_CHECKPOINTS) {
      const page = matches.slice(start, start + LIST_PAGE_CHECKPOINTS);
      const byThread = new Map<string, Place[]>();
      for (const match of page) {
        const places = byThread.get(match.threadId) ?? [];
        places.push([match.ns, match.id]);
        byThread.set(match.threadId, places);
      }
      const found = new Map<string, CheckpointTuple>();
      for (const [threadId, places] of byThread) {
        await this.#withThread(threadId, async (thread) => {
          // What was removed since the listing began is skipped.
          const live = places.filter(([ns, id]) => thread.checkpoints.get(ns)?.has(id));
          const tuples = await this.#tuples(thread, live);
          for (const [position, [ns, id]] of live.entries()) {
            found.set(`${threadId}\u0000${placeKey(ns, id)}`, tuples[position]!);
          }
        });
      }
      for (const match of page) {
        const tuple = found.get(`${match.threadId}\u0000${placeKey(match.ns, match.id)}`);
        if (tuple !== undefined) {
          yield tuple;
        }
      }
    }
  }

  /**
   * For each of `channels`, the pending writes of the ancestors of the checkpoint of `config`
   * (following parent ids, oldest first, each checkpoint's writes in `writesSortKey` order) up
   * to the nearest ancestor that holds a value of the channel, which is the `seed` (absent when
   * none does): the contract of `BaseCheckpointSaver.getDeltaChannelHistory`, read from the
   * index a page of ancestors at a time instead of one `getTuple` per ancestor.
   */
  override async getDeltaChannelHistory(options: {
    config: RunnableConfig;
    channels: string[];
  }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) {
      return {};
    }
    // Each channel's writes, newest first while walking; reversed at the end.
    const collected = new Map<string, CheckpointPendingWrite[]>(channels.map((ch) => [ch, []]));
    const seeds = new Map<string, unknown>();
    const threadId = threadIdOf(config);
    if (threadId !== undefined) {
      const ns = String(config.configurable?.checkpoint_ns ?? "");
      await this.#withThread(threadId, async (thread) => {
        const entries = thread.checkpoints.get(ns);
        const targetId = getCheckpointId(config) || thread.newest.get(ns);
        const target = targetId === undefined ? undefined : entries?.get(targetId);
        if (target === undefined) {
          return;
        }
        const remaining = new Set(channels);
        let cursor = target.versions[target.versions.length - 1]!.parentId;
        while (cursor !== null && remaining.size > 0) {
          const page: Place[] = [];
          while (cursor !== null && page.length < HISTORY_PAGE_CHECKPOINTS) {
            const entry: CheckpointEntry | undefined = entries?.get(cursor);
            if (entry === undefined) {
              break;
            }
            page.push([ns, cursor]);
            cursor = entry.versions[entry.versions.length - 1]!.parentId;
          }
          if (page.length === 0) {
            break;
          }
          const pageEnded = page.length < HISTORY_PAGE_CHECKPOINTS && cursor !== null;
          for (const tuple of await this.#tuples(thread, page)) {
            if (remaining.size === 0) {
              break;
            }
            const writes = tuple.pendingWrites ?? [];
            for (let at = writes.length - 1; at >= 0; at -= 1) {
              const write = writes[at]!;
              if (remaining.has(write[1])) {
                collected.get(write[1])!.push(write);
              }
            }
            const values = tuple.checkpoint.channel_values as Record<string, unknown>;
            for (const channel of [...remaining]) {
              if (Object.hasOwn(values, channel)) {
                seeds.set(channel, values[channel]);
                remaining.delete(channel);
              }
            }
          }
          if (pageEnded) {
            // The walk met a parent the thread no longer holds.
            break;
          }
        }
      });
    }
    const result: Record<string, DeltaChannelHistory> = {};
    for (const channel of channels) {
      const history: DeltaChannelHistory = { writes: collected.get(channel)!.slice().reverse() };
      if (seeds.has(channel)) {
        history.seed = seeds.get(channel);
      }
      Object.defineProperty(result, channel, {
        value: history,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return result;
  }
}
