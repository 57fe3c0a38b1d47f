//! Synced appends of different client connections share `fdatasync`s (group commit across
//! clients): 8 clients, each on its own connection and task, append 50 synced events at
//! once through one served store, and the store's file system sees fewer `fdatasync`s than
//! synced appends. (How many fewer depends on the scheduler; that some are shared does not:
//! 8 clients waiting on a disk sync at once always overlap.)

use crate::common;
use crate::common::faulty_fs;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};

use common::server::store_dir;
use factlog::client::Client;
use factlog::harness::Body;
use factlog::harness::event::UserMessage;
use factlog::server::ServeOptions;
use factlog::{AppendOptions, Durability, Options, Store, StoreOptions};
use faulty_fs::FaultyFs;

const CLIENTS: usize = 8;
const APPENDS: usize = 50;

#[test]
fn synced_appends_of_different_clients_share_fdatasyncs() {
    let (_temp, dir) = store_dir();
    let fs = FaultyFs::new();
    let options = StoreOptions::new().log(Options::new().fs(Arc::new(fs.clone())));
    let store = Store::open(&dir, options).expect("open");
    let server = store.serve(ServeOptions::new()).expect("serve");
    let mut clients: Vec<Client> =
        (0..CLIENTS).map(|_| Client::connect(&dir).expect("connect")).collect();
    let synced = AppendOptions { durability: Some(Durability::Synced), ..Default::default() };
    let body = Body::UserMessage(UserMessage { text: "m".into(), extra: Default::default() });
    // Each task's first append takes it over (one sync of its own): done before counting.
    for (i, client) in clients.iter_mut().enumerate() {
        client.append(&format!("t{i}"), &body, synced).expect("first append");
    }
    let before = fs.faults.syncs.load(Ordering::SeqCst);
    let start = Barrier::new(CLIENTS);
    std::thread::scope(|scope| {
        for (i, client) in clients.iter_mut().enumerate() {
            let (start, body) = (&start, &body);
            scope.spawn(move || {
                start.wait();
                for _ in 0..APPENDS {
                    let appended = client.append(&format!("t{i}"), body, synced).expect("append");
                    assert!(matches!(appended, factlog::Appended::Written { .. }));
                }
            });
        }
    });
    let syncs = fs.faults.syncs.load(Ordering::SeqCst) - before;
    let appends = (CLIENTS * APPENDS) as u64;
    println!("{appends} synced appends from {CLIENTS} clients: {syncs} fdatasyncs");
    assert!(syncs < appends, "{syncs} fdatasyncs for {appends} synced appends: none shared");
    for i in 0..CLIENTS {
        let revision = store.task_revision(&format!("t{i}")).map(|(revision, _)| revision);
        assert_eq!(revision, Some(APPENDS as u64 + 1), "task t{i}");
    }
    drop(clients);
    drop(server);
    store.close().expect("close");
}
