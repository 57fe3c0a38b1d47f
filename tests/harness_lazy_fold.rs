//! The per-task lazy fold (`src/harness/store/lazy.rs`) gives exactly what an eager fold gives.
//!
//! Randomised multi-task logs are written over several sessions (each a store opened, some
//! tasks taken over and written, sometimes a snapshot, then the store dropped without
//! recovery, so tasks are left with open turns, steps, calls, approvals and cancels), with
//! and without snapshots. Then, each on a fresh open: the state of every task read one by one
//! in a random order, the whole state, and every task's history equal those of the eager fold
//! of every event from the first; and `recover` reports and writes what `plan_task` of the
//! eager state says, the same whether the tasks were folded first or left to the lazy fold
//! (which takes tasks that need no repair over without folding them).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::harness::{
    Rng, approval_request, assistant, call, cancel, contract, events, fold, grant, open, options,
    phase, result, step_end, step_start, turn_end, turn_start, user,
};
use factlog::harness::event::{AssistantDelta, Effect, Risk, Scope};
use factlog::harness::recovery::plan_task;
use factlog::harness::{Body, State};
use factlog::{Store, Task};

const TASKS: u64 = 7;

/// Appends one random event (or a whole turn) to `task`; refused events write nothing.
/// Tasks `task-0` and `task-1` mostly write whole turns, so that `recover` may take them
/// over without folding them, and now and then one thing a recovery has to find: a call
/// without a result, an open turn, a granted approval, a high-risk contract, an unknown
/// outcome.
fn write_some(rng: &mut Rng, task: &Task, calls: &mut u64) {
    *calls += 1;
    let call_id = format!("c{calls}");
    let tidy = ["task-0", "task-1"].contains(&task.id().as_str());
    if tidy && rng.chance(15) {
        let bodies = match rng.below(5) {
            0 => vec![turn_start(), call(&call_id, "write", Effect::Unsafe, None), turn_end()],
            1 => vec![turn_start(), user("left open")],
            2 => vec![grant("g", Scope::Once, None)],
            3 => vec![contract("goal", Risk::High)],
            _ => vec![turn_start(), call(&call_id, "read", Effect::ReadOnly, None)],
        };
        for body in bodies {
            let _ = task.append(body);
        }
        return;
    }
    let whole_turn = tidy || rng.chance(40);
    let bodies: Vec<Body> = if whole_turn {
        let mut turn = vec![turn_start(), user("go"), step_start()];
        for _ in 0..rng.below(4) {
            turn.push(Body::AssistantDelta(AssistantDelta { text: "tok".into() }));
        }
        turn.push(assistant("calling", &[(call_id.as_str(), "read")]));
        turn.push(call(&call_id, "read", Effect::ReadOnly, None));
        turn.push(result(&call_id, Some(serde_json::json!({"n": *calls}))));
        turn.extend([step_end(), turn_end()]);
        turn
    } else {
        let effect = *rng.pick(&[Effect::ReadOnly, Effect::Idempotent, Effect::Unsafe]);
        let approval = format!("a{}", rng.below(3));
        let scope = *rng.pick(&[Scope::Once, Scope::Run, Scope::Persistent]);
        let earlier = format!("c{}", 1 + rng.below(*calls));
        vec![match rng.below(14) {
            0 => turn_start(),
            1 => turn_end(),
            2 => step_start(),
            3 => step_end(),
            4 => call(&call_id, "write", effect, None),
            5 => result(&earlier, None),
            6 => approval_request(&approval),
            7 => grant(&approval, scope, None),
            8 => cancel(),
            9 => contract("goal", *rng.pick(&[Risk::Low, Risk::Low, Risk::High])),
            10 => phase("work"),
            11 => assistant("asks", &[(call_id.as_str(), "plan")]),
            12 => user("hello"),
            _ => Body::AssistantDelta(AssistantDelta { text: "d".into() }),
        }]
    };
    for body in bodies {
        let _ = task.append(body);
    }
}

/// Writes `sessions` sessions of random events into `dir`, each ending without recovery.
fn write_store(dir: &Path, seed: u64, sessions: u64, snapshots: bool) {
    let mut rng = Rng(seed);
    let mut calls = 0;
    for _ in 0..sessions {
        let store = open(dir);
        for _ in 0..rng.below(40) + 10 {
            let id = format!("task-{}", rng.below(TASKS));
            let task = store.task(&id).expect("take the task");
            for _ in 0..rng.below(4) + 1 {
                write_some(&mut rng, &task, &mut calls);
            }
            // Mid-session too, so that work left open before a snapshot may end after it.
            if snapshots && rng.chance(8) {
                store.checkpoint().expect("checkpoint");
            }
        }
        // Dropped, not recovered: the next session's holder inherits what is open.
        drop(store);
    }
}

/// The eager fold of every event of the store in `dir`.
fn eager_state(dir: &Path) -> State {
    let store = Store::open_read_only(dir, options()).expect("open read-only");
    let mut state = fold(&events(&store));
    state.last_seq = store.log().last_seq().map_or(0, |s| s.0);
    state
}

/// Copies the store files of `from` into the new directory `to`.
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("list the store") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a file");
        }
    }
}

fn check_seed(seed: u64, snapshots: bool) {
    let root = tempfile::tempdir().expect("temporary directory");
    let dir = root.path().join("store");
    write_store(&dir, seed, 2 + seed % 4, snapshots);
    let what = format!("seed {seed}, snapshots {snapshots}");
    let eager = eager_state(&dir);

    // Tasks read one by one, in a random order, then the whole state.
    let lazy = Store::open_read_only(&dir, options()).expect("open read-only");
    let mut rng = Rng(seed ^ 0x5EED);
    let mut ids: Vec<_> = eager.tasks.keys().cloned().collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for id in &ids {
        assert_eq!(lazy.task_state(id.as_str()).as_ref(), eager.tasks.get(id), "{what}: {id}");
        let (revision, last_seq) = lazy.task_revision(id.as_str()).expect("a revision");
        assert_eq!((revision, last_seq), (eager.tasks[id].revision, eager.tasks[id].last_seq));
    }
    assert_eq!(lazy.state(), eager, "{what}: the whole state after the tasks one by one");
    let whole = Store::open_read_only(&dir, options()).expect("open read-only");
    assert_eq!(whole.state(), eager, "{what}: the whole state at once");

    // Histories: a store folded whole first, and one folding each task on its history.
    let fresh = Store::open_read_only(&dir, options()).expect("open read-only");
    for id in ids.iter().rev() {
        let lazily = fresh.history(id.as_str()).expect("history");
        assert_eq!(lazily, whole.history(id.as_str()).expect("history"), "{what}: {id}");
    }

    // Recovery: what plan_task says of the eager state, lazily and with every task folded.
    let mut expected = Vec::new();
    for (id, task) in &eager.tasks {
        let (mut recovery, bodies) = plan_task(id, task);
        recovery.events_written = bodies.len() as u64;
        expected.push(recovery);
    }
    let folded_dir = root.path().join("folded");
    copy_store(&dir, &folded_dir);
    let folded_first = Store::open(&folded_dir, options()).expect("open");
    let _ = folded_first.state();
    let report_folded = folded_first.recover().expect("recover, folded first");
    let lazy = Store::open(&dir, options()).expect("open");
    let report_lazy = lazy.recover().expect("recover, lazily");
    assert_eq!(report_lazy.tasks, expected, "{what}: the lazy recovery report");
    assert_eq!(report_folded, report_lazy, "{what}: folded first and lazily");
    // After it, the state of every task (some of them never folded) is the eager one.
    let after: BTreeMap<_, _> =
        ids.iter().map(|id| (id.clone(), lazy.task_state(id.as_str()))).collect();
    drop(lazy);
    drop(folded_first);
    let eager_after = eager_state(&dir);
    for (id, state) in after {
        assert_eq!(state.as_ref(), eager_after.tasks.get(&id), "{what}: {id} after recovery");
    }
    assert_eq!(eager_after, eager_state(&folded_dir), "{what}: the two recovered logs");
    // Recovering again writes nothing and reports the same decisions.
    let again = Store::open(&dir, options()).expect("open").recover().expect("recover again");
    assert_eq!(again.events_written, 0, "{what}");
}

#[test]
fn lazy_folds_equal_eager_folds_with_snapshots() {
    for seed in 0..24 {
        check_seed(seed, true);
    }
}

#[test]
fn lazy_folds_equal_eager_folds_without_snapshots() {
    for seed in 100..116 {
        check_seed(seed, false);
    }
}

/// A task whose events after the snapshot leave nothing open is taken over by `recover`
/// without being folded, and reads back the same afterwards.
#[test]
fn recover_takes_a_quiet_task_over_and_a_busy_one_is_repaired() {
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        let quiet = store.task("quiet").expect("task");
        let busy = store.task("busy").expect("task");
        quiet.append(turn_start()).expect("append");
        store.checkpoint().expect("checkpoint");
        for body in
            [user("go"), call("q1", "read", Effect::ReadOnly, None), result("q1", None), turn_end()]
        {
            quiet.append(body).expect("append");
        }
        busy.append(turn_start()).expect("append");
        busy.append(call("b1", "write", Effect::Unsafe, None)).expect("append");
    }
    let eager = eager_state(dir.path());
    let store = open(dir.path());
    let report = store.recover().expect("recover");
    let by_task: BTreeMap<_, _> = report.tasks.iter().map(|t| (t.task.as_str(), t)).collect();
    assert_eq!(by_task["quiet"].events_written, 0);
    assert!(by_task["quiet"].calls.is_empty());
    assert!(by_task["busy"].events_written > 0);
    assert_eq!(store.task_state("quiet").as_ref(), eager.tasks.get("quiet"));
}

/// Each thing a recovery has to find, left before the snapshot or among the events after it,
/// in a task whose other events are whole turns: `recover` reports and writes what
/// `plan_task` of the eager state says (the lazy test of "nothing to repair" must not take
/// such a task over unfolded).
#[test]
fn recover_finds_what_each_task_left_open_before_or_after_the_snapshot() {
    let whole = |id: &str| {
        vec![turn_start(), call(id, "read", Effect::ReadOnly, None), result(id, None), turn_end()]
    };
    let cases: Vec<(&str, Vec<Body>)> = vec![
        ("a call without a result", vec![turn_start(), call("x", "w", Effect::Unsafe, None)]),
        ("a call without a result, turn ended", {
            vec![turn_start(), call("x", "w", Effect::Unsafe, None), turn_end()]
        }),
        ("an open turn", vec![turn_start(), user("open")]),
        ("an open step", vec![turn_start(), step_start()]),
        ("a pending cancel", vec![turn_start(), cancel()]),
        ("a once approval", vec![approval_request("g"), grant("g", Scope::Once, None)]),
        ("a run approval", vec![grant("g", Scope::Run, None)]),
        ("a high-risk contract", vec![contract("goal", Risk::High)]),
        ("a requested call", vec![turn_start(), assistant("asks", &[("x", "w")])]),
        (
            "a result before its call",
            vec![turn_start(), result("x", None), call("x", "w", Effect::Unsafe, None), turn_end()],
        ),
    ];
    for (what, open_work) in cases {
        for (before, after) in [(true, false), (false, true), (true, true)] {
            let dir = tempfile::tempdir().expect("temporary directory");
            {
                let store = open(dir.path());
                let task = store.task("t").expect("task");
                // A task with only whole turns beside it, which recovery takes over unfolded.
                let quiet = store.task("q").expect("task");
                let mut bodies = whole("c1");
                if before {
                    bodies.extend(open_work.clone());
                }
                for body in bodies {
                    let _ = task.append(body);
                }
                for body in whole("q1") {
                    quiet.append(body).expect("append");
                }
                store.checkpoint().expect("checkpoint");
                let mut bodies = whole("c2");
                if after {
                    bodies.extend(open_work.clone());
                } else {
                    bodies.extend(whole("c3"));
                }
                for body in bodies {
                    let _ = task.append(body);
                }
                for body in whole("q2") {
                    quiet.append(body).expect("append");
                }
            }
            let eager = eager_state(dir.path());
            let expected: Vec<_> = eager
                .tasks
                .iter()
                .map(|(id, task)| {
                    let (mut recovery, bodies) = plan_task(id, task);
                    recovery.events_written = bodies.len() as u64;
                    recovery
                })
                .collect();
            let report = open(dir.path()).recover().expect("recover");
            assert_eq!(report.tasks, expected, "{what}, before {before}, after {after}");
        }
    }
}

/// A record whose body does not decode (which no store writes: CRC-valid, but not JSON) no
/// longer fails the open, whose scan reads only envelopes; it fails the first touch of its
/// task (`Store::task`, `recover`, `Store::try_state` and so `factlog state`), while the other
/// tasks read as before.
#[test]
fn a_body_that_does_not_decode_fails_the_first_touch_of_its_task() {
    use factlog::harness::EventType;
    use factlog::harness::codec::{self, ENCODING_JSON, SCHEMA_VERSION};
    use factlog::{Durability, ErrorKind, Log, Options};
    let dir = tempfile::tempdir().expect("temporary directory");
    {
        let store = open(dir.path());
        for body in [turn_start(), turn_end()] {
            store.task("good").expect("task").append(body).expect("append");
        }
        store.task("bad").expect("task").append(turn_start()).expect("append");
        store.checkpoint().expect("checkpoint");
    }
    {
        let log =
            Log::open(dir.path(), Options::new().segment_bytes(1024 * 1024)).expect("open the log");
        let body = codec::EncodedBody {
            tag: EventType::ToolCall.tag(),
            schema: SCHEMA_VERSION,
            encoding: ENCODING_JSON,
            bytes: b"{not json".to_vec(),
        };
        log.append(&codec::encode_parts("bad", 2, 0, &body), Durability::Synced).expect("append");
        log.close().expect("close");
    }
    let store = open(dir.path());
    let error = store.task("bad").expect_err("the bad task's event does not decode");
    assert!(matches!(error.kind(), ErrorKind::CorruptEvent { seq: 4, .. }), "{error}");
    assert!(store.recover().is_err(), "recover folds the bad task and fails");
    assert_eq!(store.task_state("good").map(|t| t.revision), Some(2));
    store.task("good").expect("the other task is taken over");
    let error = store.try_state().expect_err("the whole state does not guess");
    assert!(matches!(error.kind(), ErrorKind::CorruptEvent { seq: 4, .. }), "{error}");
    drop(store);
    // `factlog state` reads the whole state: it fails with the damage, exit 3, never a state
    // without the bad task's event.
    let run = common::factlog(&["state", common::arg(dir.path()), "--json"], b"");
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.stderr.contains("record 4 is not a valid event"), "{}", run.stderr);
}
