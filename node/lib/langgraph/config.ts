/**
 * What a saver is told: its own options ({@link FactlogSaverOptions}, checked by
 * {@link checkSaverOptions}) and LangGraph's `RunnableConfig` (the thread it names, its
 * durability mode, and the config that points at one checkpoint).
 *
 * @module
 */

import type { RunnableConfig } from "@langchain/core/runnables";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { InvalidOptions, type Durability, type OpenOptions } from "../index.js";
import type { FactlogSaver } from "./saver.js";

/** The key of LangGraph's durability mode in `config.configurable`. */
const DURABILITY_CONFIG_KEY = "__pregel_durability";
/** LangGraph's durability modes and the factlog tier each maps onto. */
const MODE_TIERS: Readonly<Record<string, Durability>> = {
  sync: "synced",
  async: "flushed",
  exit: "synced",
};
/** The factlog tiers, in the order an error message names them. */
const TIERS: readonly Durability[] = ["synced", "flushed", "buffered", "replicated"];

/** The options of a {@link FactlogSaver}. */
export interface FactlogSaverOptions {
  /** LangGraph's serializer (default: LangGraph's JSON-plus one). */
  serde?: SerializerProtocol;
  /** A fixed factlog tier for every checkpoint and write; without it (the default) the
   * saver follows LangGraph's durability mode (`sync` and `exit`: `synced`, `async`:
   * `flushed`). */
  durability?: Durability;
  /** How many threads' indexes stay in memory (default 256, at least 1). */
  threadsCached?: number;
  /** The most bytes (of JSON text) of record values the read cache keeps (default 32 MiB;
   * 0: no cache). */
  valueCacheBytes?: number;
}

/** The options of {@link FactlogSaver.fromPath}: the saver's, and how to open the store. */
export interface FactlogSaverOpenOptions extends FactlogSaverOptions {
  /** The options of `Store.open` (share the store, connect only, ...). */
  open?: OpenOptions;
}

/** Refuses (`InvalidOptions`) a durability that is not a factlog tier and cache bounds that
 * are not integers in range. */
export function checkSaverOptions(options: FactlogSaverOptions): void {
  const { durability, threadsCached, valueCacheBytes } = options;
  if (durability !== undefined && !TIERS.includes(durability)) {
    throw new InvalidOptions(
      `durability ${JSON.stringify(durability)} is not a factlog tier: give one of ` +
        `${TIERS.join(", ")}, or leave it out to follow LangGraph's durability mode`,
    );
  }
  if (threadsCached !== undefined && !(Number.isInteger(threadsCached) && threadsCached >= 1)) {
    throw new InvalidOptions(
      `threadsCached must be an integer of at least 1, not ${threadsCached}`,
    );
  }
  if (
    valueCacheBytes !== undefined &&
    !(Number.isInteger(valueCacheBytes) && valueCacheBytes >= 0)
  ) {
    throw new InvalidOptions(
      `valueCacheBytes must be an integer of at least 0, not ${valueCacheBytes}`,
    );
  }
}

/** The factlog tier of a save under `config`: `fixed` when given, else the tier of LangGraph's
 * durability mode. */
export function tierOf(config: RunnableConfig, fixed: Durability | undefined): Durability {
  if (fixed !== undefined) {
    return fixed;
  }
  const mode: unknown = config.configurable?.[DURABILITY_CONFIG_KEY] ?? "async";
  return MODE_TIERS[String(mode)] ?? "synced";
}

/** The thread id of `config`, or `undefined` when it names none. */
export function threadIdOf(config: RunnableConfig | undefined): string | undefined {
  const threadId: unknown = config?.configurable?.thread_id;
  return threadId === undefined || threadId === null || threadId === ""
    ? undefined
    : String(threadId);
}

/** The config that points at one checkpoint. */
export function pointer(threadId: string, ns: string, checkpointId: string): RunnableConfig {
  return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpointId } };
}
