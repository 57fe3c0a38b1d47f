//! Damage at rest is never taken for a torn tail (`format-spec/mark.md`): each case below was
//! found on cleanly closed stores, where `verify` exited 0 and the next writer open (`emit`,
//! `append`) cut acknowledged events and handed their seqs out again. Each now reproduces the
//! damage with the real binary and checks that `verify` exits 3 naming it, that a writer open
//! refuses (exit 3, the segment and `factlog salvage` named) and changes no byte, and that
//! `salvage` still copies every intact record. A genuine tear after a crash is still cut, said
//! on standard error, and its frames after the hole are kept for `salvage`.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Run, arg, factlog, read_at, segment_paths, temp_log, write_at};

/// `n` user messages through `emit`, each `Synced`, in task `t`.
fn synced_messages(n: usize) -> Vec<u8> {
    let mut input = String::new();
    for i in 1..=n {
        input.push_str(&format!(
            "{{\"task\":\"t\",\"type\":\"user/message\",\"text\":\"m{i}\",\"durability\":\"synced\"}}\n"
        ));
    }
    input.into_bytes()
}

/// A session as harnesses end one: a synced message, then streamed deltas and messages at
/// their default durability.
fn session(turns: usize) -> Vec<u8> {
    let mut input = String::new();
    for turn in 0..turns {
        input.push_str(&format!(
            "{{\"task\":\"t\",\"type\":\"user/message\",\"text\":\"q{turn}\",\"durability\":\"synced\"}}\n"
        ));
        for token in 0..20 {
            input.push_str(&format!(
                "{{\"task\":\"t\",\"type\":\"assistant/delta\",\"text\":\"tok{turn}-{token} \"}}\n"
            ));
        }
        input.push_str(&format!(
            "{{\"task\":\"t\",\"type\":\"user/message\",\"text\":\"after {turn}\"}}\n"
        ));
    }
    input.into_bytes()
}

fn emit(dir: &Path, input: &[u8]) -> Run {
    factlog(&["emit", arg(dir)], input)
}

fn verify_json(dir: &Path) -> (Option<i32>, serde_json::Value) {
    let run = factlog(&["verify", arg(dir), "--json"], b"");
    let report = serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (run.code, report)
}

/// Every file of `dir` (not `LOCK`) with its bytes.
fn image(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "LOCK"))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Where the valid frames of the active segment end, as `verify` reports it.
fn used_bytes(dir: &Path) -> u64 {
    let (_, report) = verify_json(dir);
    let segments = report["segments"].as_array().expect("segments");
    segments.last().expect("a segment")["used_bytes"].as_u64().expect("used bytes")
}

/// The damage is refused everywhere and salvage keeps what is intact.
fn assert_refused(dir: &Path, what: &str, salvage_keeps_at_least: u64) {
    let (code, report) = verify_json(dir);
    assert_eq!(code, Some(3), "{what}: verify: {report}");
    assert_eq!(report["outcome"], "corrupt", "{what}: {report}");
    assert!(report["corruption"]["path"].is_string(), "{what}: names the file: {report}");
    let before = image(dir);
    let run = emit(dir, b"{\"task\":\"p\",\"type\":\"user/message\",\"text\":\"after\"}\n");
    assert_eq!(run.code, Some(3), "{what}: a writer open refuses: {run:?}");
    assert!(run.stderr.contains("factlog salvage"), "{what}: {run:?}");
    assert!(run.stdout.is_empty(), "{what}: no seq handed out: {run:?}");
    assert_eq!(image(dir), before, "{what}: the refused open changed nothing");
    let target = PathBuf::from(format!("{}-salvaged", dir.display()));
    let salvaged = factlog(&["salvage", arg(dir), "--to", arg(&target), "--json"], b"");
    assert!(matches!(salvaged.code, Some(0 | 3)), "{what}: salvage ran: {salvaged:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&salvaged.stdout).unwrap_or_else(|e| panic!("{e}: {salvaged:?}"));
    let kept = report["records_kept"].as_u64().expect("records kept");
    assert!(kept >= salvage_keeps_at_least, "{what}: salvage kept {kept}: {report}");
}

#[test]
fn a_closed_store_cut_to_100_bytes_is_refused_not_emptied() {
    let (_temp, dir) = temp_log();
    emit(&dir, &synced_messages(50)).assert_success();
    let segment = segment_paths(&dir).remove(0);
    std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(100).unwrap();
    let (_, report) = verify_json(&dir);
    let reason = report["corruption"]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("through 50"), "names the seqs at stake: {report}");
    assert_refused(&dir, "truncated to 100 bytes", 0);
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 100, "nothing truncated or grown");
    // Salvage declares the seqs the mark vouched for as lost, and its store goes on after
    // them: no seq is given twice.
    let target = PathBuf::from(format!("{}-declared", dir.display()));
    let run = factlog(&["salvage", arg(&dir), "--to", arg(&target), "--json"], b"");
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("salvage JSON");
    assert_eq!(report["seqs_lost"], 50, "{report}");
    let emitted = emit(&target, b"{\"task\":\"p\",\"type\":\"user/message\",\"text\":\"next\"}\n");
    emitted.assert_success();
    let reply: serde_json::Value = serde_json::from_slice(&emitted.stdout).expect("a reply");
    assert_eq!(reply["seq"], 51, "{reply}");
}

#[test]
fn one_flipped_bit_after_the_last_synced_event_is_refused() {
    for back in [8u64, 200, 900, 3000] {
        let (_temp, dir) = temp_log();
        emit(&dir, &session(8)).assert_success();
        let segment = segment_paths(&dir).remove(0);
        let at = used_bytes(&dir) - back;
        let byte = read_at(&segment, at, 1)[0];
        write_at(&segment, at, &[byte ^ 0x10]);
        assert_refused(&dir, &format!("a bit flipped {back} bytes before the end"), 100);
    }
}

#[test]
fn a_zeroed_or_stale_page_after_the_last_synced_event_is_refused() {
    let (_temp, dir) = temp_log();
    emit(&dir, &session(8)).assert_success();
    let older = image(&dir);
    emit(&dir, &session(3)).assert_success();
    let segment = segment_paths(&dir).remove(0);
    let end = used_bytes(&dir);
    let last_page = (end - 1) / 4096 * 4096;

    let zeroed = dir.with_extension("zeroed");
    copy_dir(&dir, &zeroed);
    write_at(&zeroed.join(segment.file_name().unwrap()), last_page, &[0u8; 4096]);
    assert_refused(&zeroed, "the last page zeroed", 1);

    let stale = dir.with_extension("stale");
    copy_dir(&dir, &stale);
    let old_segment = &older.iter().find(|(p, _)| *p == segment).expect("the segment").1;
    let page = &old_segment[last_page as usize..last_page as usize + 4096];
    write_at(&stale.join(segment.file_name().unwrap()), last_page, page);
    assert_refused(&stale, "the last page from an older copy", 1);
}

#[test]
fn a_fully_synced_raw_log_with_its_last_page_zeroed_or_last_record_flipped_is_refused() {
    for damage in ["last page zeroed", "last record flipped"] {
        let (_temp, dir) = temp_log();
        let lines: String = (1..=300).map(|i| format!("record {i:04}\n")).collect();
        let run = factlog(&["append", arg(&dir), "--durability", "synced"], lines.as_bytes());
        run.assert_success();
        let segment = segment_paths(&dir).remove(0);
        let end = used_bytes(&dir);
        if damage == "last page zeroed" {
            write_at(&segment, (end - 1) / 4096 * 4096, &[0u8; 4096]);
        } else {
            let byte = read_at(&segment, end - 12, 1)[0];
            write_at(&segment, end - 12, &[byte ^ 1]);
        }
        let (code, report) = verify_json(&dir);
        assert_eq!(code, Some(3), "{damage}: {report}");
        let dump = factlog(&["dump", arg(&dir)], b"");
        assert_eq!(dump.code, Some(3), "{damage}: dump says the log is damaged: {dump:?}");
        let before = image(&dir);
        let run = factlog(&["append", arg(&dir)], b"after\n");
        assert_eq!(run.code, Some(3), "{damage}: {run:?}");
        assert_eq!(image(&dir), before, "{damage}: nothing changed");
    }
}

#[test]
fn a_deleted_last_or_first_segment_is_refused() {
    for which in ["last", "first"] {
        let (_temp, dir) = temp_log();
        let lines: String = (1..=600).map(|i| format!("{i:0200}\n")).collect();
        let log = factlog::Log::open(&dir, factlog::Options::new().segment_bytes(64 * 1024))
            .expect("open");
        for line in lines.lines() {
            log.append(line.as_bytes(), factlog::Durability::Flushed).expect("append");
        }
        log.close().expect("close");
        let mut segments = segment_paths(&dir);
        assert!(segments.len() >= 2, "{segments:?}");
        let gone = if which == "last" { segments.pop() } else { Some(segments.remove(0)) };
        std::fs::remove_file(gone.unwrap()).unwrap();
        let (code, report) = verify_json(&dir);
        assert_eq!(code, Some(3), "{which}: {report}");
        let reason = report["corruption"]["reason"].as_str().unwrap_or_default().to_owned();
        assert!(reason.contains("is missing"), "{which}: {report}");
        let before = image(&dir);
        let refused = factlog::Log::open(&dir, factlog::Options::new()).expect_err("refused");
        assert!(refused.is_corruption(), "{which}: {refused}");
        assert_eq!(image(&dir), before, "{which}: nothing changed");
    }
}

#[test]
fn a_damaged_only_snapshot_after_a_purge_is_named_by_verify_and_open() {
    let (_temp, dir) = temp_log();
    let options = factlog::StoreOptions::new()
        .log(factlog::Options::new().segment_bytes(64 * 1024).background_threads(false));
    let store = factlog::Store::open(&dir, options.clone()).expect("open");
    let task = store.task("t").expect("task");
    for i in 0..2000 {
        task.delta(&format!("token {i:05} of a long streamed answer")).expect("delta");
    }
    drop(task);
    let snapshot = store.checkpoint().expect("checkpoint");
    let (removed, _) = store.reclaim().expect("reclaim");
    assert!(removed > 0, "segments were reclaimed");
    store.close().expect("close");
    let mut bytes = std::fs::read(&snapshot.path).unwrap();
    *bytes.last_mut().unwrap() ^= 0xFF;
    std::fs::write(&snapshot.path, bytes).unwrap();
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["corruption"]["path"], snapshot.path.display().to_string(), "{report}");
    let error = factlog::Store::open(&dir, options).map(drop).expect_err("refused");
    assert!(error.is_corruption(), "{error}");
    assert!(error.to_string().contains(&snapshot.path.display().to_string()), "{error}");
}

/// Leaves `dir` as a crash leaves it when the writer last updated its mark after seq
/// `durable_seq`: the mark is rewritten, not clean, vouching only for the records through it
/// (`format-spec/mark.md`: the mark is written lazily, so a crash finds it behind the end).
fn crash_with_mark_at(dir: &Path, durable_seq: u64) -> u64 {
    let fs = factlog::fs::RealFs;
    let found = factlog::engine::mark::read(&fs, dir).expect("read MARK");
    let mark = *found.mark().expect("a mark");
    let segment = segment_paths(dir).remove(0);
    let bytes = std::fs::read(&segment).unwrap();
    let header = factlog::engine::segment::decode_header(&bytes, &segment).unwrap();
    let mut offset = 64;
    factlog::engine::segment::scan(&bytes, &header, None, |at, frame| {
        if frame.end_seq() <= durable_seq + 1 {
            offset = (at + frame.frame_bytes) as u64;
        }
    });
    let crashed = factlog::engine::mark::Mark {
        generation: mark.generation + 1,
        clean: false,
        durable_seq,
        durable_offset: offset,
        ..mark
    };
    let mut file = vec![0u8; factlog::engine::mark::MARK_FILE_BYTES as usize];
    let at = (crashed.generation % 2 * factlog::engine::mark::MARK_SLOT_STRIDE) as usize;
    file[at..at + factlog::engine::mark::MARK_SLOT_BYTES].copy_from_slice(&crashed.encode());
    std::fs::write(dir.join(factlog::engine::mark::MARK_FILE_NAME), file).unwrap();
    offset
}

/// Three synced messages, then 40 deltas that no sync covers before the store's clean close:
/// every delta's frame claims seq 3 durable at most. Written in this process with the longest
/// flush delay (10 s, far longer than these appends): a `factlog emit` of the same lines, with
/// the default delay of milliseconds, lets its flusher sync some of the
/// deltas when the machine stalls it between them, and a later frame then proves the damaged
/// one was synced (`format-spec/recovery.md`), which is corruption, not a tear.
fn three_synced_then_unsynced_deltas(dir: &Path) {
    use factlog::harness::Body;
    use factlog::harness::event::UserMessage;
    let longest = std::time::Duration::from_secs(10);
    let options =
        factlog::StoreOptions::new().log(factlog::Options::default().flush_delay(longest));
    let store = factlog::Store::open(dir, options).expect("open");
    let task = store.task("t").expect("task");
    let synced = factlog::AppendOptions {
        durability: Some(factlog::Durability::Synced),
        ..factlog::AppendOptions::default()
    };
    for i in 1..=3 {
        let body =
            Body::UserMessage(UserMessage { text: format!("m{i}"), extra: Default::default() });
        task.append_with(body, synced).expect("a synced message");
    }
    for i in 0..40 {
        task.delta(&format!("d{i:03}")).expect("a delta");
    }
    drop(task);
    store.close().expect("close");
}

#[test]
fn a_genuine_tear_after_a_crash_is_cut_reported_and_kept_for_salvage() {
    let (_temp, dir) = temp_log();
    three_synced_then_unsynced_deltas(&dir);
    let marked = 3;
    let mark_end = crash_with_mark_at(&dir, marked);
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["mark"]["durable_seq"], marked, "{report}");
    let segment = segment_paths(&dir).remove(0);
    let end = used_bytes(&dir);
    // Tear it as a crash can: unsynced sectors reached the disk out of order, so a hole sits
    // before the last frames (only where the mark vouches for nothing), and garbage follows.
    let hole = end - 256;
    assert!(hole > mark_end && hole + 40 < end, "a hole after the mark: {report}");
    write_at(&segment, hole, &[0u8; 40]);
    write_at(&segment, end, &[0xAB; 16]);
    let (code, report) = verify_json(&dir);
    assert_eq!(code, Some(0), "a tear the mark does not cover: {report}");
    assert_eq!(report["outcome"], "torn_tail", "{report}");
    assert_eq!(report["torn_tail"]["evidence"]["mark_durable_seq"], marked, "{report}");
    // The writer open cuts it and says so, keeping the frames after the hole.
    let run = emit(&dir, b"");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stderr.contains("cut a torn tail"), "said on stderr: {run:?}");
    assert!(run.stderr.contains("kept in"), "kept aside: {run:?}");
    let (_, report) = verify_json(&dir);
    let kept = report["kept_tails"].as_array().expect("kept tails").clone();
    assert_eq!(kept.len(), 1, "{report}");
    let info = factlog(&["info", arg(&dir), "--json"], b"");
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).expect("info JSON");
    assert_eq!(info["kept_tails"], serde_json::Value::Array(kept), "{info}");
    // Salvage puts the kept bytes back: the frames after the hole return, the hole is a gap.
    let target = dir.with_extension("salvaged");
    let run = factlog(&["salvage", arg(&dir), "--to", arg(&target), "--json"], b"");
    let salvaged: serde_json::Value = serde_json::from_slice(&run.stdout).expect("salvage JSON");
    assert_eq!(salvaged["kept_tails"][0]["restored"], true, "{salvaged}");
    let last = salvaged["last_seq"].as_u64().expect("last seq");
    let cut_from = marked + 1;
    assert!(last > cut_from, "records after the hole came back: {salvaged}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn a_log_that_ends_before_its_snapshot_is_refused_naming_the_snapshot() {
    // A snapshot covers only synced events: a log shorter than it lost synced records, even
    // where no mark vouches for them (here the mark is gone too).
    let (_temp, dir) = temp_log();
    let store = factlog::Store::open(&dir, factlog::StoreOptions::new()).expect("open");
    let task = store.task("t").expect("task");
    for i in 0..40 {
        task.delta(&format!("token {i}")).expect("delta");
    }
    drop(task);
    let snapshot = store.checkpoint().expect("checkpoint");
    store.close().expect("close");
    std::fs::remove_file(dir.join(factlog::engine::mark::MARK_FILE_NAME)).unwrap();
    let segment = segment_paths(&dir).remove(0);
    let end = used_bytes(&dir);
    write_at(&segment, end - 200, &[0u8; 200]);
    let before = image(&dir);
    let error =
        factlog::Store::open(&dir, factlog::StoreOptions::new()).map(drop).expect_err("refused");
    assert!(error.is_corruption(), "{error}");
    assert!(error.to_string().contains(&snapshot.path.display().to_string()), "{error}");
    assert_eq!(image(&dir), before, "the refused open changed nothing");
}
