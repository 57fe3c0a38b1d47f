/**
 * factlog for Node: the facts of agent tasks in an embedded, crash-safe log.
 *
 * ```ts
 * import { Store } from "factlog";
 * const store = await Store.open(dir);
 * const task = store.task("t1");
 * await task.append({ type: "tool/call", call_id: "c1", tool: "send_mail", effect: "unsafe" },
 *                   { durability: "synced" });
 * await store.close();
 * ```
 *
 * A thin layer over the Rust library (the native addon `factlog.node`): every event is
 * parsed, checked and answered by the library's protocol module, exactly as a line sent to
 * `factlog emit` (`format-spec/protocol.md`); the replies, states and events have the JSON
 * shapes of the command's `--json` outputs. Every call that may wait for the disk or a served
 * store returns a promise and runs off the event loop; `Task.delta`, the hot path, is
 * synchronous and buffered.
 *
 * @module
 */

import { native } from "./addon.js";
import type { NativeStore, NativeTail, NativeTask } from "./native.js";
import { InvalidOptions, fromNative } from "./errors.js";

export * from "./errors.js";

/** How durable an append must be before its promise resolves (`format-spec/protocol.md`):
 * `buffered` (in memory), `flushed` (written to the OS), `synced` (`fdatasync`ed), or
 * `replicated` (synced, and shipped to the store's replica: see `replicateTo`). An event
 * type's floor (a `tool/call` with an unsafe effect is at least `synced`) always applies. */
export type Durability = "buffered" | "flushed" | "synced" | "replicated";

/** An event as the protocol takes it, without `task`: `{ type: "tool/call", call_id, ... }`
 * (`format-spec/events.md` lists the types and their fields). */
export interface Event {
  /** The event type, such as `"turn/start"`, `"assistant/message"`, `"tool/call"`. */
  type: string;
  [field: string]: unknown;
}

/** An event as stored, the shape of a line of `factlog dump --json`. */
export interface StoredEvent {
  /** The event's position in the store's log. */
  seq: number;
  /** Its task. */
  task: string;
  /** The task's revision after it. */
  revision: number;
  /** When it was appended, in microseconds since the epoch. */
  timestamp_us: number;
  /** The same, as RFC 3339 text. */
  time: string;
  /** The event type. */
  type: string;
  [field: string]: unknown;
}

/** The reply of an append. */
export interface AppendReply {
  /** The event's seq. */
  seq: number;
  /** Its task. */
  task: string;
  /** The task's revision after it. */
  revision: number;
  /** The durability the append met. */
  durability: string;
  /** Findings that did not refuse the event (an unmarked credential-shaped value, say). */
  warnings?: unknown[];
  /** `true` for a repeated `tool/call` that already has a result: do not run the tool
   * again; `receipt` is its result. */
  duplicate?: boolean;
  /** The call of a duplicate. */
  call_id?: string;
  /** The stored result of a duplicate. */
  receipt?: unknown;
  [field: string]: unknown;
}

/** The reply of a batch: `seq` is its first event's, `revision` its last's. */
export interface BatchReply extends AppendReply {
  /** How many events the batch held. */
  count: number;
}

/** The options of an append. */
export interface AppendOptions {
  /** How durable the append must be before the promise resolves (default: the type's). */
  durability?: Durability;
  /** A compare-and-set: refused with `StaleRevision` unless the task is at this revision. */
  expectedRevision?: number;
}

/** The options of {@link Store.open}. */
export interface OpenOptions {
  /** Share the store with the other processes of the machine over `DIR/factlog.sock` until
   * `close()` (the directory must not be writable by group or others). */
  share?: boolean;
  /** With `share`: also serve the processes whose primary group is this gid. */
  allowGroup?: number;
  /** With `share`: the most clients served at once (default and maximum 64). */
  clientsMax?: number;
  /** Only connect to the process that serves the store; never open it (`NotServed` when
   * nothing answers). */
  connect?: boolean;
  /** Through a served store: the longest a reply is waited for, in milliseconds
   * (`TimedOut`, then the handle is abandoned). */
  timeoutMs?: number;
  /** Refuse (`UnmarkedSecret`) a body holding a credential-shaped value not marked
   * `{"$secret": ...}`; without it the reply warns. */
  refuseUnmarkedSecrets?: boolean;
  /** Snapshot after this many events (default 1,000,000; 0: never). */
  snapshotEveryEvents?: number;
  /** Snapshot after this many bytes of log (default 64 MiB; 0: never). */
  snapshotEveryBytes?: number;
  /** Also snapshot at every `turn/end`. */
  snapshotAtTurnEnd?: boolean;
  /** Replicate the store to this location (`file:///...`) while it is open: a background
   * thread ships synced events, and `replicated` appends resolve only once their events
   * exist there (`format-spec/replication.md`). */
  replicateTo?: string;
}

/** What opening a store found and did (`null` for a client of a served store). */
export interface OpenReport {
  /** Segments found. */
  segments: number;
  /** The last seq of the log. */
  last_seq: number | null;
  /** The snapshot the state was loaded from. */
  snapshot_seq: number | null;
  /** Events replayed after it. */
  replayed_events: number;
  /** Tasks in the store. */
  tasks: number;
  /** The torn tail the open cut, or null. */
  tail_cut: Record<string, unknown> | null;
  [field: string]: unknown;
}

/** The options of {@link Store.events} and {@link Store.tail}. */
export interface ReadOptions {
  /** The first seq to read (default 1). */
  fromSeq?: number;
  /** Only this task's events. */
  task?: string;
}

/** The options of {@link Store.events}. */
export interface EventsOptions extends ReadOptions {
  /** The most events one page read from the log holds (default and upper bound: the store's
   * page bound, `format-spec/server.md`, `events`), for a reader that knows how many it wants:
   * a smaller page is read and parsed sooner. The iteration still goes on page after page;
   * a served store may ignore it and send its own page. An integer of at least 1, else
   * `InvalidOptions`. */
  pageEvents?: number;
}

/** The options of {@link Store.tail}. */
export interface TailOptions extends ReadOptions {
  /** The longest one wait for a new event lasts before it is asked again, in ms (default
   * 30,000 in process, 1,000 through a served store: how long a tail of a client may take
   * to notice that its store was closed). It never ends the iteration. */
  waitMs?: number;
}

/** One page of events (`format-spec/server.md`, `events`). */
interface Page {
  events: StoredEvent[];
  next_seq: number;
  last_seq: number;
}

/**
 * The stores not closed yet. A program that ends without closing a store loses nothing it
 * buffered: when the event loop runs out of work the addon closes it, and at
 * `process.exit()` (where nothing asynchronous runs any more) Node's `exit` event closes it
 * here, synchronously. Weak references: a store the program dropped is not kept alive.
 */
const unclosed = new Set<WeakRef<NativeStore>>();
process.on("exit", () => {
  for (const ref of unclosed) {
    try {
      ref.deref()?.closeNow();
    } catch {
      // Exiting: a store that cannot be closed keeps what its last sync made durable.
    }
  }
});

/** Runs a native call, turning its failure into the `FactlogError` of its code. */
async function call<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw fromNative(error);
  }
}

/** Runs a synchronous native call, turning its failure into the `FactlogError` of its code. */
function callSync<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    throw fromNative(error);
  }
}

/** The largest number the addon takes as a 32-bit count. */
const U32_MAX = 0xffff_ffff;

/** `value` checked as an integer from `min` to `max` (a revision, a seq, a count): anything
 * else (a fraction, `NaN`, a negative number, a string) is refused with `InvalidOptions`
 * before it reaches the store, never rounded into another value. */
function integer(name: string, value: unknown, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    const what = String(value);
    throw new InvalidOptions(`${name} must be an integer from ${min} to ${max}, not ${what}`);
  }
  return value;
}

/** The options of `Store.open` with every number checked ({@link integer}). */
function checkedOpenOptions(options: OpenOptions): OpenOptions {
  integer("allowGroup", options.allowGroup, 0, U32_MAX);
  integer("clientsMax", options.clientsMax, 1, U32_MAX);
  integer("timeoutMs", options.timeoutMs, 1, U32_MAX);
  integer("snapshotEveryEvents", options.snapshotEveryEvents, 0, Number.MAX_SAFE_INTEGER);
  integer("snapshotEveryBytes", options.snapshotEveryBytes, 0, Number.MAX_SAFE_INTEGER);
  return options;
}

async function json<T>(work: () => Promise<string>): Promise<T> {
  return JSON.parse(await call(work)) as T;
}

/**
 * An open store: one directory, many tasks, one log and one group commit.
 *
 * Only one process holds a directory at a time. {@link Store.open} opens it, or, when another
 * process holds it and shares it (`share: true`, or `factlog serve`), connects to that process:
 * a *client* handle (`servedBy` is the serving pid) with the same API, whose calls go through
 * the socket and fail with the same errors. When another process holds it without sharing it,
 * `Locked` names it and says how to share it.
 */
export class Store implements AsyncDisposable {
  readonly #native: NativeStore;

  private constructor(native: NativeStore) {
    this.#native = native;
    // Forget the stores collected without a close, now and then (the set stays bounded by
    // about twice the stores alive).
    if (unclosed.size >= 64 && (unclosed.size & (unclosed.size - 1)) === 0) {
      for (const ref of unclosed) if (ref.deref() === undefined) unclosed.delete(ref);
    }
    unclosed.add(new WeakRef(native));
  }

  /** Opens (or creates) the store in `path`, or connects to the process serving it. Opening
   * recovers the log's tail and replays it, off the event loop. */
  static async open(path: string, options: OpenOptions = {}): Promise<Store> {
    checkedOpenOptions(options);
    return new Store(await call(() => native.NativeStore.open(path, options)));
  }

  /** Connects to the store another process serves from `path`, without trying to open it:
   * `NotServed` when nothing answers there. */
  static async connect(path: string, options: { timeoutMs?: number } = {}): Promise<Store> {
    return Store.open(path, { ...options, connect: true });
  }

  /** The store's directory. */
  get path(): string {
    return this.#native.path;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#native.closed;
  }

  /** Whether this handle shares its store with other processes (`share: true`). */
  get sharing(): boolean {
    return this.#native.sharing;
  }

  /** Whether this handle replicates its store (`replicateTo`). */
  get replicating(): boolean {
    return this.#native.replicating;
  }

  /** The pid of the process serving the store when this handle is its client, else `null`. */
  get servedBy(): number | null {
    return this.#native.servedBy;
  }

  /** What opening the store found and did (`null` for a client of a served store). */
  get openReport(): OpenReport | null {
    const report = this.#native.openReport();
    return report === null ? null : (JSON.parse(report) as OpenReport);
  }

  /** A handle on task `id` (its first event creates it). Its first call takes the task over
   * from an earlier holder: unfinished calls become `outcome_unknown`, one-time approvals
   * expire, a high-risk task needs `control/resume` (`format-spec/harness-recovery.md`). */
  task(id: string): Task {
    return new Task(callSync(() => this.#native.task(id)), this);
  }

  /** Takes every task over and reports what recovery decided: the object of
   * `factlog recover --json`, with each task's plans. */
  async recover(): Promise<RecoverReport> {
    return json(() => this.#native.recover());
  }

  /** The ids of the tasks that have events, sorted. */
  async taskIds(): Promise<string[]> {
    return json(() => this.#native.taskIds());
  }

  /** The events from `fromSeq` on (of `task` only, when given), up to the last event the
   * store held when the iteration began, read page by page. */
  async *events(options: EventsOptions = {}): AsyncGenerator<StoredEvent, void, undefined> {
    const { pageEvents } = options;
    if (pageEvents !== undefined && !(Number.isInteger(pageEvents) && pageEvents >= 1)) {
      throw new InvalidOptions(`pageEvents must be an integer of at least 1, not ${pageEvents}`);
    }
    // The addon takes a u32; the store's own bound is far below it.
    const pageLimit = pageEvents === undefined ? undefined : Math.min(pageEvents, 0xffff_ffff);
    let from = integer("fromSeq", options.fromSeq, 0, Number.MAX_SAFE_INTEGER) ?? 1;
    let until: number | undefined;
    for (;;) {
      const page: Page = await json(() =>
        this.#native.eventsPage(from, options.task, pageLimit),
      );
      until ??= page.last_seq;
      for (const event of page.events) {
        if (event.seq > until) {
          return;
        }
        yield event;
      }
      if (page.events.length === 0 || page.next_seq > until) {
        return;
      }
      from = page.next_seq;
    }
  }

  /** The events from `fromSeq` on (of `task` only, when given), and then every event as it
   * is appended, by this process or any other writing through it: an iteration that ends
   * only when the loop breaks or the store closes. Waiting holds no lock of the store and
   * never polls in process (an append wakes it at once); through a served store it is the
   * `follow` request on a connection of its own. */
  async *tail(options: TailOptions = {}): AsyncGenerator<StoredEvent, void, undefined> {
    const waitMs =
      integer("waitMs", options.waitMs, 0, U32_MAX) ?? (this.servedBy === null ? 30_000 : 1_000);
    let from = integer("fromSeq", options.fromSeq, 0, Number.MAX_SAFE_INTEGER) ?? 1;
    const follower: NativeTail = callSync(() => this.#native.follower(options.task));
    try {
      for (;;) {
        if (this.closed) {
          return;
        }
        let page: Page;
        try {
          page = await json(() => follower.next(from, waitMs));
        } catch (error) {
          if (error instanceof Error && (error as { code?: string }).code === "CLOSED") {
            return;
          }
          throw error;
        }
        yield* page.events;
        from = page.next_seq;
      }
    } finally {
      follower.close();
    }
  }

  /** Makes every event appended so far meet `durability` (default `"synced"`). Through a
   * served store: the socket's `sync` request (the deltas still buffered go first), synced. */
  async flush(durability: Exclude<Durability, "replicated"> = "synced"): Promise<void> {
    await call(() => this.#native.flush(durability));
  }

  /** Stops sharing and replicating (when it does), then syncs and closes the store; a client
   * sends the deltas it still buffers, reads their replies (a refusal among them is thrown
   * here) and ends its connection. Its tasks then fail with `Closed`. Idempotent. */
  async close(): Promise<void> {
    await call(() => this.#native.close());
    for (const ref of unclosed) {
      if (ref.deref() === this.#native || ref.deref() === undefined) unclosed.delete(ref);
    }
  }

  /** `await using store = await Store.open(dir)` closes it at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** What `recover()` decided (`factlog recover --json`; `format-spec/schema/recover.json`). */
export interface RecoverReport {
  /** Each task taken over, with its phase and the plan of each unfinished call. */
  tasks: Array<Record<string, unknown>>;
  [field: string]: unknown;
}

/** An entry of a task's model-visible history (`factlog history --json`). */
export type HistoryEntry = Record<string, unknown> & { kind?: string };

/** A task's folded state (the object under `tasks.ID` of `factlog state --json`). */
export type TaskState = Record<string, unknown> & { revision: number; phase?: string };

/** A handle on one task of a store. */
export class Task {
  readonly #native: NativeTask;
  readonly #store: Store;
  /** The task's delta function, the hot path (`node/src/hot.rs`). */
  readonly #delta: (text: string) => number;

  /** @internal */
  constructor(native: NativeTask, store: Store) {
    this.#native = native;
    this.#store = store;
    this.#delta = native.deltaFunction();
  }

  /** The task's id. */
  get id(): string {
    return this.#native.id;
  }

  /** The store the task belongs to. */
  get store(): Store {
    return this.#store;
  }

  /**
   * Appends one streamed `assistant/delta` fragment, buffered (the store's flusher makes it
   * durable within milliseconds, and so does any later flushed or synced append); returns
   * its seq. The hot path: synchronous, no JSON; V8 copies the text into a buffer the addon
   * reuses, and the append is the library's (no allocation across the boundary).
   *
   * Through a served store it returns `null`: fragments are pipelined (sent with the next
   * request or at `close()`), and a refusal of one is thrown by a later call of the same
   * connection as `PipelinedRefused`.
   */
  delta(text: string): number | null {
    let seq: number;
    try {
      seq = this.#delta(text);
    } catch (error) {
      throw fromNative(error);
    }
    return seq === 0 ? null : seq;
  }

  /** Appends one event (`format-spec/events.md`) and waits for its durability (the type's
   * default, or `options.durability`). Resolves with the protocol's reply; for a repeated
   * `tool/call` that already has a result, `duplicate: true` and its `receipt`: do not run
   * the tool again. Rejects with the `FactlogError` subclass of the refusal otherwise. */
  async append(event: Event, options: AppendOptions = {}): Promise<AppendReply> {
    const text = JSON.stringify(event);
    const revision = integer(
      "expectedRevision",
      options.expectedRevision,
      0,
      Number.MAX_SAFE_INTEGER,
    );
    return json(() => this.#native.append(text, revision, options.durability));
  }

  /** Appends events as one atomic batch (all or none after a crash). */
  async appendBatch(events: Event[], options: AppendOptions = {}): Promise<BatchReply> {
    const text = JSON.stringify(events);
    return json(() =>
      this.#native.appendBatch(
        text,
        integer("expectedRevision", options.expectedRevision, 0, Number.MAX_SAFE_INTEGER),
        options.durability,
      ),
    );
  }

  /** The task's current revision: the count of its events. */
  async revision(): Promise<number> {
    return call(() => this.#native.revision());
  }

  /** The task's folded state: phase, turns, calls and their outcomes, approvals. */
  async state(): Promise<TaskState> {
    return json(() => this.#native.state());
  }

  /** The model-visible history: the entries of `factlog history --json`. */
  async history(): Promise<HistoryEntry[]> {
    return json(() => this.#native.history());
  }

  /** This task's events from `fromSeq` on (`store.events({ fromSeq, task: id, pageEvents })`:
   * `pageEvents` bounds each page read, see {@link EventsOptions}). */
  events(
    fromSeq = 1,
    options: { pageEvents?: number } = {},
  ): AsyncGenerator<StoredEvent, void, undefined> {
    return this.#store.events({ fromSeq, task: this.id, pageEvents: options.pageEvents });
  }
}

/** The documented request key of `operation` on `task` at `revision` (as
 * `factlog request-key`): the key that makes a retried operation a no-op. */
export function requestKey(task: string, operation: string, revision: number): string {
  integer("revision", revision, 0, Number.MAX_SAFE_INTEGER);
  return callSync(() => native.requestKey(task, operation, revision));
}

/** The protocol version the package speaks (`format-spec/protocol.md`). */
export const PROTOCOL_VERSION: number = native.PROTOCOL_VERSION;

/** Every error code of the protocol, in the order of the spec's table. */
export const ERROR_CODES: readonly string[] = Object.freeze(native.errorCodes());

/** The package's version. */
export const VERSION: string = native.version();
