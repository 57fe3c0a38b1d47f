//! A read from a seq deep in a segment starts at a frame start an earlier reader recorded
//! (`engine::seeks`): every record still reads back as written, from any seq, single and
//! batch frames alike, in the active segment as it grows and after a reopen; and a read that
//! starts at a recorded start does not check the frames before it (a flipped byte there is
//! found by a read from before it, not by one from after it), nor map the segment's header
//! again.

use std::sync::Arc;

use factlog::{Durability, Log, Options, Seq};

fn record(seq: u64) -> Vec<u8> {
    let mut bytes = format!("record {seq} ").into_bytes();
    bytes.resize(200 + (seq % 7) as usize * 30, b'a' + (seq % 26) as u8);
    bytes
}

/// Appends records 1..=count, every tenth group of five as one batch frame.
fn fill(log: &Log, count: u64) {
    let mut seq = 1;
    while seq <= count {
        if seq % 10 == 0 && seq + 4 <= count {
            let batch: Vec<Vec<u8>> = (seq..seq + 5).map(record).collect();
            assert_eq!(log.append_batch(&batch, Durability::Buffered).expect("batch").0, seq);
            seq += 5;
        } else {
            assert_eq!(log.append(&record(seq), Durability::Buffered).expect("append").0, seq);
            seq += 1;
        }
    }
    log.flush(Durability::Synced).expect("sync");
}

fn first_from(log: &Log, from: u64) -> (u64, Vec<u8>) {
    let record = log.read_from(Seq(from)).expect("reader").next().expect("a record").expect("ok");
    (record.seq.0, record.payload.to_vec())
}

#[test]
fn every_record_reads_back_from_any_seq_after_starts_were_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Log::open(dir.path(), Options::new()).expect("open");
    let count = 4_000;
    fill(&log, count);
    // The first read passes the whole segment and records its starts.
    assert_eq!(log.read_from(Seq(1)).expect("reader").count() as u64, count);
    for from in (1..=count).step_by(37).chain([count - 1, count]) {
        assert_eq!(first_from(&log, from), (from, record(from)), "from {from}");
    }
    // The active segment grows past its recorded starts: still right.
    let more = count + 1;
    assert_eq!(log.append(&record(more), Durability::Synced).expect("append").0, more);
    assert_eq!(first_from(&log, more), (more, record(more)));
    assert_eq!(log.read_from(Seq(count - 100)).expect("reader").count(), 102);
    log.close().expect("close");
    let log = Log::open(dir.path(), Options::new()).expect("reopen");
    for from in [1, 555, 3_001, more] {
        assert_eq!(first_from(&log, from), (from, record(from)), "after reopen, from {from}");
    }
    log.close().expect("close");
}

#[test]
fn a_read_from_a_recorded_start_does_not_check_the_frames_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Log::open(dir.path(), Options::new()).expect("open"));
    let count = 2_000;
    fill(&log, count);
    assert_eq!(log.read_from(Seq(1)).expect("reader").count() as u64, count);
    // Flip a byte of record 3's payload on disk (the log stays open, its starts recorded).
    let segment = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .find(|path| path.extension().is_some_and(|ext| ext == "seg"))
        .expect("a segment");
    let mut bytes = std::fs::read(&segment).expect("read");
    let at = bytes.windows(9).position(|w| w == b"record 3 ").expect("record 3") + 12;
    bytes[at] ^= 0x20;
    std::fs::write(&segment, &bytes).expect("write");
    let from_start = log.read_from(Seq(1)).expect("reader").find_map(Result::err);
    assert!(from_start.is_some(), "a read from the start finds the flipped byte");
    assert_eq!(first_from(&log, count - 10), (count - 10, record(count - 10)));
}

#[test]
fn a_read_from_a_recorded_start_maps_one_window() {
    use factlog::engine::counting_fs::CountingFs;
    let dir = tempfile::tempdir().expect("tempdir");
    let (fs, counters) = CountingFs::new();
    let log = Log::open(dir.path(), Options::new().fs(fs)).expect("open");
    let count = 20_000;
    fill(&log, count);
    assert_eq!(log.read_from(Seq(1)).expect("reader").count() as u64, count);
    for from in [count / 2, count - 3, 7_777] {
        let before = counters.window_maps();
        assert_eq!(first_from(&log, from), (from, record(from)), "from {from}");
        // The window from the recorded start, not the segment's header's window too.
        assert_eq!(counters.window_maps() - before, 1, "from {from}");
    }
    // A read from the first records starts at the header, which it checks.
    let before = counters.window_maps();
    assert_eq!(first_from(&log, 2), (2, record(2)));
    assert_eq!(counters.window_maps() - before, 1);
    log.close().expect("close");
}
