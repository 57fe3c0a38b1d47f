//! Following a served store's events as they are appended: [`Client::follow`] sends one
//! `follow` request (`format-spec/server.md`), a long poll that the server answers as soon as
//! an event at or after `from_seq` exists, or with an empty page at the timeout; [`Follow`]
//! iterates over events forever, one request per page.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Client, ClientError};
use crate::limits::SERVER_FOLLOW_TIMEOUT_MS_MAX;
use crate::protocol::op::{EventsPage, Op};

impl Client {
    /// One page of events from `from_seq` on (of `task` only, when given), as
    /// [`Client::events`] gives it, except that when there is none yet the server waits up to
    /// `timeout` for one to be appended (by any client or the serving process) and answers at
    /// once when it is. An empty page means the timeout passed (or the server is stopping);
    /// its `next_seq` is where to follow from next. `timeout` is capped at
    /// [`SERVER_FOLLOW_TIMEOUT_MS_MAX`] ms.
    ///
    /// # Errors
    ///
    /// As [`Client::request`].
    pub fn follow(
        &mut self,
        from_seq: u64,
        task: Option<&str>,
        timeout: Duration,
    ) -> Result<(Vec<Map<String, Value>>, u64), ClientError> {
        let timeout_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .min(SERVER_FOLLOW_TIMEOUT_MS_MAX);
        let op = Op::Follow {
            from_seq: Some(from_seq),
            task: task.map(str::to_owned),
            limit: None,
            timeout_ms: Some(timeout_ms),
        };
        let page: EventsPage = self.call(&op)?;
        Ok((page.events, page.next_seq))
    }

    /// Every event from `from_seq` on (of `task` only, when given), as they are appended:
    /// an iterator that never ends by itself, one [`Client::follow`] request of the largest
    /// timeout per page. Stops after its first error.
    pub fn follow_events(&mut self, from_seq: u64, task: Option<&str>) -> Follow<'_> {
        Follow {
            client: self,
            task: task.map(str::to_owned),
            next_seq: from_seq,
            page: VecDeque::new(),
            failed: false,
        }
    }
}

/// The events of a served store as they are appended: [`Client::follow_events`].
#[derive(Debug)]
pub struct Follow<'a> {
    client: &'a mut Client,
    task: Option<String>,
    next_seq: u64,
    page: VecDeque<Map<String, Value>>,
    failed: bool,
}

impl Follow<'_> {
    /// The seq the next request starts from: past every event returned or buffered.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

impl Iterator for Follow<'_> {
    type Item = Result<Map<String, Value>, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.page.is_empty() {
            if self.failed {
                return None;
            }
            let timeout = Duration::from_millis(SERVER_FOLLOW_TIMEOUT_MS_MAX);
            match self.client.follow(self.next_seq, self.task.as_deref(), timeout) {
                Ok((events, next)) => {
                    self.page.extend(events);
                    self.next_seq = next;
                }
                Err(error) => {
                    self.failed = true;
                    return Some(Err(error));
                }
            }
        }
        self.page.pop_front().map(Ok)
    }
}
