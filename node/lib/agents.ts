/**
 * An OpenAI Agents JS session kept in a factlog store: {@link FactlogSession}, the
 * `Session` of `@openai/agents-core` (with its idempotent history transactions), so that a
 * run's conversation lives in the same crash-safe log as the harness's other facts.
 *
 * ```ts
 * import { Agent, run } from "@openai/agents-core";
 * import { FactlogSession } from "factlog/agents";
 *
 * const session = new FactlogSession({ path: "sessions.factlog", sessionId: "user-42" });
 * const result = await run(agent, "Capital of France?", { session });
 * await session.close();
 * ```
 *
 * How items are stored (the mapping of the Python adapter, `python/factlog/agents.py`). One
 * session is one factlog task ({@link taskIdFor} names it). Each item is one event that keeps
 * the item whole, so `getItems` returns exactly the items that were added (as JSON gives them
 * back: `undefined` fields are dropped):
 *
 * - a user message (`role: "user"`) is a `user/message` whose `text` is the message's text and
 *   whose field `item` is the item;
 * - an assistant message (`role: "assistant"`) is an `assistant/message` (`text`, `item`);
 * - a `function_call` item (a call the model *asked for*) is an `assistant/message` whose
 *   `tool_calls` names it; it is never a `tool/call`, which records a *dispatch*: the harness
 *   writes that itself, before it runs the tool (`format-spec/harness-recovery.md`);
 * - every other item (tool results, reasoning, handoffs, approvals, system messages, items of
 *   types this module does not know) is a `record/put` of kind {@link ITEM_KIND} whose
 *   `value` is the item. So is a message or call the store would refuse in its typed form (a
 *   call id the task already knows, as after `popItem` removed the call and the runner adds
 *   it again, or after the harness dispatched it), so that `addItems` never fails on valid
 *   SDK input.
 *
 * The log stays append-only: `popItem` and `clearSession` append a `record/removed` of kind
 * {@link ITEM_KIND} naming the removed events (`seqs`, or `through_seq` for a clear); the
 * session's items are the fold of its task's events with those removals applied.
 *
 * `applyHistoryTransaction` writes its items, the removals of a replaced suffix and a
 * `record/put` of kind {@link TRANSACTION_KIND} in one atomic batch, compare-and-set on the
 * task's revision. That record's `key` is the factlog request key of the operation id
 * (`requestKey(task, "agents/history-transaction:" + operationId, 0)`), and its value the
 * digest of the transaction: a retried operation id finds its key in the fold and writes
 * nothing, and one reused with another transaction is refused.
 *
 * Limits, from the store's: an item's JSON must fit in one event body (4 MiB; a larger one is
 * refused with `LimitExceeded` and nothing of its batch is written); `addItems` is atomic for
 * up to {@link BATCH_ITEMS_MAX} items and about 12 MiB of JSON, a longer list is written as
 * several atomic batches in order; a history transaction is always one batch, refused with
 * `LimitExceeded` before anything is written when it cannot be. An item holding a secret
 * marked `{"$secret": ...}` comes back with the store's reference `{"$secret_ref": ...}` in
 * its place. Memory: the session keeps its live items' JSON text, their seqs, the call ids
 * and transaction keys of its task, and reads the log page by page.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type {
  AgentInputItem,
  SessionHistoryTransaction,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from "@openai/agents-core";
import {
  CallIdReused,
  Closed,
  InvalidEvent,
  InvalidOptions,
  LimitExceeded,
  StaleRevision,
  Store,
  requestKey,
  type AppendReply,
  type Event,
  type OpenOptions,
  type StoredEvent,
  type Task,
} from "./index.js";

/** The `kind` of the `record/put` and `record/removed` events that hold a session's items. */
export const ITEM_KIND = "agents/item";

/** The `kind` of the `record/put` that records an applied history transaction. */
export const TRANSACTION_KIND = "agents/transaction";

/** The durabilities a session's writes may wait for: `"flushed"` (the default: written to the
 * operating system, so it survives a crash of the process), `"synced"` (`fdatasync`ed: it also
 * survives a power loss) or `"buffered"` (written within milliseconds by the store's flusher;
 * a crash of the process may lose the last ones). */
export const DURABILITIES = ["buffered", "flushed", "synced"] as const;

/** One of {@link DURABILITIES}. */
export type SessionDurability = (typeof DURABILITIES)[number];

/** The most events one atomic batch holds (the store's batch limit); `addItems` splits a
 * longer list into several batches. */
export const BATCH_ITEMS_MAX = 1024;

/** The most seqs one `record/removed` names (the store's limit). */
export const REMOVED_SEQS_MAX = 4096;

/** The longest task id the store takes, in UTF-8 bytes. */
export const TASK_ID_BYTES_MAX = 128;

/** The prefix of a task id derived by digest ({@link taskIdFor}). */
export const DIGEST_PREFIX = "sha256:";

/** The longest operation id of a history transaction, in UTF-8 bytes (the SDK's are a few
 * dozen): it is kept in the transaction's record for people reading `factlog dump`. */
export const OPERATION_ID_BYTES_MAX = 1024;

// A batch is one frame of at most 16 MiB; this leaves room for the envelopes and for the
// typed events' text, which repeats the message's text beside the item.
const BATCH_JSON_BYTES_MAX = 12 * 1024 * 1024;
// A typed event carries the item and its text; when that may not fit in one 4 MiB body, the
// item goes into a record/put instead, which carries only the item.
const TYPED_JSON_BYTES_MAX = 2 * 1024 * 1024;
// The readable head of a long session id kept in its digest form: 72 bytes of prefix and
// digest plus ":" leave 56.
const DIGEST_HEAD_BYTES = TASK_ID_BYTES_MAX - DIGEST_PREFIX.length - 64 - 1;
// The operation of a history transaction's request key is this prefix and the operation id.
const TRANSACTION_OPERATION_PREFIX = "agents/history-transaction:";

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The factlog task id that holds session `sessionId`.
 *
 * A session id of 1 to 128 UTF-8 bytes is its own task id, unless it starts with `"sha256:"`
 * or holds a lone surrogate. Any other is digested: `"sha256:" + hex(SHA-256(its bytes)) + ":"
 * + head`, where `head` is the id's first characters that fit in 56 bytes, for people reading
 * `factlog dump` (the same ids as the Python adapter's `task_id_for`). Two different session
 * ids never share a task (short of a SHA-256 collision). An empty one is refused with
 * `InvalidOptions`.
 */
export function taskIdFor(sessionId: string): string {
  if (typeof sessionId !== "string" || sessionId.length === 0) {
    throw new InvalidOptions(
      "sessionId must be a non-empty string: it names the factlog task that holds the session",
    );
  }
  const wellFormed = !LONE_SURROGATE.test(sessionId);
  if (
    wellFormed &&
    Buffer.byteLength(sessionId, "utf8") <= TASK_ID_BYTES_MAX &&
    !sessionId.startsWith(DIGEST_PREFIX)
  ) {
    return sessionId;
  }
  const digest = createHash("sha256").update(wtf8(sessionId)).digest("hex");
  let head = "";
  let headBytes = 0;
  for (const character of sessionId) {
    const shown = LONE_SURROGATE.test(character) ? "?" : character;
    const bytes = Buffer.byteLength(shown, "utf8");
    if (headBytes + bytes > DIGEST_HEAD_BYTES) break;
    head += shown;
    headBytes += bytes;
  }
  return `${DIGEST_PREFIX}${digest}:${head}`;
}

/** The UTF-8 bytes of `text`, with each lone surrogate encoded as its three bytes (as
 * Python's `surrogatepass` does), so that ids differing only in lone surrogates differ. */
function wtf8(text: string): Buffer {
  if (!LONE_SURROGATE.test(text)) return Buffer.from(text, "utf8");
  const bytes: number[] = [];
  for (const character of text) {
    const unit = character.codePointAt(0)!;
    if (unit >= 0xd800 && unit <= 0xdfff) {
      bytes.push(0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f));
    } else {
      bytes.push(...Buffer.from(character, "utf8"));
    }
  }
  return Buffer.from(bytes);
}

/** The settings of a session, as the Python adapter's `session_settings`. */
export interface SessionSettings {
  /** The default `limit` of {@link FactlogSession.getItems} (default: every item). */
  limit?: number;
}

/** The options of a {@link FactlogSession}: `sessionId`, and either `path` or `store`. */
export interface FactlogSessionOptions {
  /** The SDK's session id; {@link taskIdFor} names its task. */
  sessionId: string;
  /** A store directory the session opens (on its first call) and closes in `close()`; on a
   * store another process shares, it connects to that process. */
  path?: string;
  /** An open store the session uses and does not close (shared with other sessions and the
   * harness's own tasks). A directory is open in one `Store` of a process at a time. */
  store?: Store;
  /** With `path`: the options of `Store.open`. */
  openOptions?: OpenOptions;
  /** The session's settings: `limit` is the default limit of `getItems`. */
  sessionSettings?: SessionSettings;
  /** What `addItems`, `popItem`, `clearSession` and `applyHistoryTransaction` wait for: one
   * of {@link DURABILITIES}. Default: `"flushed"`. */
  durability?: SessionDurability;
}

type HistoryTransactionKind = SessionHistoryTransaction["type"];

/** What the fold knows of an applied history transaction. */
interface AppliedTransaction {
  seq: number;
  digest: string;
}

/**
 * An OpenAI Agents JS session kept in a factlog store: the SDK's `Session`, with the optional
 * `applyHistoryTransaction` made idempotent by factlog request keys.
 *
 * `new FactlogSession({ sessionId, path })` opens the store in directory `path` on its first
 * call and closes it in {@link close}; `new FactlogSession({ sessionId, store })` uses an open
 * `Store` that the caller shares and closes itself.
 *
 * The session keeps its items in memory, folded from its task's events, and reads only the
 * events appended since it last looked (the task's revision tells whether there are any), so
 * several sessions of one id, in one process or several (through a served store), see each
 * other's writes. Its calls run one at a time, in the order they were made.
 */
export class FactlogSession implements SessionHistoryTransactionAwareSession, AsyncDisposable {
  /** The SDK's session id. */
  readonly sessionId: string;
  /** The factlog task that holds the session ({@link taskIdFor}). */
  readonly taskId: string;
  /** The session's settings; `limit` is the default limit of {@link getItems}. */
  readonly sessionSettings: Readonly<SessionSettings>;
  /** What the session's writes wait for ({@link DURABILITIES}). */
  readonly durability: SessionDurability;

  readonly #path: string | undefined;
  readonly #openOptions: OpenOptions;
  readonly #ownsStore: boolean;
  #store: Store | undefined;
  #opening: Promise<Store> | undefined;
  #task: Task | undefined;
  #closed = false;
  // The calls of the session, chained: each starts when the previous one settled.
  #queue: Promise<unknown> = Promise.resolve();
  // The fold: the live items' seqs (ascending) and JSON texts, how far it has read.
  #seqs: number[] = [];
  #texts: string[] = [];
  #revision = 0;
  #nextSeq = 1;
  #knownCallIds = new Set<string>();
  #transactions = new Map<string, AppliedTransaction>();

  /** Builds a session; nothing is opened or read before its first call. Throws
   * `InvalidOptions` for an empty `sessionId`, for both or neither of `path` and `store`, an
   * unknown `durability` or unknown settings. */
  constructor(options: FactlogSessionOptions) {
    if (typeof options !== "object" || options === null) {
      throw new InvalidOptions("FactlogSession takes { sessionId, path } or { sessionId, store }");
    }
    this.taskId = taskIdFor(options.sessionId);
    const durability = options.durability ?? "flushed";
    if (!(DURABILITIES as readonly string[]).includes(durability)) {
      throw new InvalidOptions(
        `durability must be one of ${DURABILITIES.join(", ")}, not ${JSON.stringify(durability)}`,
      );
    }
    if ((options.path === undefined) === (options.store === undefined)) {
      throw new InvalidOptions(
        "give FactlogSession either path (a store directory it opens and closes) or store " +
          "(an open factlog Store it shares), not both or neither",
      );
    }
    if (options.store !== undefined && !(options.store instanceof Store)) {
      throw new InvalidOptions("store must be a factlog Store (from Store.open)");
    }
    this.sessionId = options.sessionId;
    this.sessionSettings = Object.freeze(settings(options.sessionSettings));
    this.durability = durability;
    this.#path = options.path;
    this.#openOptions = options.openOptions ?? {};
    this.#ownsStore = options.store === undefined;
    this.#store = options.store;
  }

  // -- the Session interface ---------------------------------------------------------------

  /** The SDK's session id. */
  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The session's items in the order they were added; with `limit` (or, when it is
   * undefined, `sessionSettings.limit`) a positive N, the latest N of them, still in
   * chronological order. A limit of 0 gives `[]`; a negative one, every item. Each call
   * returns fresh objects. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const effective = limit ?? this.sessionSettings.limit;
    return this.#exclusive(async () => {
      await this.#refresh();
      let window: string[];
      if (effective === undefined || effective === null || effective < 0) {
        window = this.#texts;
      } else if (effective === 0) {
        window = [];
      } else {
        window = this.#texts.slice(Math.max(this.#texts.length - effective, 0));
      }
      // One parse of the whole window: fresh objects, without a call per item.
      return JSON.parse(`[${window.join(",")}]`) as AgentInputItem[];
    });
  }

  /** Appends `items`, as one atomic batch per {@link BATCH_ITEMS_MAX} items, and waits for
   * the session's durability. An item that is not JSON is refused with `InvalidEvent`, and
   * one over the body limit with `LimitExceeded`, before anything of its batch is written. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    this.#checkOpen();
    if (items.length === 0) return;
    const texts = items.map(itemText);
    await this.#exclusive(async () => {
      await this.#refresh();
      for (const batch of batches(texts)) {
        await this.#appendItems(batch);
      }
    });
  }

  /** Removes the latest item and returns it; `undefined` when the session has none. The
   * removal is a `record/removed` event (the item stays in the log), written as a
   * compare-and-set on the task's revision, so that the item it removes is still the latest
   * when the removal is written even while other writers add to the same session. */
  async popItem(): Promise<AgentInputItem | undefined> {
    return this.#exclusive(async () => {
      const task = await this.#handle();
      for (;;) {
        await this.#refresh();
        const seq = this.#seqs.at(-1);
        if (seq === undefined) return undefined;
        const removal: Event = { type: "record/removed", kind: ITEM_KIND, seqs: [seq] };
        let reply: AppendReply;
        try {
          reply = await task.append(removal, {
            expectedRevision: this.#revision,
            durability: this.durability,
          });
        } catch (error) {
          if (error instanceof StaleRevision) continue;
          throw error;
        }
        this.#seqs.pop();
        const text = this.#texts.pop()!;
        this.#caughtUpBy(reply, 1);
        return JSON.parse(text) as AgentInputItem;
      }
    });
  }

  /** Removes every item of the session with one `record/removed` event (nothing is written
   * when the session has none). The records of applied history transactions stay: a retried
   * operation id is still a no-op after a clear. */
  async clearSession(): Promise<void> {
    await this.#exclusive(async () => {
      const task = await this.#handle();
      await this.#refresh();
      const last = this.#seqs.at(-1);
      if (last === undefined) return;
      const removal: Event = { type: "record/removed", kind: ITEM_KIND, through_seq: last };
      const reply = await task.append(removal, { durability: this.durability });
      this.#removeThrough(last);
      this.#caughtUpBy(reply, 1);
    });
  }

  /**
   * Applies a history transaction atomically and at most once: `append_items` adds its items;
   * `replace_suffix` replaces the session's last items, which must equal `expectedSuffix`,
   * by `replacement`. The items, the removals and the record of the operation are one batch,
   * written as a compare-and-set on the task's revision.
   *
   * Repeating `operationId` with the same transaction writes nothing. Refused with
   * `InvalidEvent`, before anything is written: an operation id used before with another
   * transaction, a suffix that does not match (a stored item holding a marked secret never
   * matches: the store kept its reference), items that are not JSON; with `LimitExceeded`, a
   * transaction that cannot be one batch (more than {@link BATCH_ITEMS_MAX} events or about
   * 12 MiB); with `InvalidOptions`, arguments of the wrong shape.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    this.#checkOpen();
    const { operationId, kind, texts, expected } = snapshotTransaction(args);
    const digest =
      DIGEST_PREFIX +
      createHash("sha256")
        .update(canonicalJson({ type: kind, texts: texts.map(canonicalText), expected }))
        .digest("hex");
    await this.#exclusive(async () => {
      const task = await this.#handle();
      const key = requestKey(this.taskId, TRANSACTION_OPERATION_PREFIX + operationId, 0);
      const marker: Event = {
        type: "record/put",
        kind: TRANSACTION_KIND,
        key,
        value: { operation_id: operationId, transaction: kind, digest },
      };
      for (;;) {
        await this.#refresh();
        const applied = this.#transactions.get(key);
        if (applied !== undefined) {
          if (applied.digest !== digest) {
            throw refusal(
              InvalidEvent,
              "this history operation id was already applied with a different transaction: " +
                "use a new operation id for a new transaction",
              { task: this.taskId, operation_id: operationId, earlier_seq: applied.seq },
            );
          }
          return;
        }
        let replaced: number[] = [];
        if (expected !== undefined) {
          const start = this.#texts.length - expected.length;
          const matches =
            start >= 0 &&
            expected.every((item, at) => canonicalText(this.#texts[start + at]!) === item);
          if (!matches) {
            throw refusal(
              InvalidEvent,
              "the session's last items no longer match the transaction's expected suffix: " +
                "read the session again and build a new transaction",
              { task: this.taskId, operation_id: operationId },
            );
          }
          replaced = this.#seqs.slice(start);
        }
        checkOneBatch(texts, replaced.length);
        try {
          await this.#appendItems(texts, replaced, marker, this.#revision);
          return;
        } catch (error) {
          if (error instanceof StaleRevision) continue;
          throw error;
        }
      }
    });
  }

  // -- lifetime ----------------------------------------------------------------------------

  /** The store holding the session, opened now if the session opens its own (`path`). */
  async store(): Promise<Store> {
    this.#checkOpen();
    if (this.#store !== undefined) return this.#store;
    this.#opening ??= Store.open(this.#path!, this.#openOptions).then(
      (store) => {
        this.#store = store;
        return store;
      },
      (error: unknown) => {
        this.#opening = undefined;
        throw error;
      },
    );
    return this.#opening;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Closes the session once its calls in flight have settled, and the store if the session
   * opened it (`path`); a shared store stays open. Later calls fail with `Closed`.
   * Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#queue.catch(() => undefined);
    if (this.#opening !== undefined) await this.#opening.catch(() => undefined);
    this.#task = undefined;
    this.#seqs = [];
    this.#texts = [];
    this.#knownCallIds.clear();
    this.#transactions.clear();
    if (this.#ownsStore && this.#store !== undefined) {
      await this.#store.close();
    }
  }

  /** `await using session = new FactlogSession(...)` closes it at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // -- the work ----------------------------------------------------------------------------

  #checkOpen(): void {
    if (this.#closed) {
      throw new Closed(
        `FactlogSession ${JSON.stringify(this.sessionId)} is closed: build a new session to use it`,
      );
    }
  }

  /** Runs `work` after every call made before it has settled: the fold is read and written
   * by one call at a time. */
  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(() => {
      this.#checkOpen();
      return work();
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The task handle, taken on first use: taking over an earlier holder's task syncs, so it
   * happens in a call, never in the constructor. */
  async #handle(): Promise<Task> {
    if (this.#task === undefined) {
      const store = await this.store();
      this.#task = store.task(this.taskId);
    }
    return this.#task;
  }

  /**
   * Appends one atomic batch: the removal of `removedSeqs` (if any), then the items, then
   * `marker` (if any). On a refusal of a typed event (a call id the task knows) it writes
   * every item as `record/put` instead. `expectedRevision` is a compare-and-set over the
   * whole batch (`StaleRevision`).
   */
  async #appendItems(
    texts: string[],
    removedSeqs: number[] = [],
    marker?: Event,
    expectedRevision?: number,
  ): Promise<void> {
    const task = await this.#handle();
    const items = texts.map((text) => JSON.parse(text) as unknown);
    const head = removals(removedSeqs);
    const tail = marker === undefined ? [] : [marker];
    const known = new Set(this.#knownCallIds);
    let events = [...head, ...items.map((item, at) => eventFor(item, texts[at]!, known)), ...tail];
    const options = { expectedRevision, durability: this.durability };
    let reply: AppendReply;
    try {
      reply = await task.appendBatch(events, options);
    } catch (error) {
      const typed = events.some((event) => !event.type.startsWith("record/"));
      if (!typed || !(error instanceof CallIdReused || error instanceof InvalidEvent)) {
        throw error;
      }
      if (expectedRevision === undefined) await this.#refresh();
      events = [...head, ...items.map(recordPut), ...tail];
      reply = await task.appendBatch(events, options);
    }
    const removed = new Set(removedSeqs);
    if (removed.size > 0) this.#removeSeqs(removed);
    if (texts.some((text) => text.includes('"$secret"'))) {
      // The store wrote references in place of the secrets: the next read folds them.
      return;
    }
    const first = reply.seq;
    if (this.#caughtUpBy(reply, events.length)) {
      for (let at = 0; at < events.length; at += 1) {
        const event = events[at]!;
        const seq = first + at;
        if (at >= head.length && at < head.length + texts.length) {
          this.#seqs.push(seq);
          this.#texts.push(texts[at - head.length]!);
          for (const callId of toolCallIds(event)) this.#knownCallIds.add(callId);
        } else if (event === marker) {
          this.#foldTransaction(seq, marker);
        }
      }
    }
  }

  /** After an append of `count` events: whether they directly follow what the fold has read
   * (no other handle wrote to the task in between), in which case the fold now covers them;
   * otherwise the next read catches up from the store. */
  #caughtUpBy(reply: AppendReply, count: number): boolean {
    if (reply.revision !== this.#revision + count) return false;
    this.#revision = reply.revision;
    this.#nextSeq = reply.seq + count;
    return true;
  }

  /** Folds the task's events appended since the last read, if its revision moved. */
  async #refresh(): Promise<void> {
    const task = await this.#handle();
    if ((await task.revision()) === this.#revision) return;
    for await (const event of task.events(this.#nextSeq)) {
      this.#apply(event);
      this.#nextSeq = event.seq + 1;
      this.#revision = event.revision;
    }
  }

  /** Applies one event of the task to the fold. */
  #apply(event: StoredEvent): void {
    const seq = event.seq;
    switch (event.type) {
      case "record/put":
        if (event.kind === ITEM_KIND) {
          this.#push(seq, JSON.stringify(event.value ?? null));
        } else if (event.kind === TRANSACTION_KIND) {
          this.#foldTransaction(seq, event);
        }
        break;
      case "user/message":
      case "assistant/message":
        for (const callId of toolCallIds(event)) this.#knownCallIds.add(callId);
        if ("item" in event) this.#push(seq, JSON.stringify(event.item));
        break;
      case "tool/call":
        if (typeof event.call_id === "string") this.#knownCallIds.add(event.call_id);
        break;
      case "record/removed":
        if (event.kind === ITEM_KIND) {
          if (Array.isArray(event.seqs) && event.seqs.length > 0) {
            this.#removeSeqs(new Set(event.seqs.map(Number)));
          }
          if (typeof event.through_seq === "number") this.#removeThrough(event.through_seq);
        }
        break;
      default:
        break;
    }
  }

  #push(seq: number, text: string): void {
    // The fold reads in seq order, and the session's own appends follow what it has read.
    if (this.#seqs.length > 0 && this.#seqs.at(-1)! >= seq) {
      throw new Error(`factlog session fold out of order: seq ${seq} after ${this.#seqs.at(-1)}`);
    }
    this.#seqs.push(seq);
    this.#texts.push(text);
  }

  #foldTransaction(seq: number, event: Record<string, unknown>): void {
    const value = event.value as { digest?: unknown } | null | undefined;
    if (typeof event.key === "string" && typeof value?.digest === "string") {
      this.#transactions.set(event.key, { seq, digest: value.digest });
    }
  }

  #removeSeqs(removed: ReadonlySet<number>): void {
    const seqs: number[] = [];
    const texts: string[] = [];
    for (let at = 0; at < this.#seqs.length; at += 1) {
      if (!removed.has(this.#seqs[at]!)) {
        seqs.push(this.#seqs[at]!);
        texts.push(this.#texts[at]!);
      }
    }
    this.#seqs = seqs;
    this.#texts = texts;
  }

  #removeThrough(throughSeq: number): void {
    let keep = 0;
    while (keep < this.#seqs.length && this.#seqs[keep]! <= throughSeq) keep += 1;
    this.#seqs = this.#seqs.slice(keep);
    this.#texts = this.#texts.slice(keep);
  }
}

// -- items and events -------------------------------------------------------------------------

/** The JSON text of an item, or `InvalidEvent` when it has none. */
function itemText(item: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(item) as string | undefined;
  } catch (error) {
    throw refusal(InvalidEvent, `a session item is not JSON: ${(error as Error).message}`, {});
  }
  if (typeof text !== "string" || typeof item !== "object" || item === null) {
    throw refusal(InvalidEvent, "a session item must be a JSON object", {});
  }
  return text;
}

/** The text of a message's `content`: the string itself, or the joined `text` of its parts of
 * type `partType`; `undefined` when the content has neither shape. */
function messageText(content: unknown, partType: string): string | undefined {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return undefined;
  let text = "";
  for (const part of content) {
    if (typeof part !== "object" || part === null) return undefined;
    const { type, text: partText } = part as { type?: unknown; text?: unknown };
    if (type === partType) {
      if (typeof partText !== "string") return undefined;
      text += partText;
    }
  }
  return text;
}

/** The event that holds `item`: a typed one when it maps to one (adding the call id of a
 * function call to `known`), else a `record/put`. */
function eventFor(item: unknown, text: string, known: Set<string>): Event {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return recordPut(item);
  if (Buffer.byteLength(text, "utf8") > TYPED_JSON_BYTES_MAX) return recordPut(item);
  const fields = item as Record<string, unknown>;
  const { type, role } = fields;
  if ((role === "user" || role === "assistant") && (type === undefined || type === "message")) {
    const messageTextOf = messageText(
      fields.content,
      role === "user" ? "input_text" : "output_text",
    );
    if (messageTextOf === undefined) return recordPut(item);
    return {
      type: role === "user" ? "user/message" : "assistant/message",
      text: messageTextOf,
      item,
    };
  }
  if (type === "function_call") {
    // The JS SDK names the call `callId`; the Responses API's own shape, `call_id`.
    const callId = fields.callId ?? fields.call_id;
    const name = fields.name;
    if (typeof callId !== "string" || callId === "" || typeof name !== "string" || name === "") {
      return recordPut(item);
    }
    if (known.has(callId)) return recordPut(item);
    known.add(callId);
    const call: Record<string, unknown> = { call_id: callId, tool: name };
    if ("arguments" in fields) call.args = fields.arguments;
    return { type: "assistant/message", text: "", tool_calls: [call], item };
  }
  return recordPut(item);
}

function recordPut(item: unknown): Event {
  return { type: "record/put", kind: ITEM_KIND, value: item };
}

/** The call ids an event's `tool_calls` name. */
function toolCallIds(event: Record<string, unknown>): string[] {
  const calls = event.tool_calls;
  if (!Array.isArray(calls)) return [];
  return calls
    .map((call) => (call as { call_id?: unknown } | null)?.call_id)
    .filter((callId): callId is string => typeof callId === "string");
}

/** `record/removed` events naming `seqs`, at most {@link REMOVED_SEQS_MAX} each. */
function removals(seqs: number[]): Event[] {
  const events: Event[] = [];
  for (let at = 0; at < seqs.length; at += REMOVED_SEQS_MAX) {
    const named = seqs.slice(at, at + REMOVED_SEQS_MAX);
    events.push({ type: "record/removed", kind: ITEM_KIND, seqs: named });
  }
  return events;
}

/** What an item costs in a batch: its JSON twice (a typed event repeats its text) and room
 * for the envelope. */
function batchCost(text: string): number {
  return 2 * Buffer.byteLength(text, "utf8") + 256;
}

/** Splits items into batches the store takes in one frame: at most {@link BATCH_ITEMS_MAX}
 * items and about 12 MiB of JSON each. */
function* batches(texts: string[]): Generator<string[]> {
  let batch: string[] = [];
  let size = 0;
  for (const text of texts) {
    const cost = batchCost(text);
    const full = batch.length === BATCH_ITEMS_MAX || size + cost > BATCH_JSON_BYTES_MAX;
    if (batch.length > 0 && full) {
      yield batch;
      batch = [];
      size = 0;
    }
    batch.push(text);
    size += cost;
  }
  if (batch.length > 0) yield batch;
}

/** Refuses with `LimitExceeded` a transaction that cannot be one atomic batch. */
function checkOneBatch(texts: string[], removedCount: number): void {
  const events = texts.length + Math.ceil(removedCount / REMOVED_SEQS_MAX) + 1;
  const bytes = texts.reduce((sum, text) => sum + batchCost(text), 0) + removedCount * 24;
  if (events > BATCH_ITEMS_MAX || bytes > BATCH_JSON_BYTES_MAX) {
    throw refusal(
      LimitExceeded,
      `a history transaction must be one atomic batch of at most ${BATCH_ITEMS_MAX} events and ` +
        "about 12 MiB of JSON: split it into several transactions",
      { events, limit: BATCH_ITEMS_MAX },
    );
  }
}

// -- history transactions ---------------------------------------------------------------------

/** A history transaction's arguments, checked and snapshot as JSON. */
interface TransactionSnapshot {
  operationId: string;
  kind: HistoryTransactionKind;
  /** The JSON texts of the items to add (`items` or `replacement`). */
  texts: string[];
  /** The canonical JSON of each item of `expectedSuffix` (`replace_suffix` only). */
  expected?: string[];
}

function snapshotTransaction(args: SessionHistoryTransactionArgs): TransactionSnapshot {
  if (typeof args !== "object" || args === null) {
    throw new InvalidOptions("applyHistoryTransaction takes { operationId, transaction }");
  }
  const { operationId, transaction } = args;
  if (typeof operationId !== "string" || operationId.trim() === "") {
    throw new InvalidOptions("a history transaction's operationId must be a non-empty string");
  }
  if (Buffer.byteLength(operationId, "utf8") > OPERATION_ID_BYTES_MAX) {
    throw refusal(
      LimitExceeded,
      `a history transaction's operationId must be at most ${OPERATION_ID_BYTES_MAX} bytes`,
      {},
    );
  }
  if (typeof transaction !== "object" || transaction === null) {
    throw new InvalidOptions("a history transaction must be an object");
  }
  const items = (list: unknown, name: string): string[] => {
    if (!Array.isArray(list)) {
      throw new InvalidOptions(`a history transaction's ${name} must be an array of items`);
    }
    return list.map(itemText);
  };
  if (transaction.type === "append_items") {
    return { operationId, kind: "append_items", texts: items(transaction.items, "items") };
  }
  if (transaction.type === "replace_suffix") {
    return {
      operationId,
      kind: "replace_suffix",
      texts: items(transaction.replacement, "replacement"),
      expected: items(transaction.expectedSuffix, "expectedSuffix").map(canonicalText),
    };
  }
  throw new InvalidOptions(
    `unknown history transaction type ${JSON.stringify((transaction as { type?: unknown }).type)}`,
  );
}

/** The canonical JSON of a JSON text: keys sorted, no whitespace. */
function canonicalText(text: string): string {
  return canonicalJson(JSON.parse(text));
}

/** `value` as JSON with every object's keys sorted, so equal values give equal text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const fields = value as Record<string, unknown>;
    const entries = Object.keys(fields)
      .filter((key) => fields[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(fields[key])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

// -- settings and errors ----------------------------------------------------------------------

function settings(value: SessionSettings | undefined): SessionSettings {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null) {
    throw new InvalidOptions("sessionSettings must be an object such as { limit: 20 }");
  }
  for (const key of Object.keys(value)) {
    if (key !== "limit") {
      throw new InvalidOptions(`unknown session setting ${JSON.stringify(key)} (known: limit)`);
    }
  }
  if (value.limit !== undefined && value.limit !== null && !Number.isInteger(value.limit)) {
    throw new InvalidOptions("sessionSettings.limit must be an integer");
  }
  return value.limit === undefined || value.limit === null ? {} : { limit: value.limit };
}

/** A refusal of class `cls` carrying `fields` in its reply, as the store's own refusals. */
function refusal<T extends typeof InvalidEvent | typeof LimitExceeded>(
  cls: T,
  message: string,
  fields: Record<string, unknown>,
): InstanceType<T> {
  return new cls(message, { error: cls.code, message, ...fields }) as InstanceType<T>;
}
