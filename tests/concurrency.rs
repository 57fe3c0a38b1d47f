//! Many threads append through one shared handle, mixing all three tiers and batches, with
//! small segments so that rolls race with appends and group commits. Proves the sequence is
//! gap-free and unique, every `Synced` acknowledgement is covered by the durable sequence
//! number at the moment it returns, and every record reads back with its own bytes.

use std::collections::HashMap;
use std::sync::Arc;

use factlog::{Durability, Log, Options, Seq};

const THREADS: u64 = 8;
const PER_THREAD: u64 = 400;

#[test]
fn concurrent_appenders_get_a_gap_free_durable_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::new().segment_bytes(16 * 1024).buffer_bytes(8192);
    let log = Arc::new(Log::open(dir.path(), options.clone()).unwrap());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..PER_THREAD {
                    let body = format!("thread {t} record {i}").into_bytes();
                    match i % 4 {
                        0 => {
                            let seq = log.append(&body, Durability::Synced).unwrap();
                            let durable = log.durable_seq().expect("something is durable");
                            assert!(durable >= seq, "synced {seq} but durable is {durable}");
                            mine.push((seq, body));
                        }
                        1 => mine.push((log.append(&body, Durability::Flushed).unwrap(), body)),
                        2 => mine.push((log.append(&body, Durability::Buffered).unwrap(), body)),
                        _ => {
                            let second = format!("{t}/{i} second").into_bytes();
                            let first =
                                log.append_batch(&[&body, &second], Durability::Buffered).unwrap();
                            mine.push((first, body));
                            mine.push((Seq(first.0 + 1), second));
                        }
                    }
                }
                mine
            })
        })
        .collect();
    let mut appended: HashMap<u64, Vec<u8>> = HashMap::new();
    for handle in handles {
        for (seq, body) in handle.join().unwrap() {
            assert!(appended.insert(seq.0, body).is_none(), "seq {seq} handed out twice");
        }
    }
    let total = appended.len() as u64;
    assert_eq!(total, THREADS * PER_THREAD * 5 / 4);
    assert!((1..=total).all(|s| appended.contains_key(&s)), "the sequence has a gap");
    assert_eq!(log.last_seq(), Some(Seq(total)));
    let log = Arc::into_inner(log).unwrap();
    assert!(log.info().unwrap().segments.len() > 3, "segments must have rolled");
    log.close().unwrap();

    let log = Log::open(dir.path(), options).unwrap();
    let mut n = 0;
    for record in log.read_from(Seq(1)).unwrap() {
        let record = record.unwrap();
        n += 1;
        assert_eq!(record.seq, Seq(n));
        assert_eq!(&record.payload[..], &appended[&n][..]);
    }
    assert_eq!(n, total);
}
