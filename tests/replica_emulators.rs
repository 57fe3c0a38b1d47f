//! Object-store replica locations on the emulators of real services
//! (`format-spec/replication.md`, "Locations and the seam", "The lease"): on moto's S3 server
//! (`s3://`) and azurite's blob service (`az://`), an object is created once (a second create of
//! the name is refused and changes nothing), read, listed and deleted; a store replicated with
//! `Store::replicate` restores to the same events, and a second writer of its replica is
//! refused; of two writers creating one name at the same instant, and of two runs taking one
//! lease epoch at the same instant (with and without takeover), exactly one wins, in every one
//! of many rounds; `remote::open` reaches azurite through the emulator variables a user sets.
//! Proved against the emulators `.ci/emulators start` runs on loopback
//! (`tests/common/emulators.rs`); moto serves one request at a time there, since its threaded
//! server checks a create's condition and then writes, and can let both racers win (the
//! script says more). `s3s-fs` (`tests/replica_s3.rs`) lets both racers win, so the races are
//! not run on it. Nothing runs against a `gs://` emulator: see docs/testing.md.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::emulators::{Emulator, Kind, unique_prefix};
use common::{harness, replica};
use factlog::replica::lease::{self, Lease};
use factlog::replica::{ObjectOptions, ObjectRemote, Remote, ReplicateOptions, RestoreOptions};
use factlog::{ErrorKind, Options, Seq, Store, StoreOptions};

/// Rounds of each race: two writers at the same instant, each round on a fresh name or epoch.
const RACE_ROUNDS: u64 = 200;

/// Bounds small enough that a stuck emulator fails a call quickly instead of hanging a test.
fn bounded() -> ObjectOptions {
    ObjectOptions::default()
        .request_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .call_timeout(Duration::from_secs(30))
}

fn objects_are_created_once_read_listed_and_deleted(kind: Kind) {
    let Some(emulator) = Emulator::find(kind, "objects") else { return };
    let prefix = unique_prefix("objects");
    let _cleanup = (emulator.cleanup(&prefix), emulator.cleanup(&format!("{prefix}-other")));
    let remote = emulator.remote(&prefix, bounded());
    let other = emulator.remote(&format!("{prefix}-other"), bounded());
    assert_eq!(remote.location(), emulator.url(&prefix));

    assert!(remote.put_new("segments/b/2.part", b"two").expect("put"));
    assert!(remote.put_new("segments/b/1.part", b"one").expect("put"));
    assert!(remote.put_new("segments/a/9.part", b"nine").expect("put"));
    assert!(remote.put_new("empty", b"").expect("an empty object"));
    // A second create of a name is refused and leaves the first object as it was.
    assert!(!remote.put_new("segments/b/1.part", b"other").expect("put again"));
    assert_eq!(remote.get("segments/b/1.part").expect("get").as_deref(), Some(&b"one"[..]));
    assert!(other.put_new("segments/b/1.part", b"elsewhere").expect("another prefix"));

    assert_eq!(remote.get("empty").expect("get").as_deref(), Some(&b""[..]));
    assert_eq!(remote.get("segments/b/3.part").expect("get"), None);
    assert_eq!(
        remote.list("segments/").expect("list"),
        ["segments/a/9.part", "segments/b/1.part", "segments/b/2.part"]
    );
    assert_eq!(
        remote.list("segments/b/").expect("list"),
        ["segments/b/1.part", "segments/b/2.part"]
    );
    assert_eq!(remote.list("lease/").expect("list"), Vec::<String>::new());

    remote.delete("segments/b/1.part").expect("delete");
    remote.delete("segments/b/1.part").expect("delete a missing object");
    assert_eq!(remote.list("segments/b/").expect("list"), ["segments/b/2.part"]);
    assert!(remote.put_new("segments/b/1.part", b"again").expect("create after a delete"));
    assert_eq!(other.get("segments/b/1.part").expect("get").as_deref(), Some(&b"elsewhere"[..]));
}

#[test]
fn objects_are_created_once_read_listed_and_deleted_on_moto() {
    objects_are_created_once_read_listed_and_deleted(Kind::Moto);
}

#[test]
fn objects_are_created_once_read_listed_and_deleted_on_azurite() {
    objects_are_created_once_read_listed_and_deleted(Kind::Azurite);
}

fn small_segments() -> StoreOptions {
    harness::options().log(Options::new().segment_bytes(16 * 1024))
}

/// Waits (a generous deadline, a hang guard, not a performance bound) until `done()`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every event of the store in `dir`, as dump lines.
fn dump(dir: &Path) -> Vec<String> {
    let store = Store::open_read_only(dir, harness::options()).expect("open read-only");
    let events = store.events(Seq(1)).expect("events").map(|e| format!("{:?}", e.expect("event")));
    events.collect()
}

fn a_replicated_store_restores_the_same_events(kind: Kind) {
    let Some(emulator) = Emulator::find(kind, "replicated store") else { return };
    let prefix = unique_prefix("store");
    let _cleanup = emulator.cleanup(&prefix);
    let (store_dir, restored_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(store_dir.path(), small_segments()).expect("open");
    let options = ReplicateOptions::new().interval(Duration::from_millis(20));
    let replication =
        store.replicate(Box::new(emulator.remote(&prefix, bounded())), options).expect("replicate");

    // A second store replicating to the same replica is refused while the first holds it.
    let other_dir = tempfile::tempdir().unwrap();
    let other = Store::open(other_dir.path(), small_segments()).expect("open");
    let refused = other
        .replicate(Box::new(emulator.remote(&prefix, bounded())), ReplicateOptions::new())
        .unwrap_err();
    assert!(matches!(refused.kind(), ErrorKind::LeaseHeld { .. }), "{refused}");
    other.close().expect("close");

    // Several segments, a snapshot between them, and more events after it.
    replica::session(&store, "t1", 4);
    store.checkpoint().expect("checkpoint");
    replica::session(&store, "t2", 4);
    let last = harness::last_seq(&store);
    assert!(common::segment_paths(store_dir.path()).len() > 1, "several segments to ship");
    eventually("everything shipped", || replication.status().shipped_seq == last);
    let status = replication.stop().expect("stop");
    assert_eq!((status.shipped_seq, status.lag()), (last, 0));
    store.close().expect("close");

    // Restored elsewhere from the emulator alone, by a client of its own.
    let remote = emulator.remote(&prefix, bounded());
    let target = restored_dir.path().join("store");
    let report = factlog::replica::restore(&remote, &target, RestoreOptions::new())
        .unwrap_or_else(|e| panic!("restore from {}: {e}", kind.name()));
    assert_eq!(report.through_seq, Seq(last));
    assert_eq!(dump(&target), dump(store_dir.path()));
}

#[test]
fn a_replicated_store_restores_the_same_events_on_moto() {
    a_replicated_store_restores_the_same_events(Kind::Moto);
}

#[test]
fn a_replicated_store_restores_the_same_events_on_azurite() {
    a_replicated_store_restores_the_same_events(Kind::Azurite);
}

/// Two writers, as on two machines: each a remote (a client, a runtime, connections) of its
/// own on the replica at `prefix`.
fn two_writers(emulator: &Emulator, prefix: &str) -> [Arc<ObjectRemote>; 2] {
    [0, 1].map(|_| Arc::new(emulator.remote(prefix, bounded())))
}

/// Runs `race` on both writers at the same instant (a barrier releases them together) and
/// returns what each got.
fn at_once<T: Send + 'static>(
    writers: &[Arc<ObjectRemote>; 2],
    race: impl Fn(usize, &ObjectRemote) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(2));
    let race = Arc::new(race);
    let racers: Vec<_> = writers
        .iter()
        .enumerate()
        .map(|(writer, remote)| {
            let (remote, barrier, race) =
                (Arc::clone(remote), Arc::clone(&barrier), Arc::clone(&race));
            std::thread::spawn(move || {
                barrier.wait();
                race(writer, &remote)
            })
        })
        .collect();
    racers.into_iter().map(|racer| racer.join().expect("racer")).collect()
}

fn of_two_writers_creating_one_name_at_once_exactly_one_wins(kind: Kind) {
    let Some(emulator) = Emulator::find(kind, "create race") else { return };
    let prefix = unique_prefix("create-race");
    let _cleanup = emulator.cleanup(&prefix);
    let writers = two_writers(&emulator, &prefix);
    for round in 0..RACE_ROUNDS {
        let name = format!("lease/{round:020}.json");
        let body = move |writer: usize| format!("{{\"writer\":{writer},\"round\":{round}}}");
        let won = {
            let name = name.clone();
            at_once(&writers, move |writer, remote| {
                remote.put_new(&name, body(writer).as_bytes()).expect("put_new")
            })
        };
        assert_eq!(
            won.iter().filter(|&&w| w).count(),
            1,
            "{}: round {round}: {won:?}",
            kind.name()
        );
        // The object holds the winner's bytes: the loser wrote nothing.
        let winner = won.iter().position(|&w| w).expect("a winner");
        let stored = writers[0].get(&name).expect("get").expect("the object");
        assert_eq!(stored, body(winner).into_bytes(), "{}: round {round}", kind.name());
    }
}

#[test]
fn of_two_writers_creating_one_name_at_once_exactly_one_wins_on_moto() {
    of_two_writers_creating_one_name_at_once_exactly_one_wins(Kind::Moto);
}

#[test]
fn of_two_writers_creating_one_name_at_once_exactly_one_wins_on_azurite() {
    of_two_writers_creating_one_name_at_once_exactly_one_wins(Kind::Azurite);
}

fn of_two_runs_taking_the_lease_at_once_exactly_one_wins(kind: Kind) {
    let Some(emulator) = Emulator::find(kind, "lease race") else { return };
    let prefix = unique_prefix("lease-race");
    let _cleanup = emulator.cleanup(&prefix);
    let writers = two_writers(&emulator, &prefix);
    let stores: [PathBuf; 2] = [0, 1].map(|writer| PathBuf::from(format!("/stores/run-{writer}")));
    // Rounds alternate: both runs take a released lease, then both take the held one over.
    // Racers that read the same newest epoch both try to create the next one, and exactly one
    // wins. A racer that reads the epoch the other just created is refused a held lease
    // without takeover, and with takeover takes it over (one epoch further): a legal
    // sequence, after which only the newer epoch holds the lease. Never do two runs hold it.
    let mut epoch = 0;
    for round in 0..RACE_ROUNDS {
        let takeover = round % 2 == 1;
        let taken = {
            let stores = stores.clone();
            at_once(&writers, move |writer, remote| {
                lease::take(remote, &stores[writer], takeover, round)
            })
        };
        let mut won: Vec<Lease> = taken.iter().filter_map(|t| t.as_ref().ok().copied()).collect();
        won.sort_by_key(|lease| lease.epoch);
        assert!(
            !won.is_empty(),
            "{}: round {round}: nobody took the lease: {taken:?}",
            kind.name()
        );
        for lost in taken.iter().filter_map(|t| t.as_ref().err()) {
            assert!(matches!(lost.kind(), ErrorKind::LeaseHeld { .. }), "round {round}: {lost}");
        }
        // Each lease taken is the next epoch: no two runs created the same one.
        for (index, lease) in won.iter().enumerate() {
            let next = epoch + 1 + u64::try_from(index).expect("index");
            assert_eq!(*lease, Lease { epoch: next, takeover }, "{}: round {round}", kind.name());
        }
        // Without takeover a held lease is refused: one run wins. With it, a second winner
        // took the first one's lease over, and the first one has lost it.
        assert!(takeover || won.len() == 1, "{}: round {round}: {taken:?}", kind.name());
        let (holder, superseded) = won.split_last().expect("a holder");
        for old in superseded {
            let lost = lease::check(writers[0].as_ref(), *old).expect_err("a superseded lease");
            assert!(matches!(lost.kind(), ErrorKind::LeaseLost { .. }), "round {round}: {lost}");
        }
        lease::check(writers[0].as_ref(), *holder).expect("the newest winner holds it");
        epoch = holder.epoch;
        if takeover {
            lease::release(writers[0].as_ref(), *holder).expect("release");
        }
    }
}

#[test]
fn of_two_runs_taking_the_lease_at_once_exactly_one_wins_on_moto() {
    of_two_runs_taking_the_lease_at_once_exactly_one_wins(Kind::Moto);
}

#[test]
fn of_two_runs_taking_the_lease_at_once_exactly_one_wins_on_azurite() {
    of_two_runs_taking_the_lease_at_once_exactly_one_wins(Kind::Azurite);
}

#[test]
fn remote_open_reaches_azurite_through_the_emulator_variables() {
    let Some(emulator) = Emulator::find(Kind::Azurite, "azurite environment") else { return };
    // The environment of this process is not changed (other tests run beside it): the check
    // runs in a child, this test binary again, with the variables a user would set.
    let prefix = unique_prefix("from-env");
    let _cleanup = emulator.cleanup(&prefix);
    let service = emulator.endpoint().rsplit_once('/').expect("http://HOST:PORT/ACCOUNT").0;
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("AZURE_") || key_text.starts_with("AZURITE_") {
            child.env_remove(key);
        }
    }
    let output = child
        .args([
            "--exact",
            &common::test_path(module_path!(), "opened_from_the_environment_in_a_child"),
            "--ignored",
            "--nocapture",
        ])
        .env("FACTLOG_EMULATOR_CHILD_URL", emulator.url(&prefix))
        .env("AZURE_STORAGE_USE_EMULATOR", "true")
        .env("AZURITE_BLOB_STORAGE_URL", service)
        .output()
        .expect("run the child");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the child failed: {text}");
    assert!(text.contains("1 passed"), "the child ran no test: {text}");
    // What the child wrote is where this process's explicitly configured client finds it.
    let remote = emulator.remote(&prefix, bounded());
    assert_eq!(remote.get("written-by-the-child").expect("get").as_deref(), Some(&b"child"[..]));
}

/// Run by `remote_open_reaches_azurite_through_the_emulator_variables` in a child process
/// whose environment points at azurite the way a user's would.
#[test]
#[ignore = "a helper: run in a child process, with its environment, by another test"]
fn opened_from_the_environment_in_a_child() {
    let url = std::env::var("FACTLOG_EMULATOR_CHILD_URL").expect("run by its parent test only");
    let remote = factlog::replica::remote::open(&url).expect("open from the environment");
    assert!(remote.put_new("written-by-the-child", b"child").expect("put"));
    assert!(!remote.put_new("written-by-the-child", b"again").expect("put again"));
}
