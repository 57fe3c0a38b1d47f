//! The state is a deterministic fold of the events (R10), and a snapshot is only an
//! accelerator (R6, R7). A seeded generator (hand-rolled PRNG, many seeds) drives random valid
//! work over several tasks through the `Store` API on the simulated file system: contracts,
//! phases, plans, todos, turns, steps, deltas, messages asking for tool calls, dispatches with
//! effects, request keys and approvals, results, duplicate dispatches, approvals, cancels,
//! pauses, resumes, budget, compaction, compare-and-set batches (fresh and stale), recoveries
//! and reopens. After each run:
//! - folding every event of `store.events(Seq(1))` with `harness::apply` into a fresh `State`
//!   equals `store.state()`, before and after a reopen, and `verify_deep` agrees;
//! - for random cut points `c`, the fold of the first `c` events, serialised and read back as a
//!   snapshot body is, then folded with the rest, equals the fold of all events;
//! - with `store.checkpoint()` at random points, a reopen loads the newest snapshot (the open
//!   report names it), replays exactly the events after it and gives the same state; removing
//!   snapshots newest first falls back to each older one and finally to full replay.
//!
//! A damaged newest snapshot (a flipped byte in a file under `DIR/snapshots/`) is skipped with
//! its reason in `open_report().skipped_snapshots`, and the state is the same.
//!
//! `FACTLOG_HARNESS_SEEDS=200 cargo test --release --test integration harness_fold::` runs more seeds.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::harness::{
    NOW_US, Rng, SIM_DIR, approval_request, assistant, cancel, contract, env_u64, err_of, events,
    fold, grant, open, open_sim, phase, result, resume, sim_options, step_end, step_start,
    turn_end, turn_start, user,
};
use factlog::fs::sim::SimFs;
use factlog::harness::event::{
    ApprovalDeny, BudgetUsage, ContextCompacted, Effect, Plan, Risk, Scope, Signal, Todo, ToolCall,
};
use factlog::harness::{Body, Event, RequestKey, State, TaskId, apply, request_key};
use factlog::{AppendOptions, Appended, ErrorKind, Seq, Store, StoreOptions};
use serde_json::json;

const TASKS: [&str; 3] = ["task-a", "task-b", "task-c"];

fn seeds() -> u64 {
    env_u64("FACTLOG_HARNESS_SEEDS", 12)
}

/// What the generator knows of one task, to produce only events the store accepts.
#[derive(Default)]
struct TaskModel {
    turn_open: bool,
    step_open: bool,
    /// Asked for by a message, never dispatched.
    announced: Vec<String>,
    /// Dispatched, no result.
    in_flight: Vec<String>,
    /// Given an unknown outcome by a recovery: may be dispatched again or answered.
    unknown: Vec<String>,
    /// Calls with a result.
    completed: Vec<String>,
    /// Request keys with a receipt.
    completed_keys: Vec<RequestKey>,
    /// The key each dispatched call carries.
    keys: BTreeMap<String, Option<RequestKey>>,
    /// The arguments each dispatched call carries: a retry or a duplicate repeats them.
    args: BTreeMap<String, Option<serde_json::Value>>,
    /// Whether the open store holds the task: the first handle on it after a reopen takes it
    /// over, which does to it what a recovery does.
    held: bool,
    /// Every approval id used so far.
    approvals: Vec<String>,
    next_id: u64,
}

impl TaskModel {
    /// What taking the task over from an earlier holder (or a recovery) does to it.
    fn take_over(&mut self) {
        if !self.held {
            let in_flight = std::mem::take(&mut self.in_flight);
            self.unknown.extend(in_flight);
            self.turn_open = false;
            self.step_open = false;
            self.held = true;
        }
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }
}

/// One generated run: the store and what it did.
struct Run {
    fs: SimFs,
    store: Store,
    /// The covered seq of every checkpoint, in order.
    checkpoints: Vec<u64>,
    /// Event types written, counted (for the coverage check).
    written: BTreeMap<String, u64>,
}

fn random_effect(rng: &mut Rng) -> Effect {
    *rng.pick(&Effect::ALL)
}

/// Appends `body` and expects it written; returns its first seq.
#[track_caller]
fn must(store: &Store, task: &str, body: Body) -> Seq {
    let what = body.type_name();
    match store.task(task).expect("task").append(body) {
        Ok(Appended::Written { seq, .. }) => seq,
        other => panic!("{task}: {what}: {other:?}"),
    }
}

#[expect(clippy::too_many_lines, reason = "one arm per kind of generated work")]
fn generate(seed: u64, steps: usize, checkpoints: bool) -> Run {
    let mut rng = Rng(seed);
    let fs = SimFs::new(seed);
    let mut store = open_sim(&fs).expect("open");
    let mut models: BTreeMap<&str, TaskModel> =
        TASKS.iter().map(|t| (*t, TaskModel::default())).collect();
    let mut run_checkpoints = Vec::new();
    for _ in 0..steps {
        let task_id = *rng.pick(&TASKS);
        let task = store.task(task_id).expect("task");
        let model = models.get_mut(task_id).expect("model");
        model.take_over();
        let last = store.log().last_seq();
        match rng.below(100) {
            0..=2 => {
                let risk = if rng.chance(25) { Risk::High } else { Risk::Low };
                must(&store, task_id, contract(&format!("goal {}", rng.below(1000)), risk));
            }
            3..=5 => {
                must(&store, task_id, phase(&format!("phase-{}", rng.below(5))));
            }
            6 => {
                let steps = (0..rng.below(4)).map(|i| format!("step {i}")).collect();
                must(&store, task_id, Body::Plan(Plan { steps, ..Default::default() }));
            }
            7..=8 => {
                let status = ["pending", "in_progress", "done", "dropped"][rng.below(4) as usize];
                let todo = Todo {
                    todo_id: format!("todo-{}", rng.below(4)),
                    text: rng.chance(50).then(|| format!("text {}", rng.below(100))),
                    status: rng.chance(80).then(|| status.to_owned()),
                    ..Default::default()
                };
                must(&store, task_id, Body::Todo(todo));
            }
            9..=14 => {
                if model.turn_open {
                    must(&store, task_id, turn_end());
                    model.turn_open = false;
                    model.step_open = false;
                } else {
                    must(&store, task_id, turn_start());
                    // A new turn starts with no step open.
                    model.turn_open = true;
                    model.step_open = false;
                }
            }
            15..=20 => {
                if model.step_open {
                    must(&store, task_id, step_end());
                    model.step_open = false;
                } else {
                    must(&store, task_id, step_start());
                    model.step_open = true;
                }
            }
            21..=32 => {
                for _ in 0..1 + rng.below(6) {
                    task.delta(&format!("tok{} ", rng.below(100))).expect("delta");
                }
            }
            33..=36 => {
                must(&store, task_id, user(&format!("user says {}", rng.below(100))));
            }
            37..=42 => {
                let ids: Vec<String> = (0..rng.below(4)).map(|_| model.fresh_id("c")).collect();
                let calls: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "tool")).collect();
                must(&store, task_id, assistant("assembled", &calls));
                model.announced.extend(ids);
            }
            43..=54 => {
                // Dispatch: an announced call, a call with an unknown outcome (a retry) or a
                // new one; sometimes with a request key, sometimes naming an approval.
                let (id, from) = match rng.below(3) {
                    0 if !model.announced.is_empty() => {
                        let at = rng.below(model.announced.len() as u64) as usize;
                        (model.announced.remove(at), 0)
                    }
                    1 if !model.unknown.is_empty() => {
                        let at = rng.below(model.unknown.len() as u64) as usize;
                        (model.unknown.remove(at), 1)
                    }
                    _ => (model.fresh_id("c"), 2),
                };
                // A retry repeats the request: the same key and the same arguments.
                let fresh_key = rng
                    .chance(50)
                    .then(|| request_key::derive(task.id(), &format!("op:{id}"), task.revision()));
                let fresh_args = rng.chance(60).then(|| json!({"n": rng.below(10), "id": id}));
                let (key, args) = if from == 1 {
                    (model.keys[&id].clone(), model.args[&id].clone())
                } else {
                    (fresh_key, fresh_args)
                };
                let approval_id = (rng.chance(25) && !model.approvals.is_empty())
                    .then(|| rng.pick(&model.approvals).as_str().into());
                let body = Body::ToolCall(ToolCall {
                    call_id: id.as_str().into(),
                    tool: "tool".to_owned(),
                    effect: random_effect(&mut rng),
                    request_key: key.clone(),
                    args: args.clone(),
                    approval_id,
                    ..Default::default()
                });
                match task.append(body) {
                    Ok(Appended::Written { .. }) => {
                        model.keys.insert(id.clone(), key);
                        model.args.insert(id.clone(), args);
                        model.in_flight.push(id);
                    }
                    Ok(other) => panic!("{task_id}: a fresh dispatch of {id}: {other:?}"),
                    Err(e) => {
                        assert!(
                            matches!(
                                e.kind(),
                                ErrorKind::ApprovalRefused { .. }
                                    | ErrorKind::NeedsConfirmation { .. }
                                    | ErrorKind::NeedsRecovery { .. }
                            ),
                            "{task_id}: dispatch of {id}: {e}"
                        );
                        assert_eq!(store.log().last_seq(), last, "a refusal writes nothing");
                        match from {
                            0 => model.announced.push(id),
                            1 => model.unknown.push(id),
                            _ => {}
                        }
                    }
                }
            }
            55..=62 => {
                let pool = if !model.in_flight.is_empty()
                    && (model.unknown.is_empty() || rng.chance(70))
                {
                    &mut model.in_flight
                } else {
                    &mut model.unknown
                };
                if !pool.is_empty() {
                    let id = pool.remove(rng.below(pool.len() as u64) as usize);
                    let receipt = rng.chance(70).then(|| json!({"id": rng.below(1000), "x": 2.5}));
                    must(&store, task_id, result(&id, receipt));
                    if let Some(Some(key)) = model.keys.get(&id) {
                        model.completed_keys.push(key.clone());
                    }
                    model.completed.push(id);
                }
            }
            63..=64 => {
                // A duplicate: a new call with a completed key, or a completed call id again.
                let body = if !model.completed_keys.is_empty() && rng.chance(50) {
                    let key = rng.pick(&model.completed_keys).clone();
                    let mut call = common::harness::call_body(
                        &model.fresh_id("dup"),
                        "tool",
                        Effect::Idempotent,
                    );
                    call.request_key = Some(key);
                    Some(Body::ToolCall(call))
                } else if !model.completed.is_empty() {
                    let id = rng.pick(&model.completed).clone();
                    let mut call = common::harness::call_body(&id, "tool", Effect::Unsafe);
                    call.request_key = model.keys.get(&id).cloned().flatten();
                    call.args = model.args.get(&id).cloned().flatten();
                    Some(Body::ToolCall(call))
                } else {
                    None
                };
                if let Some(body) = body {
                    let appended = task.append(body).expect("duplicate dispatch");
                    assert!(matches!(appended, Appended::Duplicate { .. }), "{appended:?}");
                    assert_eq!(store.log().last_seq(), last, "a duplicate writes nothing");
                }
            }
            65..=70 => {
                let id = if !model.approvals.is_empty() && rng.chance(50) {
                    rng.pick(&model.approvals).clone()
                } else {
                    let id = model.fresh_id("a");
                    model.approvals.push(id.clone());
                    id
                };
                let body = match rng.below(4) {
                    0 => approval_request(&id),
                    1 => Body::ApprovalDeny(ApprovalDeny {
                        approval_id: id.as_str().into(),
                        ..Default::default()
                    }),
                    _ => {
                        let scope = *rng.pick(&[Scope::Once, Scope::Run, Scope::Persistent]);
                        let expires = (scope == Scope::Persistent && rng.chance(50))
                            .then(|| if rng.chance(50) { NOW_US - 1 } else { NOW_US + 1 });
                        grant(&id, scope, expires)
                    }
                };
                must(&store, task_id, body);
            }
            71..=72 => {
                must(&store, task_id, cancel());
            }
            73 => {
                must(&store, task_id, Body::Pause(Signal::default()));
            }
            74..=75 => {
                must(&store, task_id, resume());
            }
            76..=79 => {
                let usage = BudgetUsage {
                    input_tokens: rng.below(2000),
                    output_tokens: rng.below(500),
                    cost_micros: rng.below(10_000),
                    ..Default::default()
                };
                must(&store, task_id, Body::BudgetUsage(usage));
            }
            80 => {
                let summary = format!("summary {}", rng.below(100));
                must(
                    &store,
                    task_id,
                    Body::ContextCompacted(ContextCompacted { summary, ..Default::default() }),
                );
            }
            81..=86 => {
                // A compare-and-set batch: fresh (written whole) or stale (nothing written).
                let bodies: Vec<Body> = (0..1 + rng.below(3))
                    .map(|i| match i {
                        0 => phase(&format!("batch-{}", rng.below(10))),
                        1 => user("in a batch"),
                        _ => Body::BudgetUsage(BudgetUsage {
                            output_tokens: 1,
                            ..Default::default()
                        }),
                    })
                    .collect();
                let count = bodies.len() as u64;
                let revision = task.revision();
                if rng.chance(25) {
                    // Behind (a write came in meanwhile) or ahead (a bogus revision).
                    let stale = if revision > 0 && rng.chance(50) {
                        revision - 1 - rng.below(revision.min(3))
                    } else {
                        revision + 1 + rng.below(3)
                    };
                    let stale = AppendOptions::expecting(stale);
                    let e = err_of(task.append_batch_with(bodies, stale));
                    assert!(matches!(e.kind(), ErrorKind::StaleRevision { .. }), "{e}");
                    assert_eq!(store.log().last_seq(), last, "a stale batch writes nothing");
                } else {
                    let appended = task
                        .append_batch_with(bodies, AppendOptions::expecting(revision))
                        .expect("fresh batch");
                    assert!(
                        matches!(appended, Appended::Written { revision: r, .. } if r == revision + count),
                        "{appended:?}"
                    );
                }
            }
            87..=89 => {
                // Recovery repairs only the tasks the store does not hold yet.
                let report = store.recover().expect("recover");
                models.values_mut().for_each(TaskModel::take_over);
                assert!(!report.dry_run);
            }
            90..=93 if checkpoints => {
                let meta = store.checkpoint().expect("checkpoint");
                let through = store.log().last_seq().map_or(0, |s| s.0);
                assert_eq!(meta.covered_seq.0, through, "covers every event");
                run_checkpoints.push(meta.covered_seq.0);
            }
            94..=95 => {
                drop(task);
                store.close().expect("close");
                store = open_sim(&fs).expect("reopen");
                models.values_mut().for_each(|model| model.held = false);
            }
            _ => {
                must(&store, task_id, user("filler"));
            }
        }
    }
    let mut written = BTreeMap::new();
    for event in events(&store) {
        *written.entry(event.body.type_name()).or_insert(0) += 1;
    }
    Run { fs, store, checkpoints: run_checkpoints, written }
}

/// The state a snapshot at `cut` events would hold, serialised and read back, then folded
/// with the rest.
fn fold_through_a_snapshot(events: &[Event], cut: usize) -> State {
    let at_cut = fold(&events[..cut]);
    let bytes = serde_json::to_vec(&at_cut).expect("serialise the state");
    let mut state: State = serde_json::from_slice(&bytes).expect("read the state back");
    assert_eq!(state, at_cut, "a state survives its serialisation");
    for event in &events[cut..] {
        apply(&mut state, event);
    }
    state
}

fn snapshot_files(fs: &SimFs) -> Vec<PathBuf> {
    fs.files()
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("snapshots")))
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect()
}

fn check_run(seed: u64, run: Run, totals: &mut BTreeMap<String, u64>) {
    let Run { fs, store, checkpoints, written } = run;
    for (name, n) in written {
        *totals.entry(name).or_insert(0) += n;
    }
    let all = events(&store);
    let folded = fold(&all);
    assert_eq!(folded, store.state(), "seed {seed}: the fold of every event is the live state");
    assert_eq!(folded.last_seq, all.len() as u64);
    let task_ids: BTreeSet<TaskId> = folded.tasks.keys().cloned().collect();
    assert_eq!(store.task_ids().into_iter().collect::<BTreeSet<_>>(), task_ids);

    let mut rng = Rng(seed ^ 0xC0FFEE);
    for _ in 0..8 {
        let cut = rng.below(all.len() as u64 + 1) as usize;
        assert_eq!(fold_through_a_snapshot(&all, cut), folded, "seed {seed}, cut at {cut}");
    }
    // Replay from the encoded records, as an open does (runs of deltas counted at once).
    let mut replayed = State::default();
    let mut replay = factlog::harness::fold::Replay::new(&mut replayed);
    for event in &all {
        let record = factlog::harness::codec::encode_event(event).expect("encode");
        replay.apply_record(event.seq, &record).expect("replay a record");
    }
    replay.finish();
    assert_eq!(replayed, folded, "seed {seed}: replay of the records is the fold of the events");

    store.close().expect("close");

    // Reopen: the newest snapshot and the events after it give the same state.
    let store = open_sim(&fs).expect("reopen");
    assert_eq!(store.state(), folded, "seed {seed}: state after reopen");
    // One task read alone, the others' events skipped, is the same task state.
    for (id, task) in
        folded.tasks.iter().chain([(&TaskId::new("none").unwrap(), &Default::default())])
    {
        let read = Store::read_task(SIM_DIR, sim_options(&fs), id.as_str()).expect("read_task");
        let expected = (task.revision > 0).then(|| task.clone());
        assert_eq!(read.state, expected, "seed {seed}: read_task({id})");
        assert_eq!(read.task_ids, task_ids.iter().cloned().collect::<Vec<_>>(), "seed {seed}");
        assert_eq!(read.last_seq, folded.last_seq, "seed {seed}");
    }
    let report = store.open_report().clone();
    assert!(report.skipped_snapshots.is_empty(), "{:?}", report.skipped_snapshots);
    match checkpoints.last() {
        Some(&covered) => {
            let meta = report.snapshot.as_ref().expect("the newest snapshot is loaded");
            assert_eq!(meta.covered_seq, Seq(covered), "seed {seed}: the newest snapshot");
            assert_eq!(report.replayed_events, all.len() as u64 - covered, "seed {seed}");
        }
        None => {
            assert!(report.snapshot.is_none());
            assert_eq!(report.replayed_events, all.len() as u64);
        }
    }
    let verify = store.verify_deep().expect("verify_deep");
    assert!(verify.live_matches, "seed {seed}: verify_deep live state");
    assert_eq!(verify.events, all.len() as u64);
    assert!(verify.skipped_snapshots.is_empty(), "seed {seed}: {:?}", verify.skipped_snapshots);
    if let Some(&covered) = checkpoints.last() {
        assert_eq!(verify.snapshot.as_ref().map(|m| m.covered_seq), Some(Seq(covered)));
        assert_eq!(verify.snapshot_matches, Some(true), "seed {seed}: snapshot matches");
    } else {
        assert_eq!(verify.snapshot_matches, None);
    }
    drop(store);

    // Each older snapshot, then none, gives the same state too.
    let mut files = snapshot_files(&fs);
    files.sort();
    while let Some(newest) = files.pop() {
        factlog::fs::Fs::remove_file(&fs, &newest).expect("remove a snapshot");
        let store = open_sim(&fs).expect("reopen without the newest snapshot");
        assert_eq!(store.state(), folded, "seed {seed}: without {}", newest.display());
        let report = store.open_report();
        let covered = report.snapshot.as_ref().map_or(0, |m| m.covered_seq.0);
        assert_eq!(report.replayed_events, all.len() as u64 - covered);
        if let Some(older) = files.last() {
            assert_eq!(report.snapshot.as_ref().map(|m| &m.path), Some(older));
        }
    }
}

#[test]
fn the_fold_of_every_event_is_the_state_for_random_work() {
    let mut totals = BTreeMap::new();
    for seed in 0..seeds() {
        let run = generate(seed, 160, false);
        assert!(run.checkpoints.is_empty());
        check_run(seed, run, &mut totals);
    }
    assert_coverage(&totals);
}

#[test]
fn a_snapshot_at_any_checkpoint_plus_the_rest_is_the_fold_of_every_event() {
    let mut totals = BTreeMap::new();
    let mut checkpoints = 0;
    for seed in 0..seeds() {
        let run = generate(1000 + seed, 160, true);
        checkpoints += run.checkpoints.len();
        check_run(1000 + seed, run, &mut totals);
    }
    assert!(checkpoints as u64 >= seeds(), "{checkpoints} checkpoints");
    assert_coverage(&totals);
}

/// Every kind of event the generator can produce was produced by some seed.
fn assert_coverage(totals: &BTreeMap<String, u64>) {
    println!("events written: {totals:?}");
    let expected = [
        "task/contract",
        "task/phase",
        "task/plan",
        "task/todo",
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "user/message",
        "assistant/delta",
        "assistant/message",
        "tool/call",
        "tool/result",
        "tool/outcome_unknown",
        "approval/request",
        "approval/grant",
        "approval/deny",
        "approval/expired",
        "control/cancel",
        "control/pause",
        "control/resume",
        "control/expired",
        "budget/usage",
        "context/compacted",
        "recovery/restored",
    ];
    for name in expected {
        assert!(totals.get(name).copied().unwrap_or(0) > 0, "no {name} was generated");
    }
}

#[test]
fn the_snapshot_policy_writes_snapshots_that_reopen_to_the_same_state() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = common::harness::options().snapshot_every_events(40);
    let store = Store::open(dir.path(), options.clone()).expect("open");
    let task = store.task("t1").expect("task");
    for i in 0..100 {
        task.delta("x").expect("delta");
        task.append(user(&format!("m{i}"))).expect("message");
    }
    let folded = fold(&events(&store));
    // A `Task` shares the store: it must go before `close` can release the directory.
    drop(task);
    store.close().expect("close");
    let store = Store::open(dir.path(), options).expect("reopen");
    let meta = store.open_report().snapshot.clone().expect("a snapshot was written by policy");
    assert!(meta.covered_seq.0 >= 160, "{meta:?}");
    assert_eq!(store.open_report().replayed_events, 200 - meta.covered_seq.0);
    assert_eq!(store.state(), folded);
}

/// Writes work and two checkpoints into a real store directory; returns the fold.
fn store_with_two_snapshots(
    dir: &std::path::Path,
) -> (State, Vec<factlog::harness::snapshot::SnapshotMeta>) {
    let store = open(dir);
    let mut metas = Vec::new();
    for round in 0..2 {
        let task = store.task("t1").expect("task");
        task.append(turn_start()).expect("turn");
        task.append(phase(&format!("round {round}"))).expect("phase");
        for _ in 0..5 {
            task.delta("tok").expect("delta");
        }
        task.append(result_free_call(round)).expect("call");
        task.append(result(&format!("c{round}"), Some(json!({"n": round})))).expect("result");
        task.append(turn_end()).expect("turn end");
        metas.push(store.checkpoint().expect("checkpoint"));
    }
    store.task("t2").expect("task").append(user("after the snapshots")).expect("message");
    let folded = fold(&events(&store));
    store.close().expect("close");
    (folded, metas)
}

fn result_free_call(round: u32) -> Body {
    common::harness::call(&format!("c{round}"), "fetch", Effect::ReadOnly, None)
}

fn flip_a_byte(path: &std::path::Path, at: usize) {
    let mut bytes = std::fs::read(path).expect("read the snapshot");
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x5A;
    std::fs::write(path, bytes).expect("write the damaged snapshot");
}

#[test]
fn a_damaged_newest_snapshot_falls_back_to_an_older_one_with_the_same_state() {
    for at in [0, 20, 61, 70, usize::MAX] {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (folded, metas) = store_with_two_snapshots(dir.path());
        assert!(metas[0].path.starts_with(dir.path().join("snapshots")), "{:?}", metas[0].path);
        flip_a_byte(&metas[1].path, at);
        let store = open(dir.path());
        let report = store.open_report();
        assert_eq!(
            report.snapshot.as_ref().map(|m| m.covered_seq),
            Some(metas[0].covered_seq),
            "byte {at}: the older snapshot is used"
        );
        let skipped: Vec<&PathBuf> = report.skipped_snapshots.iter().map(|(p, _)| p).collect();
        assert_eq!(skipped, [&metas[1].path], "byte {at}: the damaged one is reported");
        assert!(!report.skipped_snapshots[0].1.is_empty(), "with its reason");
        assert_eq!(report.replayed_events, folded.last_seq - metas[0].covered_seq.0);
        assert_eq!(store.state(), folded, "byte {at}: same state");
        let verify = store.verify_deep().expect("verify");
        assert!(verify.live_matches);
        assert_eq!(verify.skipped_snapshots.len(), 1);
    }
}

#[test]
fn damaged_snapshots_fall_back_to_full_replay_with_the_same_state() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (folded, metas) = store_with_two_snapshots(dir.path());
    for meta in &metas {
        flip_a_byte(&meta.path, 40);
    }
    let store = open(dir.path());
    let report = store.open_report();
    assert!(report.snapshot.is_none(), "{:?}", report.snapshot);
    assert_eq!(report.skipped_snapshots.len(), 2, "{:?}", report.skipped_snapshots);
    assert_eq!(report.replayed_events, folded.last_seq);
    assert_eq!(store.state(), folded);
    // The next checkpoint writes a good snapshot again.
    let meta = store.checkpoint().expect("checkpoint");
    assert_eq!(meta.covered_seq.0, folded.last_seq);
    store.close().expect("close");
    let store = open(dir.path());
    assert_eq!(
        store.open_report().snapshot.as_ref().map(|m| m.covered_seq),
        Some(meta.covered_seq)
    );
    assert_eq!(store.open_report().replayed_events, 0);
    assert_eq!(store.state(), folded);
}

#[test]
fn a_snapshot_claiming_more_events_than_the_log_holds_is_refused_or_skipped() {
    // A snapshot of a longer history (say, copied from another store) must not be trusted: a
    // writer open refuses it as damage naming it (a snapshot covers only synced events, so the
    // log is shorter than what was on stable storage: `format-spec/mark.md`), and a read-only
    // open, which may run beside a writer that wrote it after its scan, skips it.
    let dir = tempfile::tempdir().expect("temporary directory");
    let (_, metas) = store_with_two_snapshots(dir.path());
    let other = tempfile::tempdir().expect("temporary directory");
    let store = open(other.path());
    store.task("t9").expect("task").append(user("a short history")).expect("message");
    let folded = fold(&events(&store));
    store.close().expect("close");
    let target = other.path().join("snapshots").join(metas[1].path.file_name().expect("name"));
    std::fs::create_dir_all(target.parent().expect("parent")).expect("snapshots directory");
    std::fs::copy(&metas[1].path, &target).expect("copy the snapshot");
    let error = Store::open(other.path(), StoreOptions::new()).map(drop).expect_err("refused");
    assert!(error.is_corruption(), "{error}");
    assert!(error.to_string().contains(&target.display().to_string()), "{error}");
    let store = Store::open_read_only(other.path(), StoreOptions::new()).expect("read-only");
    assert!(store.open_report().snapshot.is_none());
    assert_eq!(store.open_report().skipped_snapshots.len(), 1);
    assert_eq!(store.state(), folded);
}
