//! A served connection's socket as its [`super::conn::Connection`] reads and writes it, in
//! either of its two lives (`format-spec/server.md`, "One event loop"): on the server's event
//! loop, where nothing blocks (a read that would block says so, a write keeps what the socket
//! does not take), and in a thread of its own once promoted, where reads wait within the
//! connection's deadline and writes within the server's write timeout.
//!
//! The deadline is the hello bound from the accept, then the idle bound from the last request
//! (`format-spec/server.md`, "The socket"). In a thread, the socket's read timeout is moved toward
//! it as it nears, never more than twice the time left, so a read blocks past the deadline by
//! at most the time that was left, and the timeout is set again only when it is off by more
//! than a factor of two (a few system calls per bound, not one per read). On the event loop,
//! the loop ends a connection whose deadline passed ([`Deadline::at`]).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// When a connection must have sent its next line: shared by its input (which reads against
/// it) and its holds (which restart it at the hello and at each request).
#[derive(Debug)]
pub(super) struct Deadline {
    /// The accept: `at` counts from it.
    base: Instant,
    /// The deadline, in nanoseconds after `base`.
    at: AtomicU64,
    /// A request came since the last read: the idle bound restarts at the next read (one look
    /// at the clock a read, not one a request line).
    active: AtomicBool,
    /// The idle bound.
    idle: Duration,
}

impl Deadline {
    /// The deadline of a connection accepted at `accepted`: its hello within `hello`, then
    /// each request within `idle` of the last.
    pub(super) fn new(accepted: Instant, hello: Duration, idle: Duration) -> Deadline {
        let deadline =
            Deadline { base: accepted, at: AtomicU64::new(0), active: false.into(), idle };
        deadline.set(deadline_after(accepted, hello));
        deadline
    }

    /// The deadline is `bound` from now (the hello was answered: the idle bound).
    pub(super) fn restart(&self, bound: Duration) {
        self.set(deadline_after(Instant::now(), bound));
    }

    /// A request came: the idle bound restarts at the next read.
    pub(super) fn request_done(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// The deadline as of `now`: a request since the last read moves it to the idle bound
    /// from `now`.
    pub(super) fn at(&self, now: Instant) -> Instant {
        if self.active.swap(false, Ordering::Relaxed) {
            self.set(deadline_after(now, self.idle));
        }
        self.base + Duration::from_nanos(self.at.load(Ordering::Relaxed))
    }

    fn set(&self, at: Instant) {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        self.at.store(u64::try_from(nanos).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// `from + bound`, or a year from `from` when the bound is further than a clock can count
/// (a huge `--idle-timeout-ms` means "never", not a panic).
fn deadline_after(from: Instant, bound: Duration) -> Instant {
    let year = Duration::from_secs(365 * 24 * 3600);
    from.checked_add(bound.min(year)).unwrap_or(from)
}

/// A connection's input: its socket read against its deadline.
#[derive(Debug)]
pub(super) struct ClientInput {
    stream: Arc<UnixStream>,
    deadline: Arc<Deadline>,
    /// The read timeout the socket has now (reads that block).
    timeout: Duration,
    /// Reads wait for bytes (a promoted connection's); else they return `WouldBlock`.
    blocking: bool,
    /// The last read without blocking took fewer bytes than it had room for: the socket held
    /// no more then, so the next such read says `WouldBlock` without asking it (the loop's
    /// `epoll` set is level-triggered: bytes that came since wake it again).
    drained: bool,
}

impl ClientInput {
    /// The input of `stream`, whose read timeout is `timeout` now, read without blocking.
    pub(super) fn new(
        stream: Arc<UnixStream>,
        deadline: Arc<Deadline>,
        timeout: Duration,
    ) -> ClientInput {
        ClientInput { stream, deadline, timeout, blocking: false, drained: false }
    }

    /// From now on reads wait for bytes, within the deadline.
    pub(super) fn set_blocking(&mut self) {
        self.blocking = true;
    }
}

impl Read for ClientInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let now = Instant::now();
        let left = self.deadline.at(now).saturating_duration_since(now);
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        if !self.blocking {
            if std::mem::take(&mut self.drained) {
                return Err(io::Error::from(io::ErrorKind::WouldBlock));
            }
            return loop {
                match rustix::net::recv(&*self.stream, &mut *buf, rustix::net::RecvFlags::DONTWAIT)
                {
                    Ok((read, _)) => {
                        self.drained = read > 0 && read < buf.len();
                        break Ok(read);
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(errno) => break Err(errno.into()),
                }
            };
        }
        if self.timeout > left.saturating_mul(2) || self.timeout.saturating_mul(2) < left {
            let _ = self.stream.set_read_timeout(Some(left));
            self.timeout = left;
        }
        (&*self.stream).read(buf)
    }
}

/// A connection's output: on the event loop, what the socket does not take now waits here
/// ([`ClientOutput::backlog`]) and goes out at the next flush; promoted, writes block within
/// the socket's write timeout.
#[derive(Debug)]
pub(super) struct ClientOutput {
    stream: Arc<UnixStream>,
    waiting: Vec<u8>,
    blocking: bool,
}

impl ClientOutput {
    /// The output of `stream`, written without blocking.
    pub(super) fn new(stream: Arc<UnixStream>) -> ClientOutput {
        ClientOutput { stream, waiting: Vec::new(), blocking: false }
    }

    /// From now on writes block (what waits goes first).
    pub(super) fn set_blocking(&mut self) {
        self.blocking = true;
    }

    /// The bytes written that the socket has not taken yet.
    pub(super) fn backlog(&self) -> usize {
        self.waiting.len()
    }

    /// Sends as much of what waits as the socket takes now.
    fn send_waiting(&mut self) -> io::Result<()> {
        let mut sent = 0;
        while sent < self.waiting.len() {
            match send_now(&self.stream, &self.waiting[sent..]) {
                Ok(0) => break,
                Ok(n) => sent += n,
                Err(error) => {
                    self.waiting.drain(..sent);
                    return Err(error);
                }
            }
        }
        self.waiting.drain(..sent);
        Ok(())
    }
}

/// One `send` that does not wait: the bytes the socket took, 0 when it is full.
fn send_now(stream: &UnixStream, bytes: &[u8]) -> io::Result<usize> {
    let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
    loop {
        match rustix::net::send(stream, bytes, flags) {
            Ok(sent) => return Ok(sent),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => return Ok(0),
            Err(errno) => return Err(errno.into()),
        }
    }
}

impl Write for ClientOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.blocking {
            if !self.waiting.is_empty() {
                (&*self.stream).write_all(&self.waiting)?;
                self.waiting.clear();
            }
            return (&*self.stream).write(buf);
        }
        if self.waiting.is_empty() {
            let sent = send_now(&self.stream, buf)?;
            self.waiting.extend_from_slice(&buf[sent..]);
        } else {
            self.waiting.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.blocking {
            (&*self.stream).write_all(&self.waiting)?;
            self.waiting.clear();
            return Ok(());
        }
        self.send_waiting()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_read_on_the_loop_ends_the_turn_without_asking_the_socket_again() {
        let (client, server) = UnixStream::pair().expect("pair");
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        let deadline = Arc::new(Deadline::new(now, hour, hour));
        let mut input = ClientInput::new(Arc::new(server), deadline, hour);
        let mut buf = [0_u8; 64];
        (&client).write_all(b"one\n").expect("write");
        assert_eq!(input.read(&mut buf).expect("read"), 4);
        // More came, but the read before took less than it had room for: the turn ends here
        // (the loop's level-triggered epoll reports the socket again).
        (&client).write_all(b"two\n").expect("write");
        let error = input.read(&mut buf).expect_err("would block");
        assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(input.read(&mut buf).expect("read"), 4);
        assert_eq!(&buf[..4], b"two\n");
        assert_eq!(input.read(&mut buf).expect_err("short").kind(), io::ErrorKind::WouldBlock);
        // A read that fills its buffer does not say the socket is empty.
        (&client).write_all(&[b'x'; 100]).expect("write");
        assert_eq!(input.read(&mut buf).expect("read"), 64);
        assert_eq!(input.read(&mut buf).expect("read"), 36);
        // Nothing there: the socket says so itself.
        assert_eq!(input.read(&mut buf).expect_err("drained").kind(), io::ErrorKind::WouldBlock);
        assert_eq!(input.read(&mut buf).expect_err("empty").kind(), io::ErrorKind::WouldBlock);
        // A connection moved to a thread reads what is there after a short read.
        input.set_blocking();
        (&client).write_all(b"three\n").expect("write");
        assert_eq!(input.read(&mut buf).expect("read"), 6);
        (&client).write_all(b"four\n").expect("write");
        assert_eq!(input.read(&mut buf).expect("read"), 5);
    }
}
