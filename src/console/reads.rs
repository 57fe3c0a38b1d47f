//! Pages of one task's events for the console's timeline and its export, each bounded: at
//! most [`CONSOLE_PAGE_EVENTS_MAX`] events, and when the store is read from its files at most
//! [`CONSOLE_PAGE_RECORDS_SCANNED_MAX`] records looked at (a task whose events are sparse among others' is read
//! over several pages; `next_seq` says where to go on).
//!
//! A served store is read through a [`Client`] of the process that serves it (its `events`
//! request, the same page as every door's, [`crate::protocol::pages`]); any other through a
//! read-only open of its log (no lock, nothing written), whose records are filtered by the
//! task in their envelope ([`codec::peek`]) before only the task's are decoded.

use std::path::Path;

use serde_json::{Map, Value};

use crate::client::Client;
use crate::client::served::{Held, holder_of};
use crate::harness::codec;
use crate::limits::{
    CONSOLE_PAGE_BYTES_MAX, CONSOLE_PAGE_EVENTS_MAX, CONSOLE_PAGE_RECORDS_SCANNED_MAX,
};
use crate::protocol::views;
use crate::{Log, Options, Seq};

/// One page of a task's events.
#[derive(Debug, Default)]
pub struct Page {
    /// The events, in order, as `factlog dump --json` prints them.
    pub events: Vec<Map<String, Value>>,
    /// Where the next page starts.
    pub next_seq: u64,
    /// The store's last seq when the page was read.
    pub last_seq: u64,
    /// The first seq the store still holds (earlier ones were reclaimed).
    pub first_seq: u64,
    /// The last record in the store's files (a read-only reader's durable seq), when read
    /// from them.
    pub durable_seq: Option<u64>,
}

/// Why a page could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Reading the store's files failed.
    Store(crate::Error),
    /// The serving process refused or went away.
    Client(crate::client::ClientError),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Store(error) => write!(f, "cannot read the store: {error}"),
            ReadError::Client(error) => {
                write!(f, "cannot read through the serving process: {error}")
            }
        }
    }
}

/// One page of `task`'s events from `from` on (the first the store holds when `from` is
/// below it), at most `limit` events (capped at [`CONSOLE_PAGE_EVENTS_MAX`]).
///
/// # Errors
///
/// When the store cannot be read.
pub fn task_page(dir: &Path, task: &str, from: u64, limit: usize) -> Result<Page, ReadError> {
    let limit = limit.clamp(1, CONSOLE_PAGE_EVENTS_MAX);
    if matches!(holder_of(dir), Some(Held::Served { .. })) {
        match served_page(dir, task, from, limit) {
            Ok(page) => return Ok(page),
            // A server that stopped between the check and the request, or a page that starts
            // before what the store still holds: the files tell where it starts now.
            Err(ReadError::Client(error))
                if matches!(error, crate::client::ClientError::Connect { .. })
                    || error.code() == Some("RECLAIMED") => {}
            Err(error) => return Err(error),
        }
    }
    files_page(dir, task, from, limit).map_err(ReadError::Store)
}

fn served_page(dir: &Path, task: &str, from: u64, limit: usize) -> Result<Page, ReadError> {
    let mut client = Client::connect(dir).map_err(ReadError::Client)?;
    let mut page = Page { next_seq: from.max(1), first_seq: 1, ..Page::default() };
    loop {
        let reply = client.events_page(page.next_seq, Some(task)).map_err(ReadError::Client)?;
        page.last_seq = reply.last_seq;
        page.next_seq = reply.next_seq;
        let room = limit - page.events.len();
        if reply.events.len() > room {
            page.next_seq = reply.events.get(room).and_then(seq_of).unwrap_or(reply.next_seq);
            page.events.extend(reply.events.into_iter().take(room));
        } else {
            page.events.extend(reply.events);
        }
        // One reply of the server's is bounded in bytes: a page with events ends with it.
        if !page.events.is_empty() || page.next_seq > page.last_seq {
            return Ok(page);
        }
    }
}

fn seq_of(event: &Map<String, Value>) -> Option<u64> {
    event.get("seq").and_then(Value::as_u64)
}

fn files_page(dir: &Path, task: &str, from: u64, limit: usize) -> crate::Result<Page> {
    let log = Log::open_read_only(dir, Options::new())?;
    let first_seq = log.first_seq()?.0;
    let last_seq = log.last_seq().map_or(0, |seq| seq.0);
    let mut page = Page {
        next_seq: from.max(first_seq),
        last_seq,
        first_seq,
        events: Vec::new(),
        durable_seq: log.durable_seq().map(|seq| seq.0),
    };
    if page.next_seq > last_seq {
        return Ok(page);
    }
    let mut scanned = 0;
    let mut bytes = 0;
    for record in log.read_from(Seq(page.next_seq))? {
        let record = record?;
        page.next_seq = record.seq.0 + 1;
        scanned += 1;
        if codec::peek(record.seq, &record.payload)?.task == task {
            let event = codec::decode(record.seq, &record.payload)?;
            page.events.push(views::event_object(&event, false));
            bytes += record.payload.len();
        }
        if page.events.len() >= limit
            || bytes >= CONSOLE_PAGE_BYTES_MAX
            || scanned >= CONSOLE_PAGE_RECORDS_SCANNED_MAX
            || record.seq.0 >= last_seq
        {
            break;
        }
    }
    Ok(page)
}
