//! Proves, on the simulated file system, that the growth of segments in steps
//! (`format-spec/segment.md`, "Capacity and growth") meets a full file system safely:
//! - a growth step is taken only while the free-space margin of
//!   `limits::prealloc_free_bytes_min` stays free; below it the segment grows with its
//!   appends only, and the margin is never taken by zeros;
//! - when the disk fills up, appends fail with the typed `DiskFull` (then `Poisoned`), and a
//!   reopen finds every acknowledged record and nothing else;
//! - `ENOSPC` injected at every operation of a growing workload (growth zero writes and their
//!   syncs included) fails at most that append, typed, and loses nothing acknowledged.

use std::path::Path;
use std::sync::Arc;

use factlog::fs::Fs;
use factlog::fs::sim::{Fault, SimFs};
use factlog::limits::{growth_step_bytes_first, prealloc_free_bytes_min};
use factlog::{Durability, ErrorKind, Log, Options, Seq};

const MIB: u64 = 1024 * 1024;
const SEGMENT_BYTES: u64 = MIB;
const CAPACITY_BYTES: u64 = 80 * MIB;
const DIR: &str = "/log";
const FILLER: &str = "/filler";

fn options(fs: &SimFs) -> Options {
    Options::new().segment_bytes(SEGMENT_BYTES).background_threads(false).fs(Arc::new(fs.clone()))
}

fn available(fs: &SimFs) -> u64 {
    fs.space(Path::new("/")).unwrap().available_bytes
}

/// Fills the disk with a file so that exactly `left` bytes stay free.
fn leave_free(fs: &SimFs, left: u64) {
    fs.write_file(Path::new(FILLER), &[]);
    let filler = CAPACITY_BYTES - fs.used_bytes() - left;
    fs.write_file(Path::new(FILLER), &vec![0u8; filler as usize]);
    assert_eq!(available(fs), left);
}

fn read_all(fs: &SimFs) -> Vec<Seq> {
    let log = Log::open_read_only(DIR, options(fs)).unwrap();
    log.read_from(Seq(1)).unwrap().map(|r| r.unwrap().seq).collect()
}

fn active_len(fs: &SimFs, log: &Log) -> u64 {
    let path = log.info().unwrap().segments.last().unwrap().path.clone();
    fs.read_file(&path).unwrap().len() as u64
}

#[test]
fn growth_keeps_the_margin_and_a_full_disk_loses_nothing_acknowledged() {
    let fs = SimFs::new(1);
    fs.set_capacity(Some(CAPACITY_BYTES));
    let step = growth_step_bytes_first(SEGMENT_BYTES);
    let margin = prealloc_free_bytes_min(SEGMENT_BYTES, CAPACITY_BYTES);
    let log = Log::open(DIR, options(&fs)).unwrap();
    assert_eq!(active_len(&fs, &log), step, "a new segment holds its first step");
    let mut acked = Vec::new();
    while log.prealloc_stats().growth_steps < 3 {
        acked.push(log.append(&[7u8; 1000], Durability::Synced).unwrap());
    }
    assert_eq!(active_len(&fs, &log), 4 * step, "grown in steps of {step}");

    // Less than a step above the margin: no more zeros, the appends extend the file.
    leave_free(&fs, margin + step - 1);
    let (steps, before) = (log.prealloc_stats().growth_steps, available(&fs));
    let appends = 3 * step / 1000;
    for _ in 0..appends {
        acked.push(log.append(&[8u8; 1000], Durability::Synced).unwrap());
    }
    assert_eq!(log.prealloc_stats().growth_steps, steps, "no step below the margin");
    let frames_bytes = appends * 1024;
    assert!(before - available(&fs) <= frames_bytes, "only the appended bytes used space");
    assert!(active_len(&fs, &log) > 4 * step, "the segment grew with its appends");

    // The disk fills up: a typed error, then the writer is poisoned.
    leave_free(&fs, 2500);
    let error = loop {
        match log.append(&[9u8; 1000], Durability::Synced) {
            Ok(seq) => acked.push(seq),
            Err(error) => break error,
        }
    };
    assert!(matches!(error.kind(), ErrorKind::DiskFull { .. }), "{error}");
    let error = log.append(b"later", Durability::Synced).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Poisoned { .. }), "{error}");
    drop(log);
    assert_eq!(read_all(&fs), acked, "every acknowledged record, nothing else");

    // Space is back: the store grows in steps again.
    fs.remove_file(Path::new(FILLER)).unwrap();
    let log = Log::open(DIR, options(&fs)).unwrap();
    while log.prealloc_stats().growth_steps < 2 {
        acked.push(log.append(&[6u8; 1000], Durability::Synced).unwrap());
    }
    log.close().unwrap();
    assert_eq!(read_all(&fs), acked);
}

#[test]
fn enospc_at_any_operation_of_a_growing_log_fails_typed_and_loses_nothing_acknowledged() {
    let workload = |fs: &SimFs, acked: &mut Vec<Seq>| -> Option<factlog::Error> {
        let log = match Log::open(DIR, options(fs)) {
            Ok(log) => log,
            Err(error) => return Some(error),
        };
        let mut failure = None;
        for i in 0..200u32 {
            let durability = if i % 3 == 0 { Durability::Synced } else { Durability::Flushed };
            match log.append(&[i as u8; 900], durability) {
                Ok(seq) if durability == Durability::Synced => acked.push(seq),
                Ok(_) => {}
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        match log.close() {
            Err(error) => failure.or(Some(error)),
            Ok(()) if failure.is_none() => {
                acked.clear();
                acked.extend((1..=200).map(Seq));
                None
            }
            Ok(()) => failure,
        }
    };
    let clean = SimFs::new(2);
    let mut acked = Vec::new();
    assert!(workload(&clean, &mut acked).is_none());
    let total = clean.ops();
    assert!(total > 250, "{total} operations");
    let mut failures = 0;
    for op in 0..total {
        let fs = SimFs::new(2);
        fs.inject(op, Fault::NoSpace);
        let mut acked = Vec::new();
        if let Some(error) = workload(&fs, &mut acked) {
            failures += 1;
            let typed =
                matches!(error.kind(), ErrorKind::DiskFull { .. } | ErrorKind::Poisoned { .. });
            assert!(typed, "op {op}: {error}");
        }
        if fs.files().iter().any(|p| p.starts_with(DIR) && p.extension().is_some()) {
            let found = read_all(&fs);
            let promised = acked.last().map_or(0, |seq| seq.0) as usize;
            assert!(found.len() >= promised, "op {op}: lost acknowledged records");
            assert!(found.iter().enumerate().all(|(i, seq)| seq.0 == i as u64 + 1), "op {op}");
        }
    }
    assert!(failures > 0, "some injected ENOSPC reached an append");
}
