/**
 * A run of the OpenAI Agents JS SDK on a `FactlogSession`, interrupted between a tool call and
 * its result, resumes with the plan recovery gives the call and never runs an unsafe tool
 * twice. The harness side is the test's tool: it records the dispatch (`tool/call`, synced)
 * before it acts and the result after, and obeys the store's refusals and duplicates. The
 * crash is a child process killed with SIGKILL after the side effect (plan `ask_user`), and
 * the store closed under a run after the dispatch of a queryable call (plan `verify`). The SDK
 * writes a turn's items to the session when the turn ends, so the interrupted turn leaves no
 * item there: the store's synced dispatch is what tells the harness a tool may have run.
 */

import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, expect, test } from "vitest";
import { z } from "zod";
import { Agent, run, setTracingDisabled, tool, type AgentInputItem } from "@openai/agents-core";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { Closed, NeedsRecovery, Store, type Task } from "factlog";
import { FactlogSession } from "factlog/agents";
import { packageDir, tempDir } from "./helpers.js";

setTracingDisabled(true);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The lines of the side-effect file: one per flight actually booked. */
function bookings(effects: string): string[] {
  return readFileSync(effects, "utf8").split("\n").filter(Boolean);
}

/** The harness's booking tool: the dispatch is recorded (synced) before the effect, the result
 * after it; a refusal or a duplicate of the store is answered without booking. */
function bookingTool(task: Task, effects: string) {
  return tool({
    name: "book_flight",
    description: "Books a flight and charges the card.",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }, _context, details) => {
      const callId = details!.toolCall!.callId;
      let reply;
      try {
        reply = await task.append({
          type: "tool/call",
          call_id: callId,
          tool: "book_flight",
          effect: "unsafe",
          args: { city },
        });
      } catch (error) {
        if (!(error instanceof NeedsRecovery)) throw error;
        const open = error.calls.map((call) => `${call.call_id} (${call.plan})`).join(", ");
        return `not booked: first settle ${open}`;
      }
      if (reply.duplicate === true) return `already booked: ${JSON.stringify(reply.receipt)}`;
      appendFileSync(effects, `${callId} ${city}\n`);
      await task.append({ type: "tool/result", call_id: callId, outcome: "ok", receipt: { city } });
      return "booked";
    },
  });
}

type Plan = { call_id: string; outcome: string; plan: string };

async function plansOf(store: Store, task: string): Promise<Plan[]> {
  const report = await store.recover();
  const found = report.tasks.find((entry) => entry.task === task) as { calls: Plan[] } | undefined;
  return found?.calls ?? [];
}

function outputs(items: AgentInputItem[]): Record<string, string> {
  const found: Record<string, string> = {};
  for (const entry of items as Array<Record<string, any>>) {
    if (entry.type === "function_call_result") found[entry.callId] = entry.output?.text;
  }
  return found;
}

test("a run killed after an unsafe call's effect resumes with ask_user and books once", async () => {
  const { dir: path, cleanup } = tempDir("factlog-agents-recovery-");
  cleanups.push(cleanup);
  const effects = `${path}.effects`;
  writeFileSync(effects, "");
  // The first process: the model asks for a booking; the tool records its dispatch, books,
  // and the process is killed before the result is recorded.
  const child = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { appendFileSync } from "node:fs";
       import { z } from "zod";
       import { Agent, run, setTracingDisabled, tool } from "@openai/agents-core";
       import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
       import { FactlogSession } from "factlog/agents";
       setTracingDisabled(true);
       const [path, effects] = process.argv.slice(1);
       const session = new FactlogSession({ path, sessionId: "trip" });
       const task = (await session.store()).task(session.taskId);
       const book = tool({
         name: "book_flight",
         description: "Books a flight and charges the card.",
         parameters: z.object({ city: z.string() }),
         execute: async ({ city }, _context, details) => {
           const callId = details.toolCall.callId;
           await task.append({
             type: "tool/call", call_id: callId, tool: "book_flight", effect: "unsafe", args: { city },
           });
           appendFileSync(effects, callId + " " + city + "\\n");
           process.stdout.write("booked\\n");
           await new Promise(() => {});
         },
       });
       const model = new ScriptedModel([
         [functionCall("book_flight", { city: "Paris" }, { callId: "call_book" })],
         [assistantMessage("Booked.")],
       ]);
       await run(new Agent({ name: "travel", model, tools: [book] }), "Book me a flight to Paris", { session });`,
      path,
      effects,
    ],
    { cwd: packageDir, stdio: ["ignore", "pipe", "inherit"] },
  );
  const killed = new Promise<NodeJS.Signals | null>((done) => child.on("exit", (_, signal) => done(signal)));
  await new Promise<void>((booked, failed) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("booked\n")) {
        child.kill("SIGKILL");
        booked();
      }
    });
    child.on("exit", () => failed(new Error("the first process exited before booking")));
  });
  expect(await killed).toBe("SIGKILL");
  expect(bookings(effects)).toEqual(["call_book Paris"]);

  // The harness restarts: recovery records the unknown outcome and says what to do.
  const store = await Store.open(path);
  cleanups.push(() => store.close());
  expect(await plansOf(store, "trip")).toEqual([
    expect.objectContaining({ call_id: "call_book", outcome: "outcome_unknown", plan: "ask_user" }),
  ]);
  const session = new FactlogSession({ store, sessionId: "trip" });
  cleanups.push(() => session.close());
  // The SDK writes a turn's items to its session when the turn ends: the interrupted turn
  // left none there, and only the store's facts (the synced dispatch) say what happened.
  expect(await session.getItems()).toEqual([]);
  const task = store.task(session.taskId);
  const agent = (model: ScriptedModel) =>
    new Agent({ name: "travel", model, tools: [bookingTool(task, effects)] });

  // Resumed, the model asks for a new booking: the store refuses its dispatch while the first
  // call's outcome is unknown, so the tool does not book.
  const asking = new ScriptedModel([
    [functionCall("book_flight", { city: "Paris" }, { callId: "call_book_2" })],
    [assistantMessage("Did your first booking go through?")],
  ]);
  await run(agent(asking), "Are you there?", { session });
  expect(outputs(await session.getItems()).call_book_2).toBe(
    "not booked: first settle call_book (ask_user)",
  );
  expect(bookings(effects)).toEqual(["call_book Paris"]);

  // The user says it did: the harness records that as the call's result. A model asking for
  // the same call again gets the stored receipt; nothing is booked.
  await task.append({
    type: "tool/result",
    call_id: "call_book",
    outcome: "ok",
    receipt: { city: "Paris", confirmed_by: "user" },
  });
  const again = new ScriptedModel([
    [functionCall("book_flight", { city: "Paris" }, { callId: "call_book" })],
    [assistantMessage("You are booked to Paris.")],
  ]);
  const result = await run(agent(again), "Yes, I got the confirmation.", { session });
  expect(result.finalOutput).toBe("You are booked to Paris.");
  expect(outputs(await session.getItems()).call_book).toBe(
    'already booked: {"city":"Paris","confirmed_by":"user"}',
  );
  expect(bookings(effects)).toEqual(["call_book Paris"]);
  const state = (await task.state()) as unknown as {
    session: { calls: Record<string, { status: string; dispatches: number }> };
  };
  expect(state.session.calls.call_book).toMatchObject({ status: "completed", dispatches: 1 });
  expect(state.session.calls.call_book_2!.status).toBe("not_started");
});

test("a store closed under a run after a queryable dispatch resumes with verify", async () => {
  const { dir: path, cleanup } = tempDir("factlog-agents-recovery-");
  cleanups.push(cleanup);
  const effects = `${path}.effects`;
  writeFileSync(effects, "");
  const session = new FactlogSession({ path, sessionId: "refund" });
  const task = (await session.store()).task(session.taskId);
  const refund = tool({
    name: "refund",
    description: "Refunds an order; the payment service can be asked whether it did.",
    parameters: z.object({ order: z.string() }),
    execute: async ({ order }, _context, details) => {
      await task.append({
        type: "tool/call",
        call_id: details!.toolCall!.callId,
        tool: "refund",
        effect: "queryable",
        args: { order },
      });
      appendFileSync(effects, `refund ${order}\n`);
      await session.close(); // the harness goes away between the call and its result
      throw new Error("the harness stopped");
    },
  });
  const model = new ScriptedModel([
    [functionCall("refund", { order: "o-17" }, { callId: "call_refund" })],
    [assistantMessage("Refunded.")],
  ]);
  await expect(
    run(new Agent({ name: "support", model, tools: [refund] }), "Refund order o-17", { session }),
  ).rejects.toThrow(Closed); // the runner could not write the turn to the closed session

  const store = await Store.open(path);
  cleanups.push(() => store.close());
  expect(await plansOf(store, "refund")).toEqual([
    expect.objectContaining({ call_id: "call_refund", outcome: "outcome_unknown", plan: "verify" }),
  ]);
  // verify: the harness asks the payment service (here, the effects file) and records what
  // it found, so the refund is not run again.
  expect(bookings(effects)).toEqual(["refund o-17"]);
  const resumed = store.task("refund");
  await resumed.append({
    type: "tool/result",
    call_id: "call_refund",
    outcome: "ok",
    receipt: { order: "o-17" },
  });
  const reply = await resumed.append({
    type: "tool/call",
    call_id: "call_refund",
    tool: "refund",
    effect: "queryable",
    args: { order: "o-17" },
  });
  expect(reply).toMatchObject({ duplicate: true, receipt: { order: "o-17" } });
  const reopened = new FactlogSession({ store, sessionId: "refund" });
  cleanups.push(() => reopened.close());
  // The interrupted turn never reached the session (the SDK writes a turn when it ends), and
  // the closed store refused the rest of the run: the session goes on from the log.
  expect(await reopened.getItems()).toEqual([]);
  const after = new ScriptedModel([[assistantMessage("Your refund of o-17 went through.")]]);
  await run(new Agent({ name: "support", model: after }), "Did my refund work?", { session: reopened });
  expect(await reopened.getItems()).toHaveLength(2);
});
