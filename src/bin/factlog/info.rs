//! `factlog info`: the segments, sequence range and durable sequence number of a log, read
//! through a read-only open (no lock, nothing written; works on a full disk).
//!
//! A read-only open runs the same recovery analysis as a writer open, so `info` also says what
//! a writer open would cut from a torn tail.

use std::process::ExitCode;

use factlog::{Log, LogInfo, Options, Seq, TailCut};
use serde_json::{Value, json};

use crate::{Failure, InfoArgs, Outcome};

/// Exit code for every runtime failure of `info`.
const EXIT_FAILURE: u8 = 1;

pub fn run(args: &InfoArgs) -> Outcome {
    let log = Log::open_read_only(&args.dir, Options::new()).map_err(|error| {
        Failure::new(EXIT_FAILURE, format_args!("cannot open {}: {error}", args.dir.display()))
    })?;
    let info =
        log.info().map_err(|error| Failure::new(EXIT_FAILURE, format_args!("info: {error}")))?;
    let tail_cut = log.recovery_report().tail_cut.as_ref();
    if args.json {
        println!("{}", info_json(&info, tail_cut));
    } else {
        print_text(&info, tail_cut);
    }
    Ok(ExitCode::SUCCESS)
}

fn seq_text(seq: Option<Seq>) -> String {
    seq.map_or_else(|| "none".to_owned(), |seq| seq.0.to_string())
}

fn print_text(info: &LogInfo, tail_cut: Option<&TailCut>) {
    println!("dir: {}", info.dir.display());
    println!("segments: {}", info.segments.len());
    for segment in &info.segments {
        let state = if segment.sealed { "sealed" } else { "active" };
        println!(
            "  segment {} {}: first seq {}, {} bytes, {state}",
            segment.id.0,
            segment.path.display(),
            segment.first_seq.0,
            segment.file_bytes
        );
    }
    match (info.first_seq, info.last_seq) {
        (Some(first), Some(last)) => println!("seqs: {}..={}", first.0, last.0),
        _ => println!("seqs: none"),
    }
    println!("durable seq: {}", seq_text(info.durable_seq));
    if let Some(cut) = tail_cut {
        println!(
            "torn tail: segment {} ({}) at offset {}: {} bytes, which a writer open would cut",
            cut.segment.0,
            cut.path.display(),
            cut.offset,
            cut.bytes
        );
    }
}

fn info_json(info: &LogInfo, tail_cut: Option<&TailCut>) -> Value {
    let segments: Vec<Value> = info
        .segments
        .iter()
        .map(|segment| {
            json!({
                "id": segment.id.0,
                "path": segment.path.display().to_string(),
                "first_seq": segment.first_seq.0,
                "file_bytes": segment.file_bytes,
                "sealed": segment.sealed,
            })
        })
        .collect();
    let torn_tail = tail_cut.map_or(Value::Null, |cut| {
        json!({
            "segment": cut.segment.0,
            "path": cut.path.display().to_string(),
            "offset": cut.offset,
            "bytes": cut.bytes,
        })
    });
    json!({
        "dir": info.dir.display().to_string(),
        "segments": segments,
        "first_seq": info.first_seq.map(|seq| seq.0),
        "last_seq": info.last_seq.map(|seq| seq.0),
        "durable_seq": info.durable_seq.map(|seq| seq.0),
        "torn_tail": torn_tail,
    })
}
