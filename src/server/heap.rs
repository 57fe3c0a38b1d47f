//! The server's two calls into the C allocator, so that the memory of long requests goes back
//! to the operating system once they are answered (`format-spec/server.md`, "Memory").
//!
//! glibc's allocator keeps freed memory for later allocations. By default a block of 128 KiB
//! or more is a memory map of its own, returned when freed, but the first such block freed
//! raises that threshold to its size (up to 32 MiB) and the free space a thread's arena keeps
//! at its top to twice that: after one 16 MiB line, every later line buffer and parsed string
//! of up to 16 MiB lives in an arena, and up to 32 MiB per arena stays resident when they are
//! freed (3.0 GB resident, 1.3 GB of it kept after the clients left, with 64 connection
//! threads). [`return_large_blocks`] fixes both thresholds at glibc's defaults for the process
//! when a server starts, and [`trim`] returns the whole free pages inside arenas when the
//! server's request budget falls back to nothing after a large use
//! ([`super::lines::RequestBudget`]), never on the path of a short line.

/// Allocations of at least this many bytes are memory maps of their own, unmapped when freed:
/// glibc's default, kept fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD_BYTES: i32 = 128 * 1024;

/// An arena gives back the free space at its top beyond this many bytes: glibc's default, kept
/// fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD_BYTES: i32 = 128 * 1024;

/// Fixes glibc's mmap and trim thresholds for the whole process (glibc; nothing elsewhere):
/// large blocks freed are then returned at once instead of raising the thresholds. Once per
/// process; the cost is a memory map for each allocation of 128 KiB or more and a trim of an
/// arena whose top holds 128 KiB free, as glibc does before its first large free.
pub(super) fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            #[expect(unsafe_code, reason = "mallopt is a C function, declared unsafe by libc")]
            // SAFETY: `mallopt` takes two integers and no pointer; glibc applies it under the
            // main arena's lock, so it may be called while other threads allocate, and both
            // values are in the range glibc documents (any non-negative size).
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
                libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
            }
        });
    }
}

/// Returns the whole free pages of every arena to the operating system (glibc; nothing
/// elsewhere).
pub(super) fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[expect(unsafe_code, reason = "malloc_trim is a C function, declared unsafe by libc")]
        // SAFETY: `malloc_trim` takes no pointer and has no precondition: it may be called from
        // any thread at any time (glibc takes each arena's lock while it trims that arena), and
        // it only releases pages that no allocation uses.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
