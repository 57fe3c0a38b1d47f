//! Appends with every durability tier and as batches, across many segment rolls, and proves
//! that reading back (in the same handle and after reopening) yields exactly the records
//! appended, in order, from any starting sequence number.

use factlog::{Durability, ErrorKind, Log, Options, Seq};

fn small() -> Options {
    Options::new().segment_bytes(8192).buffer_bytes(4096)
}

fn payload(i: u64) -> Vec<u8> {
    let len = (i * 37 % 300) as usize;
    (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
}

fn read_all(log: &Log, from: u64) -> Vec<(u64, Vec<u8>)> {
    log.read_from(Seq(from))
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.seq.0, r.payload.to_vec())
        })
        .collect()
}

#[test]
fn records_round_trip_across_rolls_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    {
        let log = Log::open(dir.path(), small()).unwrap();
        let tiers = [Durability::Buffered, Durability::Flushed, Durability::Synced];
        for i in 1..=600u64 {
            let seq = log.append(&payload(i), tiers[(i % 3) as usize]).unwrap();
            assert_eq!(seq, Seq(i));
            expected.push((i, payload(i)));
        }
        assert_eq!(read_all(&log, 1), expected, "a writer reads its own buffered records");
        assert!(log.info().unwrap().segments.len() > 10, "small segments must have rolled");
        log.close().unwrap();
    }
    let log = Log::open(dir.path(), small()).unwrap();
    let report = log.recovery_report();
    assert_eq!(report.last_seq, Some(Seq(600)));
    assert_eq!(report.tail_cut, None);
    assert_eq!(read_all(&log, 1), expected);
    assert_eq!(read_all(&log, 457), expected[456..].to_vec());
    assert_eq!(read_all(&log, 601), vec![]);
    assert_eq!(log.append(b"next", Durability::Synced).unwrap(), Seq(601));
}

#[test]
fn batches_are_consecutive_and_read_back_individually() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    log.append(b"one", Durability::Buffered).unwrap();
    let records: Vec<Vec<u8>> = (0..50).map(payload).collect();
    let first = log.append_batch(&records, Durability::Synced).unwrap();
    assert_eq!(first, Seq(2));
    assert_eq!(log.append(b"after", Durability::Flushed).unwrap(), Seq(52));
    let got = read_all(&log, 10);
    assert_eq!(got.len(), 43);
    assert_eq!(got[0], (10, records[8].clone()));
    assert_eq!(got[42], (52, b"after".to_vec()));
}

#[test]
fn durable_seq_covers_every_synced_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::new().background_threads(false)).unwrap();
    assert_eq!(log.durable_seq(), None);
    log.append(b"a", Durability::Buffered).unwrap();
    assert_eq!(log.durable_seq(), None, "without a flusher a buffered record waits");
    let s = log.append(b"b", Durability::Synced).unwrap();
    assert_eq!(log.durable_seq(), Some(s), "a synced append makes every earlier record durable");
    log.append(b"c", Durability::Flushed).unwrap();
    assert_eq!(log.durable_seq(), Some(s));
    log.flush(Durability::Synced).unwrap();
    assert_eq!(log.durable_seq(), Some(Seq(3)));
}

#[test]
fn the_flusher_makes_buffered_records_durable_within_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let delay = std::time::Duration::from_millis(2);
    let log = Log::open(dir.path(), Options::new().flush_delay(delay)).unwrap();
    let seq = log.append(b"token", Durability::Buffered).unwrap();
    // No timing assertion on the window itself: poll until the background flusher has synced
    // it, and fail (instead of hanging) if it never does.
    let mut polls = 0;
    while log.durable_seq() < Some(seq) {
        polls += 1;
        assert!(polls < 30_000, "the flusher never synced a buffered record");
        std::thread::sleep(delay);
    }
}

#[test]
fn oversized_and_empty_inputs_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    let err = log.append(&vec![0u8; 9000], Durability::Synced).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { .. }), "{err}");
    let none: [&[u8]; 0] = [];
    let err = log.append_batch(&none, Durability::Synced).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { .. }), "{err}");
    // Nothing was consumed by the refused appends.
    assert_eq!(log.append(b"ok", Durability::Synced).unwrap(), Seq(1));
    // The largest record that fits a segment is accepted.
    let max = 8192 - 64 - 24;
    assert_eq!(log.append(&vec![7u8; max], Durability::Synced).unwrap(), Seq(2));
    assert_eq!(read_all(&log, 2)[0].1.len(), max);
}

#[test]
fn records_larger_than_the_buffer_are_written_directly() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), Options::new().buffer_bytes(4096)).unwrap();
    log.append(b"small", Durability::Buffered).unwrap();
    let big = vec![9u8; 100_000];
    log.append(&big, Durability::Buffered).unwrap();
    log.append(b"tail", Durability::Buffered).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), Options::new()).unwrap();
    let got = read_all(&log, 1);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1].1, big);
}

#[test]
fn read_only_open_sees_the_log_and_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), small()).unwrap();
    for i in 0..100 {
        writer.append(&payload(i), Durability::Flushed).unwrap();
    }
    let reader = Log::open_read_only(dir.path(), small()).unwrap();
    assert_eq!(reader.last_seq(), Some(Seq(100)));
    assert_eq!(read_all(&reader, 1).len(), 100);
    let err = reader.append(b"x", Durability::Synced).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::ReadOnly));
    let empty = tempfile::tempdir().unwrap();
    let err = Log::open_read_only(empty.path(), small()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotALog { .. }), "{err}");
}

#[test]
fn a_log_is_not_created_among_foreign_files_and_renamed_segments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let err = Log::open(dir.path(), small()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotALog { .. }), "{err}");
    let dir = tempfile::tempdir().unwrap();
    Log::open(dir.path(), small()).unwrap().close().unwrap();
    std::fs::write(dir.path().join("1.seg"), b"renamed").unwrap();
    let err = Log::open(dir.path(), small()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn borrowed_reads_match_owned_reads() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    for i in 1..=300u64 {
        log.append(&payload(i), Durability::Buffered).unwrap();
    }
    log.append_batch(&[b"x".as_slice(), b"yz"], Durability::Buffered).unwrap();
    let owned = read_all(&log, 5);
    let mut reader = log.read_from(Seq(5)).unwrap();
    let mut borrowed = Vec::new();
    while let Some(record) = reader.next_ref() {
        let (seq, bytes) = record.unwrap();
        borrowed.push((seq.0, bytes.to_vec()));
    }
    assert_eq!(borrowed, owned);
    assert_eq!(borrowed.len(), 298);
}
