//! SIGTERM and SIGINT, blocked in every thread and taken by `sigwait`, for the commands that
//! run until stopped (`serve`, `replicate`): no handler runs in signal context. The only
//! unsafe code of the command-line tool.
#![allow(unsafe_code)]

use std::io;

/// The blocked termination signals.
pub struct Termination {
    set: libc::sigset_t,
}

/// Blocks SIGTERM and SIGINT for this thread and every thread it starts later.
pub fn block_termination() -> io::Result<Termination> {
    // SAFETY: `set` is a plain C struct initialised by `sigemptyset` before any other
    // use; the calls only read and write it and the thread's signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGTERM);
        libc::sigaddset(&raw mut set, libc::SIGINT);
        let failed = libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
        if failed != 0 {
            return Err(io::Error::from_raw_os_error(failed));
        }
        Ok(Termination { set })
    }
}

impl Termination {
    /// Waits for one of the signals; its name.
    pub fn wait(&self) -> &'static str {
        loop {
            let mut signal: libc::c_int = 0;
            // SAFETY: `self.set` was initialised by `block_termination`; `signal` is a
            // valid out pointer for the duration of the call.
            let failed = unsafe { libc::sigwait(&raw const self.set, &raw mut signal) };
            if failed == 0 {
                return if signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
            }
        }
    }
}

/// Sends SIGTERM to this process: ends a [`Termination::wait`] of another thread, for a
/// worker thread that stopped by itself (a command's work failed) while the main thread
/// waits for a signal.
pub fn terminate_self() {
    // SAFETY: `kill` with this process's own id and a valid signal number only queues the
    // signal; SIGTERM is blocked in every thread and taken by `sigwait`.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGTERM);
    }
}
