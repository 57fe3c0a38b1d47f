//! Proves that `factlog checkpoint DIR` works while the store is served: the serving process
//! writes the snapshot (asked through the socket), the command prints its path and covered
//! seq as usual (valid against `checkpoint.json`), and the snapshot is the one a reopen of
//! the store then loads.

use crate::common;

use common::factlog;
use common::schema::assert_valid;
use common::server::{Conn, Served, store_dir};
use factlog::{Store, StoreOptions};
use serde_json::{Value, json};

#[test]
fn checkpoint_on_a_served_store_is_written_by_the_serving_process() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    for i in 0..5 {
        let reply = conn.call(&json!({"task": "t", "type": "user/message", "text": i.to_string()}));
        assert_eq!(reply["revision"], i + 1, "{reply}");
    }
    let run = factlog(&["checkpoint", dir.to_str().unwrap(), "--json"], b"");
    run.assert_success();
    let report: Value = serde_json::from_str(&run.stdout_text()).expect("JSON");
    assert_valid("checkpoint.json", &report);
    assert_eq!(report["covered_seq"], 5, "{report}");
    assert!(std::path::Path::new(report["path"].as_str().unwrap()).exists());
    drop(conn);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    let store = Store::open_read_only(&dir, StoreOptions::new()).expect("reopen");
    assert_eq!(store.open_report().snapshot.as_ref().map(|s| s.covered_seq.0), Some(5));
}
