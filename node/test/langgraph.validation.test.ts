/**
 * LangGraph's conformance suite (`@langchain/langgraph-checkpoint-validation`) against
 * `FactlogSaver`, every test of it twice: on an embedded store, and on a store another process
 * holds and serves (`servedStore`), reached through its socket. Its opt-in delta-channel
 * history tests run too. Each checkpointer the suite creates gets a store of its own, so no
 * test sees another's threads.
 */

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test } from "vitest";
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import type { CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { FactlogSaver } from "factlog/langgraph";
import { servedStore, tempDir } from "./helpers.js";

// The suite calls the test functions as globals (Jest's style); the package's vitest
// configuration does not install them, so this file does, before the suite is declared.
Object.assign(globalThis, {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  test,
});

/** What a checkpointer of the suite holds: its teardown, run by `destroyCheckpointer`. */
const teardowns = new WeakMap<FactlogSaver, () => Promise<void>>();
/** Teardowns not yet run (a suite that failed before destroying its checkpointer). */
const pending = new Set<() => Promise<void>>();

afterAll(async () => {
  for (const teardown of pending) await teardown();
});

function initializer(served: boolean): CheckpointSaverTestInitializer<FactlogSaver> {
  return {
    // The suite skips some of its tests for checkpointers it names; this name is none of them.
    checkpointerName: served ? "FactlogSaver (served store)" : "FactlogSaver (embedded store)",
    async createCheckpointer() {
      const { dir, cleanup } = tempDir("factlog-langgraph-");
      const held = served ? await servedStore(dir) : undefined;
      const saver = await FactlogSaver.fromPath(dir);
      if (served && saver.store.servedBy !== held!.pid) {
        throw new Error("the saver did not connect to the serving process");
      }
      const teardown = async () => {
        pending.delete(teardown);
        await saver.close();
        await held?.stop();
        cleanup();
      };
      pending.add(teardown);
      teardowns.set(saver, teardown);
      return saver;
    },
    async destroyCheckpointer(saver) {
      await teardowns.get(saver)?.();
    },
  };
}

for (const served of [false, true]) {
  describe(served ? "served store" : "embedded store", () => {
    const init = initializer(served);
    validate(init);
    deltaChannelHistoryTests(init);
  });
}
