// The factlog console's one script: hash routes (#/ the task lists, #/task/ID a task's
// timeline, #/health the store's health), every read through the console's API with the token
// of this page's URL, live updates by server-sent events. Text from the store is only ever set
// as text (textContent), never parsed as HTML.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const PAGE_TASKS = 100;
const PAGE_ATTENTION = 50;
const PAGE_EVENTS = 500;
// Pages of a timeline loaded by scrolling before the page asks for a click.
const AUTO_PAGES_MAX = 20;
// The events whose raw JSON one entry shows (a merged stream may hold thousands).
const RAW_EVENTS_MAX = 50;

// Render times of live events by seq (read by the browser tests to measure latency).
window.__factlog = { rendered: {}, ready: false };

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces the children of `node`: arrays are spread, absent children left out.
function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((child) => child !== undefined && child !== null && child !== false));
}

function apiUrl(path, params) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, value);
  }
  return url;
}

async function api(path, params, init) {
  const response = await fetch(apiUrl(path, params), {
    ...init,
    headers: { "x-factlog-token": TOKEN, ...(init && init.headers) },
    credentials: "omit",
  });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || `HTTP ${response.status}`);
    error.code = body && body.error && body.error.code;
    error.status = response.status;
    throw error;
  }
  return body;
}

function taskPath(task) { return `/api/tasks/${encodeURIComponent(task)}`; }
function time(text) { return text ? text.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—"; }
function badge(wait) {
  const details = [wait.tool && `tool ${wait.tool}`, wait.call_id && `call ${wait.call_id}`,
    wait.plan && `plan ${wait.plan}`, wait.approval_id && `approval ${wait.approval_id}`].filter(Boolean);
  return el("span", { class: `badge ${wait.reason}`, title: details.join(", ") },
    wait.reason.replace("_", " "), details.length ? `: ${details.join(", ")}` : "");
}
function showError(where, error) {
  fill(where, el("p", { class: "message error" }, error.message));
}
function throttle(fn, ms) {
  let timer = null, again = false;
  return () => {
    if (timer) { again = true; return; }
    fn();
    timer = setTimeout(() => { timer = null; if (again) { again = false; fn(); } }, ms);
  };
}

// The header: the store, its task count and last seq (kept current by the live stream).
const storeInfo = { dir: "", tasks: 0, last_seq: 0 };
function header(info) {
  Object.assign(storeInfo, info);
  document.getElementById("store").textContent = `${storeInfo.dir} · ${storeInfo.tasks} tasks · last seq ${storeInfo.last_seq}`;
  if (info.read_only !== undefined) document.getElementById("mode").hidden = !info.read_only;
}

// ---- live updates: one EventSource per view ----
let source = null;
function live(task, handlers) {
  if (source) source.close();
  source = new EventSource(apiUrl("/api/live", { token: TOKEN, task }));
  const indicator = document.getElementById("live");
  source.onopen = () => { indicator.className = "live on"; indicator.textContent = "live"; };
  source.onerror = () => { indicator.className = "live off"; indicator.textContent = "reconnecting"; };
  source.addEventListener("changed", (message) => header({ last_seq: JSON.parse(message.data).last_seq }));
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (message) => handler(JSON.parse(message.data)));
  }
}

// ---- #/ : the attention list, then every task ----
async function renderHome(main) {
  const state = { attentionOffset: 0, offset: 0, phase: "", q: "" };
  const attention = el("div");
  const all = el("div");
  const phase = el("select", { id: "phase-filter", "aria-label": "phase" }, el("option", { value: "" }, "every phase"));
  const text = el("input", { id: "text-filter", type: "search", placeholder: "filter by task, phase, tool, call…", "aria-label": "text" });
  const counts = el("span", { class: "muted" });
  fill(main,
    el("h1", {}, "Waiting for a person"), attention,
    el("h2", {}, "All tasks ", counts),
    el("div", { class: "filters" }, phase, text), all);

  async function overview() {
    const info = await api("/api/overview");
    header(info);
    const chosen = phase.value;
    fill(phase, el("option", { value: "" }, `every phase (${info.tasks})`),
      ...Object.entries(info.phases).map(([name, count]) => el("option", { value: name }, `${name} (${count})`)));
    phase.value = chosen;
    counts.textContent = `(${info.tasks})`;
  }
  async function loadAttention() {
    const page = await api("/api/attention", { offset: state.attentionOffset, limit: PAGE_ATTENTION });
    if (page.total === 0) {
      fill(attention, el("p", { class: "muted", id: "attention-empty" }, "No task waits for a person."));
    } else {
      fill(attention, table(page, true, "attention-table"),
        pager(page, (offset) => { state.attentionOffset = offset; loadAttention(); }));
    }
  }
  async function loadTasks() {
    const page = await api("/api/tasks", { offset: state.offset, limit: PAGE_TASKS, phase: state.phase, q: state.q });
    fill(all, table(page, false, "tasks-table"),
      pager(page, (offset) => { state.offset = offset; loadTasks(); }));
  }
  phase.addEventListener("change", () => { state.phase = phase.value; state.offset = 0; loadTasks(); });
  let typing = null;
  text.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = text.value.trim(); state.offset = 0; loadTasks(); }, 200);
  });
  const refresh = throttle(() => { overview(); loadAttention(); loadTasks(); }, 300);
  live(undefined, { changed: refresh, resync: refresh });
  try {
    await Promise.all([overview(), loadAttention(), loadTasks()]);
    performance.mark("factlog-attention-rendered");
    window.__factlog.ready = true;
  } catch (error) { showError(main, error); }
}

function table(page, waiting, id) {
  const head = waiting
    ? ["task", "waits for", "since seq", "phase", "last event"]
    : ["task", "phase", "revision", "last seq", "last event", "waits for"];
  const rows = page.tasks.map((task) => {
    const open = () => { location.hash = `#/task/${encodeURIComponent(task.task)}`; };
    const link = el("a", { href: `#/task/${encodeURIComponent(task.task)}` }, task.task);
    const waits = el("td", {}, task.attention.map(badge));
    const since = Math.min(...task.attention.map((wait) => wait.since_seq));
    const cells = waiting
      ? [el("td", {}, link), waits, el("td", { class: "num" }, Number.isFinite(since) ? since : "—"),
        el("td", {}, task.phase || "—"), el("td", {}, time(task.last_time))]
      : [el("td", {}, link), el("td", {}, task.phase || "—"), el("td", { class: "num" }, task.revision),
        el("td", { class: "num" }, task.last_seq), el("td", {}, time(task.last_time)), waits];
    return el("tr", { class: "row", "data-task": task.task, onclick: (event) => { if (event.target.tagName !== "A") open(); } }, cells);
  });
  if (rows.length === 0) return el("p", { class: "muted" }, "No task matches.");
  return el("table", { id }, el("thead", {}, el("tr", {}, head.map((name) => el("th", {}, name)))), el("tbody", {}, rows));
}

function pager(page, go) {
  if (page.total <= page.limit) return el("span");
  const last = Math.max(0, Math.floor((page.total - 1) / page.limit) * page.limit);
  return el("div", { class: "pager" },
    el("button", { class: "secondary", disabled: page.offset === 0, onclick: () => go(0) }, "first"),
    el("button", { class: "secondary", disabled: page.offset === 0, onclick: () => go(Math.max(0, page.offset - page.limit)) }, "previous"),
    el("span", { class: "muted" }, `${page.offset + 1}–${Math.min(page.total, page.offset + page.limit)} of ${page.total}`),
    el("button", { class: "secondary", disabled: page.offset >= last, onclick: () => go(page.offset + page.limit) }, "next"),
    el("button", { class: "secondary", disabled: page.offset >= last, onclick: () => go(last) }, "last"));
}

// ---- #/task/ID : summary, answers, timeline ----
async function renderTask(main, task) {
  answerOutcome = { kind: "", text: "" };
  const summary = el("div", { class: "card", id: "summary" });
  const answers = el("div", { class: "card", id: "answers" });
  const timeline = new Timeline(task);
  const stateView = el("details", {}, el("summary", {}, "Folded state (JSON)"), el("pre", { class: "raw", id: "state-json" }));
  const exportLink = el("a", { href: apiUrl(`${taskPath(task)}/export`, { token: TOKEN }), id: "export", download: "" }, "Export as JSON lines");
  fill(main, el("h1", {}, "Task ", el("code", {}, task)), summary, answers,
    el("div", { class: "toolbar" }, exportLink,
      el("button", { class: "secondary", onclick: () => timeline.start(1) }, "from the start"),
      el("button", { class: "secondary", onclick: () => timeline.latest() }, "latest events")),
    el("h2", {}, "Timeline"), timeline.root, stateView);

  async function loadSummary() {
    let detail;
    try { detail = await api(taskPath(task)); } catch (error) { showError(summary, error); return; }
    const s = detail.summary;
    timeline.lastSeq = s.last_seq;
    fill(summary, el("dl", { class: "kv" },
      el("dt", {}, "phase"), el("dd", {}, s.phase || "—"),
      el("dt", {}, "revision"), el("dd", {}, s.revision),
      el("dt", {}, "last event"), el("dd", {}, `seq ${s.last_seq}, ${time(s.last_time)}`),
      el("dt", {}, "waits for"), el("dd", { id: "task-attention" }, s.attention.length ? s.attention.map(badge) : "nothing")));
    // Drawn again only when what the task waits for changed: a task that streams keeps the
    // panel, and what the operator is typing in it, as it is.
    const waits = JSON.stringify(s.attention);
    if (answers.dataset.waits !== waits) {
      answers.dataset.waits = waits;
      renderAnswers(answers, task, s, loadSummary);
    }
    stateView.querySelector("pre").textContent = JSON.stringify(detail.state, null, 2);
  }
  const refresh = throttle(loadSummary, 300);
  live(task, {
    hello: (hello) => timeline.caughtUp(hello.last_seq),
    events: (batch) => timeline.live(batch.events),
    changed: (changed) => { if (changed.more || changed.tasks.includes(task)) refresh(); },
    resync: () => { refresh(); timeline.start(1); },
  });
  await Promise.all([loadSummary(), timeline.start(1)]);
  window.__factlog.ready = true;
}

function operatorFields() {
  const fields = document.getElementById("operator-template").content.cloneNode(true);
  const name = fields.querySelector("#operator-name");
  const note = fields.querySelector("#operator-note");
  name.value = localStorage.getItem("factlog-operator") || "";
  name.addEventListener("change", () => localStorage.setItem("factlog-operator", name.value.trim()));
  return { fields, name, note };
}

// What the last answer given on this page came to ({kind: "ok" | "error" | "", text}).
let answerOutcome = { kind: "", text: "" };

function renderAnswers(where, task, summary, reload) {
  const readOnly = !document.getElementById("mode").hidden;
  if (readOnly) {
    fill(where, el("p", { class: "muted" }, "This console is read-only: answer with the factlog commands."));
    return;
  }
  // Keep what the operator typed across refreshes.
  const typed = { name: where.querySelector("#operator-name"), note: where.querySelector("#operator-note") };
  const operator = operatorFields();
  if (typed.name) { operator.name.value = typed.name.value; operator.note.value = typed.note.value; }
  // The outcome of the last answer stays shown when the panel is drawn again for the new state.
  // The outcome of the last answer is kept beside the panel, which the live stream may draw
  // again while an answer is on its way: the reply then goes to the panel shown, not to the
  // one it was sent from.
  const message = el("div", { class: `message ${answerOutcome.kind}`, id: "answer-message", role: "status" }, answerOutcome.text);
  const say = (kind, text) => {
    answerOutcome = { kind, text };
    const shown = document.getElementById("answer-message");
    if (shown) { shown.className = `message ${kind}`; shown.textContent = text; }
  };
  async function send(body, button) {
    const name = operator.name.value.trim();
    if (!name) { say("error", "Enter your name: the answer records who gave it."); operator.name.focus(); return; }
    localStorage.setItem("factlog-operator", name);
    button.disabled = true;
    try {
      const reply = await api(`${taskPath(task)}/answer`, {}, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, operator: name, note: operator.note.value.trim() || null }),
      });
      say("ok", reply.recorded
        ? `Recorded as seq ${reply.recorded.seq} (revision ${reply.recorded.revision}).`
        : `Already recorded (seq ${reply.already.seq}).`);
      reload();
    } catch (error) {
      say("error", error.message);
    } finally { button.disabled = false; }
  }
  const items = summary.attention.map((wait) => {
    if (wait.reason === "outcome_unknown") {
      const result = el("textarea", { rows: 3, class: "result-json", "aria-label": "result JSON" }, "{}");
      const resolve = el("button", { class: "resolve" }, "Record this result");
      resolve.addEventListener("click", () => {
        let value;
        try { value = JSON.parse(result.value); } catch (error) {
          say("error", `The result is not JSON: ${error.message}`); return;
        }
        send({ action: "resolve", call_id: wait.call_id, result: value }, resolve);
      });
      const notRun = el("button", { class: "secondary not-run" }, "It never ran");
      notRun.addEventListener("click", () => send({ action: "not_run", call_id: wait.call_id }, notRun));
      return el("div", { class: "answer", "data-call": wait.call_id },
        el("strong", {}, `Call ${wait.call_id} (${wait.tool}): outcome unknown`),
        el("span", { class: "muted" }, ` · plan ${wait.plan || "—"} · since seq ${wait.since_seq}`),
        el("p", { class: "muted" }, "Did it run? Give what it returned, or say it never ran so the plan may dispatch it again."),
        result, el("div", { class: "row" }, resolve, notRun));
    }
    if (wait.reason === "approval_pending") {
      const scope = el("select", { class: "scope", "aria-label": "scope" }, ["once", "run", "persistent"].map((s) => el("option", { value: s }, s)));
      const approve = el("button", { class: "approve" }, "Approve");
      approve.addEventListener("click", () => send({ action: "approve", approval_id: wait.approval_id, scope: scope.value }, approve));
      const deny = el("button", { class: "danger deny" }, "Deny");
      deny.addEventListener("click", () => send({ action: "deny", approval_id: wait.approval_id }, deny));
      return el("div", { class: "answer", "data-approval": wait.approval_id },
        el("strong", {}, `Approval ${wait.approval_id} requested`),
        el("span", { class: "muted" }, ` · since seq ${wait.since_seq}`),
        el("div", { class: "row" }, el("label", {}, "scope ", scope), approve, deny));
    }
    const confirm = el("button", { class: "confirm" }, "Confirm and resume");
    confirm.addEventListener("click", () => send({ action: "confirm" }, confirm));
    const what = wait.reason === "paused" ? "The task is paused." : "The task waits for confirmation before it resumes.";
    return el("div", { class: "answer" }, el("strong", {}, what), el("span", { class: "muted" }, ` since seq ${wait.since_seq}`),
      el("div", { class: "row" }, confirm));
  });
  const cancel = el("button", { class: "danger cancel" }, "Cancel the running turn");
  cancel.addEventListener("click", () => send({ action: "cancel" }, cancel));
  fill(where, el("h2", {}, "Answer"), operator.fields,
    items.length ? items : el("p", { class: "muted" }, "The task waits for nobody."),
    el("div", { class: "row answer" }, cancel), message);
}

// The timeline: pages of the task's events folded into a tree of turns and steps; deltas
// merged into their message; each call paired with its outcome; approvals with their answer.
class Timeline {
  constructor(task) {
    this.task = task;
    this.root = el("div", { class: "timeline", id: "timeline" });
    this.sentinel = el("div", { class: "muted" });
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting) && this.pages < AUTO_PAGES_MAX) this.more();
    });
    this.lastSeq = 0;
  }
  reset(from) {
    this.generation = (this.generation || 0) + 1;
    this.next = from; this.done = false; this.loading = false; this.pages = 0; this.pending = 0;
    this.durableSeq = 0; this.durableItem = null;
    this.turn = null; this.step = null; this.stream = null;
    this.calls = new Map(); this.approvals = new Map();
    this.list = el("div");
    this.moreButton = el("button", { class: "secondary", onclick: () => this.more() }, "load more");
    this.newer = el("button", { class: "secondary", hidden: true, onclick: () => this.more() });
    fill(this.root, this.list, this.sentinel, this.moreButton, this.newer);
    this.observer.disconnect(); this.observer.observe(this.sentinel);
  }
  async start(from) { this.reset(from); await this.more(); }
  async latest() { await this.start(Math.max(1, this.lastSeq - 2 * PAGE_EVENTS)); }
  async more() {
    if (this.loading || this.done) return;
    this.loading = true;
    const generation = this.generation;
    try {
      const page = await api(`${taskPath(this.task)}/events`, { from: this.next, limit: PAGE_EVENTS });
      if (generation !== this.generation) return;
      if (this.next < page.first_seq && this.list.childElementCount === 0) {
        this.list.append(el("p", { class: "muted" }, `Events before seq ${page.first_seq} were reclaimed.`));
      }
      this.durableSeq = Math.max(this.durableSeq, page.durable_seq || 0);
      for (const event of page.events) this.add(event);
      this.next = page.next_seq; this.done = page.done; this.pages += 1;
      this.markDurable();
    } catch (error) {
      this.list.append(el("p", { class: "message error" }, error.message));
    } finally { this.loading = false; }
    this.moreButton.hidden = this.done;
    this.sentinel.textContent = this.done ? "— end of the task's events so far —" : "";
    if (!this.done && this.pages < AUTO_PAGES_MAX && this.isVisible(this.sentinel)) this.more();
  }
  isVisible(node) { const box = node.getBoundingClientRect(); return box.top < innerHeight; }
  // The stream says where the store was when it opened: read what was appended since our page.
  caughtUp(lastSeq) { if (this.done && lastSeq >= this.next) { this.done = false; this.more(); } }
  live(events) {
    const fresh = events.filter((event) => event.seq >= this.next);
    if (fresh.length === 0) return;
    if (!this.done || this.loading) {
      this.pending += fresh.length;
      this.newer.hidden = false; this.newer.textContent = `${this.pending} newer events: load them`;
      return;
    }
    const stamp = performance.timeOrigin + performance.now();
    for (const event of fresh) { this.add(event); window.__factlog.rendered[event.seq] = stamp; }
    this.next = fresh[fresh.length - 1].seq + 1;
    this.durableSeq = Math.max(this.durableSeq, this.next - 1);
    this.markDurable();
  }
  container() { return this.step ? this.step.body : this.turn ? this.turn.body : this.list; }
  item(event, cls, ...content) {
    const raw = el("pre", { class: "raw", hidden: true });
    const node = el("div", { class: `item ${cls || ""}`, "data-seq": event.seq, "data-type": event.type },
      el("span", { class: "seq" }, `#${event.seq}`), el("span", { class: "type" }, event.type), ...content, raw);
    node.events = [event];
    node.addEventListener("click", (click) => {
      if (click.target.closest("button, a, textarea, input, select")) return;
      click.stopPropagation();
      raw.hidden = !raw.hidden;
      if (!raw.hidden) {
        const shown = node.events.slice(0, RAW_EVENTS_MAX).map((e) => JSON.stringify(e, null, 2));
        const more = node.events.length - shown.length;
        if (more > 0) shown.push(`… and ${more} more events (the export has them all)`);
        raw.textContent = shown.join("\n");
      }
    });
    node.title = `${event.time} (click for the raw JSON)`;
    return node;
  }
  node(event, cls, title) {
    const body = el("div");
    const head = this.item(event, "head", title);
    const node = el("div", { class: `node ${cls}` }, head, body);
    return { node, body, head };
  }
  add(event) {
    const type = event.type;
    this.maxSeq = event.seq;
    if (type !== "assistant/delta") this.stream = null;
    if (type === "turn/start") {
      this.step = null;
      this.turn = this.node(event, "turn", "turn");
      this.list.append(this.turn.node);
      return;
    }
    if (type === "step/start") {
      this.step = this.node(event, "step", "step");
      (this.turn ? this.turn.body : this.list).append(this.step.node);
      return;
    }
    if (type === "assistant/delta") {
      if (!this.stream) {
        this.stream = this.item(event, "stream", el("span", { class: "text" }), el("span", { class: "muted count" }));
        this.stream.text = "";
        this.container().append(this.stream);
      } else { this.stream.events.push(event); this.stream.dataset.last = event.seq; }
      this.stream.text += event.text || "";
      this.stream.querySelector(".text").textContent = this.stream.text;
      this.stream.querySelector(".count").textContent = ` (${this.stream.events.length} deltas)`;
      this.stream.dataset.lastSeq = event.seq;
      return;
    }
    if (type === "tool/call") {
      const call = this.item(event, "call", el("strong", {}, event.tool), ` call ${event.call_id}`,
        event.effect ? el("span", { class: "badge" }, event.effect) : null, el("div", { class: "outcome muted" }, "no result yet"));
      this.calls.set(event.call_id, call);
      this.container().append(call);
      return;
    }
    if (type === "tool/result" || type === "tool/outcome_unknown" || type === "tool/not_run") {
      const call = this.calls.get(event.call_id);
      const text = type === "tool/result"
        ? `→ ${event.status || event.outcome || "result"} ${shorten(event.output ?? event.result)}${event.operator ? ` (by operator ${event.operator.name || JSON.stringify(event.operator)})` : ""}`
        : type === "tool/not_run" ? `→ never ran${event.operator ? ` (by operator ${event.operator.name || ""})` : ""}`
          : `→ outcome unknown, plan ${event.plan || "—"}`;
      if (call) {
        call.events.push(event);
        call.dataset.lastSeq = event.seq;
        const outcome = call.querySelector(".outcome");
        outcome.textContent = text;
        outcome.className = "outcome";
        call.classList.toggle("unknown", type === "tool/outcome_unknown");
        return;
      }
      this.container().append(this.item(event, type === "tool/outcome_unknown" ? "unknown" : "", ` call ${event.call_id} ${text}`));
      return;
    }
    if (type.startsWith("approval/")) {
      const known = this.approvals.get(event.approval_id);
      if (type !== "approval/request" && known) {
        known.events.push(event);
        known.dataset.lastSeq = event.seq;
        known.querySelector(".answer-text").textContent = ` → ${type.slice(9)}${event.scope ? ` (${event.scope})` : ""}`;
        return;
      }
      const item = this.item(event, "approval", ` ${event.approval_id}`, el("span", { class: "answer-text muted" }, type === "approval/request" ? " → waiting" : ""));
      this.approvals.set(event.approval_id, item);
      this.container().append(item);
      return;
    }
    let text = "";
    if (type === "user/message" || type === "assistant/message") text = event.text ?? "";
    else if (type === "task/phase") text = event.phase ?? "";
    else if (type === "turn/end" || type === "step/end") text = event.status ?? "";
    else text = shorten(Object.fromEntries(Object.entries(event).filter(([k]) => !["seq", "task", "revision", "timestamp_us", "time", "type"].includes(k))));
    this.container().append(this.item(event, type.replace("/", "-"), el("span", { class: "text" }, text)));
    if (type === "turn/end") { this.turn = null; this.step = null; }
    if (type === "step/end") this.step = null;
  }
  markDurable() {
    // The last event of this task at or before the last record in the store's files.
    const candidates = this.list.querySelectorAll(".item");
    let best = null, bestSeq = 0;
    for (const item of candidates) {
      const seq = Number(item.dataset.lastSeq || item.dataset.seq);
      if (seq <= this.durableSeq && seq >= bestSeq) { best = item; bestSeq = seq; }
    }
    if (best === this.durableItem) return;
    if (this.durableItem) { this.durableItem.classList.remove("durable"); this.durableItem.querySelector(".durable-mark")?.remove(); }
    this.durableItem = best;
    if (best) { best.classList.add("durable"); best.insertBefore(el("span", { class: "durable-mark" }, "last durable fact"), best.querySelector("pre.raw")); }
  }
}

function shorten(value) {
  if (value === undefined || value === null) return "";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

// ---- #/health ----
function opened(report) {
  const snapshot = report.snapshot_seq ? `the snapshot covering seq ${report.snapshot_seq}` : "no snapshot";
  return `${snapshot}, then ${report.replayed_events} events replayed, ${report.tasks} tasks`;
}

async function renderHealth(main) {
  fill(main, el("h1", {}, "Store health"), el("p", { class: "muted" }, "Reading…"));
  const draw = async () => {
    let h;
    try { h = await api("/api/health"); } catch (error) { showError(main, error); return; }
    const kv = (pairs) => el("dl", { class: "kv" }, pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v ?? "—")]));
    const holder = h.holder ? `process ${h.holder.pid ?? "?"}${h.holder.served ? ", serving it" : ", not serving it"}` : "nobody";
    const segments = el("table", { id: "segments" }, el("thead", {}, el("tr", {}, ["segment", "first seq", "bytes", "sealed"].map((n) => el("th", {}, n)))),
      el("tbody", {}, (h.segments || []).map((s) => el("tr", {}, el("td", {}, s.id), el("td", { class: "num" }, s.first_seq), el("td", { class: "num" }, s.file_bytes), el("td", {}, s.sealed ? "yes" : "no")))));
    const replicas = (h.replicas || []).length === 0 ? el("p", { class: "muted" }, "No replication.")
      : el("table", {}, el("thead", {}, el("tr", {}, ["replica", "shipped seq", "lag (records)", "running", "last error"].map((n) => el("th", {}, n)))),
        el("tbody", {}, h.replicas.map((r) => el("tr", {}, el("td", {}, r.location || r.path), el("td", { class: "num" }, r.shipped_seq ?? "—"), el("td", { class: "num" }, r.lag ?? "—"), el("td", {}, r.running ? "yes" : "no"), el("td", {}, r.last_error || r.unreadable || "—")))));
    fill(main, el("h1", {}, "Store health"),
      h.error ? el("p", { class: "message error" }, h.error) : null,
      el("div", { class: "card", id: "health" }, kv([
        ["directory", h.dir], ["format version", h.format_version], ["first seq", h.first_seq], ["last seq", h.last_seq],
        ["durable seq", h.durable_seq], ["segment bytes", h.segment_bytes], ["tasks", h.tasks], ["waiting for a person", h.attention],
        ["holder", holder], ["served clients", h.served_clients ? `${h.served_clients.now} of at most ${h.served_clients.max} (this console's included)` : "not served"],
        ["console reads", h.console && `${h.console.source === "served" ? "through the serving process" : "the store's files, read-only"} (seen seq ${h.console.seen_seq})`],
        ["console's first read", h.console && h.console.opened && opened(h.console.opened)],
        ["last read error", h.console && h.console.last_error]])),
      el("h2", {}, "Segments"), segments,
      el("h2", {}, "Snapshots"), (h.snapshots || []).length ? el("ul", {}, h.snapshots.map((s) => el("li", {}, `covers seq ${s.covered_seq}, ${s.file_bytes} bytes`))) : el("p", { class: "muted" }, "No snapshot."),
      el("h2", {}, "Replication"), replicas);
    window.__factlog.ready = true;
  };
  live(undefined, { changed: throttle(draw, 1000) });
  await draw();
}

// ---- routing ----
async function route() {
  window.__factlog.ready = false;
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  for (const link of document.querySelectorAll("header nav a")) link.classList.toggle("current", link.getAttribute("href") === (hash.startsWith("#/health") ? "#/health" : "#/"));
  if (!TOKEN) {
    fill(main, el("p", { class: "message error" }, "This page needs the console's token: open the URL that `factlog ui` printed."));
    return;
  }
  if (hash.startsWith("#/task/")) return renderTask(main, decodeURIComponent(hash.slice("#/task/".length)));
  if (hash.startsWith("#/health")) return renderHealth(main);
  return renderHome(main);
}

window.addEventListener("hashchange", route);
api("/api/overview").then(header).catch(() => {}).finally(route);
