//! Every bound of the engine in one place, each with its value and its reason.
//!
//! Format limits (`FRAME_*`, `SEGMENT_HEADER_BYTES`, `BATCH_RECORDS_MAX`) are part of on-disk
//! format v1 (`format-spec/record.md`, `format-spec/segment.md`) and can only change with a new
//! format version. The others are defaults and bounds of [`crate::Options`].

/// Bytes of the segment header at offset 0 of every segment file (`format-spec/segment.md`).
pub const SEGMENT_HEADER_BYTES: usize = 64;

/// Bytes of a frame header (`format-spec/record.md`).
pub const FRAME_HEADER_BYTES: usize = 24;

/// Frames start at multiples of this many bytes, so a scan for frames after damage only has to
/// try one offset in eight.
pub const FRAME_ALIGN_BYTES: usize = 8;

/// The largest payload one frame may carry. A length field above it is invalid, so a damaged
/// length can never make a reader allocate or map more than this.
pub const FRAME_PAYLOAD_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The most records one batch frame may hold: the `count` field is a `u16`.
pub const BATCH_RECORDS_MAX: usize = u16::MAX as usize;

/// Bytes of the length prefix of each entry inside a batch payload.
pub const BATCH_ENTRY_HEADER_BYTES: usize = 4;

/// The `durable_lag` value meaning "this frame makes no durability claim".
pub const DURABLE_LAG_NONE: u32 = u32::MAX;

/// Default capacity of one segment file: large enough that rolls are rare, small enough that
/// the one segment recovery scans at open is read in milliseconds.
pub const SEGMENT_BYTES_DEFAULT: u64 = 32 * 1024 * 1024;

/// Smallest segment capacity accepted: a header and a few frames, used by tests that roll often.
pub const SEGMENT_BYTES_MIN: u64 = 8 * 1024;

/// Largest segment capacity accepted: bounds the preallocation and the scan at open.
pub const SEGMENT_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Segment capacities must be a multiple of this, so that zeroing and preallocation work in
/// whole file-system blocks.
pub const SEGMENT_BYTES_ALIGN: u64 = 4096;

/// Default size of the writer's append buffer. A buffered burst up to this size costs one
/// `write`.
pub const BUFFER_BYTES_DEFAULT: usize = 1024 * 1024;

/// Smallest append buffer accepted.
pub const BUFFER_BYTES_MIN: usize = 4096;

/// Largest append buffer accepted: two of them are allocated, up front.
pub const BUFFER_BYTES_MAX: usize = 64 * 1024 * 1024;

/// The background flusher is woken early once the buffer holds this fraction (1/N) of its
/// capacity, so a burst is written while appenders keep filling the other buffer.
pub const BUFFER_FLUSH_FRACTION: usize = 4;

/// Default longest time a `Buffered` record waits before the flusher writes and syncs it.
pub const FLUSH_DELAY_US_DEFAULT: u64 = 5_000;

/// Default longest time between two updates of the log mark while records are being synced
/// (`format-spec/mark.md`, "When the mark is written"): damage to records synced within this
/// window before a crash, with no later frame to witness it, reads as a torn tail. An update
/// is one small write and `fdatasync` of `MARK` by the background flusher, off the append path.
pub const MARK_INTERVAL_US_DEFAULT: u64 = 100_000;

/// Longest accepted mark interval: beyond this, the bound the mark gives would be stale.
pub const MARK_INTERVAL_US_MAX: u64 = 60_000_000;

/// Longest accepted flush delay: beyond this, "buffered" would silently mean "rarely durable".
pub const FLUSH_DELAY_US_MAX: u64 = 10_000_000;

/// Longest a group-commit leader waits for other threads already inside a `Synced` append to
/// encode their records before it writes out and syncs: well below one `fdatasync` (0.2-0.6 ms
/// on the machines we measure), so it adds little latency and lets one sync cover them all.
pub const GROUP_COMMIT_WAIT_US_MAX: u64 = 100;

/// The least free space the preallocator leaves on a file system after reserving a segment,
/// whatever its size: a preallocated segment only saves the append path some block
/// allocations, and taking the last free space of a disk shared with other programs (and
/// with this store's own snapshots) would turn that optimisation into an outage. The margin
/// is also at least one segment and [`PREALLOC_FREE_PERCENT_MIN`] of the file system
/// ([`prealloc_free_bytes_min`]).
pub const PREALLOC_FREE_BYTES_MIN: u64 = 64 * 1024 * 1024;

/// The least free space, in percent of the file system's size, the preallocator leaves: on
/// a large disk 64 MiB is too thin a margin for the programs that share it.
pub const PREALLOC_FREE_PERCENT_MIN: u64 = 2;

/// The free space the preallocator must leave after reserving a segment of `segment_bytes`
/// on a file system of `total_bytes`: at least one more segment, [`PREALLOC_FREE_BYTES_MIN`]
/// and [`PREALLOC_FREE_PERCENT_MIN`] percent of the file system. With less, it creates the
/// next segment empty and appends grow it.
#[must_use]
pub const fn prealloc_free_bytes_min(segment_bytes: u64, total_bytes: u64) -> u64 {
    let percent = total_bytes / 100 * PREALLOC_FREE_PERCENT_MIN;
    let mut margin = PREALLOC_FREE_BYTES_MIN;
    if segment_bytes > margin {
        margin = segment_bytes;
    }
    if percent > margin {
        margin = percent;
    }
    margin
}

/// Preallocation, growth and zeroing write zeros in chunks of this size, from one static
/// block of zeros (no allocation), and open reads the zero tail of the active segment back in
/// chunks of this size instead of mapping it.
pub const ZERO_CHUNK_BYTES: usize = 64 * 1024;

/// Readers map segments a window of this size at a time (or one frame, if larger), so that a
/// scan of a whole log keeps about one window resident instead of every page it has read.
pub const READ_WINDOW_BYTES: usize = 1024 * 1024;

/// A reader records a segment's frame start at most once per this many bytes
/// (`engine::seeks`), so that a read from a seq deep in a segment checks at most this many
/// bytes of frames before it.
pub const SEEK_STRIDE_BYTES: usize = 64 * 1024;

/// The first growth step of a segment file, and the size of the `prealloc.tmp` a roll turns
/// into the next segment: a new log occupies about two of them. Small enough that a store
/// holding a few events stays small, large enough that a session's first burst of appends
/// does not wait for the growth thread ([`growth_step_bytes_first`]).
pub const GROWTH_STEP_BYTES_FIRST: u64 = 1024 * 1024;

/// The largest growth step: bounds the zeros a segment holds ahead of its last frame (what a
/// store pays for but does not use), the zeros open reads back, and the work of one step of
/// the growth thread. A writer fast enough to need more only has its steps requested sooner.
pub const GROWTH_STEP_BYTES_MAX: u64 = 8 * 1024 * 1024;

/// A growth step requested this long or longer after the previous one finished is the first
/// step again, so a store that went idle stops reserving large steps. (A step doubles, up to
/// the largest, when the writer caught up with the previous one: it got halfway through what
/// was left before that step was done, or had to wait for it.)
pub const GROWTH_IDLE_MS: u64 = 1_000;

/// The first growth step of a segment of capacity `segment_bytes`: [`GROWTH_STEP_BYTES_FIRST`]
/// or a sixteenth of the segment, whichever is smaller, but at least one
/// [`SEGMENT_BYTES_ALIGN`] block and never more than the segment. A segment of at most
/// [`GROWTH_WHOLE_SEGMENT_BYTES_MAX`] is prepared whole: growing it in steps would cost more
/// syncs than it saves space.
#[must_use]
pub const fn growth_step_bytes_first(segment_bytes: u64) -> u64 {
    if segment_bytes <= GROWTH_WHOLE_SEGMENT_BYTES_MAX {
        return segment_bytes;
    }
    let mut step = segment_bytes / 16;
    if step > GROWTH_STEP_BYTES_FIRST {
        step = GROWTH_STEP_BYTES_FIRST;
    }
    step - step % SEGMENT_BYTES_ALIGN
}

/// The largest growth step of a segment of capacity `segment_bytes`: [`GROWTH_STEP_BYTES_MAX`]
/// or a quarter of the segment, whichever is smaller, and at least the first step.
#[must_use]
pub const fn growth_step_bytes_max(segment_bytes: u64) -> u64 {
    let first = growth_step_bytes_first(segment_bytes);
    let mut step = segment_bytes / 4;
    if step > GROWTH_STEP_BYTES_MAX {
        step = GROWTH_STEP_BYTES_MAX;
    }
    step -= step % SEGMENT_BYTES_ALIGN;
    if step < first { first } else { step }
}

/// Segments of at most this capacity are preallocated whole, as one step.
pub const GROWTH_WHOLE_SEGMENT_BYTES_MAX: u64 = 64 * 1024;

/// Bytes of the event envelope before the task id (`format-spec/events.md`, "Envelope").
pub const EVENT_ENVELOPE_BYTES: usize = 24;

/// Longest task id, in bytes of UTF-8. Task ids are repeated in every event envelope, so they
/// are meant to be short handles, not descriptions.
pub const TASK_ID_BYTES_MAX: usize = 128;

/// Longest `kind` of a `record/put` or `record/removed`, in bytes: a short name of an
/// adapter's record type (`langgraph/checkpoint`), like a task id.
pub const RECORD_KIND_BYTES_MAX: usize = 128;

/// Most sequence numbers one `record/removed` names: a removal of more is a `through_seq`, or
/// several events.
pub const RECORD_REMOVED_SEQS_MAX: usize = 4096;

/// Longest text of one `assistant/delta`: a streamed fragment is a few tokens; the bound keeps
/// one runaway fragment out of the hot path.
pub const DELTA_TEXT_BYTES_MAX: usize = 64 * 1024;

/// Largest JSON body of one event. Larger payloads (whole documents, tool outputs of many
/// megabytes) belong in the tool's own storage, referenced from the receipt.
pub const EVENT_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Most events in one typed batch.
pub const EVENT_BATCH_MAX: usize = 1024;

/// Extra attempts at a busy directory lock before a writer open reports `Locked`: a lock
/// released a moment ago can still be held by a child process forked in that moment (its copy
/// of the descriptor holds the `flock` until it execs), so 20 attempts 5 ms apart wait out a
/// fork-to-exec window while a lock that is really held is reported within about 100 ms.
pub const LOCK_RETRIES: u32 = 20;

/// The pause between two attempts at a busy directory lock, in milliseconds.
pub const LOCK_RETRY_MS: u64 = 5;

/// Bytes of call decisions one `recovery/restored` event records, at most: a quarter of the
/// body limit, so that a task that left any number of calls open can always be restored. The
/// recovery report lists every call; the event lists them in order up to this budget.
pub const RESTORED_CALLS_BYTES_MAX: usize = EVENT_BODY_BYTES_MAX / 4;

/// Call ids a task may have dispatched without a result at any point among its events after
/// the snapshot, for [`crate::Store::recover`] still to prove from the envelopes read at open
/// that the task needs no repair. A task with more is folded and planned as usual: this bounds
/// the memory of that proof at open (a few kilobytes a task at most), never what recovery
/// does.
pub const RECOVERY_SCAN_OPEN_CALLS_MAX: usize = 64;

/// The bytes one call decision costs in a `recovery/restored` body besides its call id: the
/// field names, the longest outcome and plan names and the JSON punctuation, rounded up.
pub const RESTORED_CALL_OVERHEAD_BYTES: usize = 64;

/// Largest body of a replica part (`format-spec/replication.md`, "Shipping"), unless the part
/// is one frame: what a replicator holds in memory at most besides one snapshot file.
pub const REPLICA_PART_BYTES_MAX: usize = 8 * 1024 * 1024;

/// How long a replicator waits before it retries after a failed round, at first; the wait
/// doubles with every failure up to [`REPLICA_BACKOFF_MAX`].
pub const REPLICA_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(100);

/// The longest wait of a replicator between failed rounds.
pub const REPLICA_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a replicator runs a round when nothing says the store grew (`--interval-ms`).
pub const REPLICA_INTERVAL_DEFAULT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a `Replicated` append waits for the replica by default before it fails (the
/// event stays written and synced in the store).
pub const REPLICATED_WAIT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(30);

/// How often `factlog replicate` looks whether the store's files grew.
pub const REPLICA_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Bytes of the snapshot file header (`format-spec/snapshot.md`).
pub const SNAPSHOT_HEADER_BYTES: usize = 64;

/// Largest decompressed snapshot body accepted: a damaged length field can never make open
/// allocate more than this.
pub const SNAPSHOT_BODY_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Snapshot files kept after a new one is written, the newest included, so that a damaged
/// newest snapshot can fall back to an older one before full replay.
pub const SNAPSHOTS_KEPT: usize = 3;

/// Default policy: a snapshot once this many bytes of events were appended since the last one.
pub const SNAPSHOT_EVERY_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;

/// Default policy: a snapshot once this many events were appended since the last one.
pub const SNAPSHOT_EVERY_EVENTS_DEFAULT: u64 = 1_000_000;

/// The most gaps one gap file (`GAPS`, written by `factlog salvage`) may declare. The file is
/// read whole at every open, so this bounds it to about 1 MiB; a salvage that would declare more
/// refuses with `LimitExceeded` rather than write a log that every open must wade through.
pub const GAPS_MAX: usize = 65_536;

/// Most clients a served store (`format-spec/server.md`) serves at once: a client beyond this
/// is answered `SERVER_BUSY` and disconnected.
pub const SERVER_CLIENTS_MAX: usize = 128;

/// Most event loops of a served store (`format-spec/server.md`, "One event loop"): one a
/// processor core, up to this many; each serves its share of the connections on one thread.
pub const SERVER_EVENT_LOOPS_MAX: usize = 4;

/// How long a client of a served store checks its socket for an awaited reply, giving the
/// processor up between checks, before it sleeps until the reply wakes it: a reply that waits
/// for no sync comes within tens of microseconds, and sleeping for it costs a sleep and a
/// wake-up (on a virtual machine, of an idle core). The processor time it costs is at most
/// this per awaited reply, and only while nothing else is ready to run on that core
/// (`docs/performance.md`, "Looking for a reply before sleeping for it").
pub const CLIENT_REPLY_SPIN_US: u64 = 50;

/// Bytes of `assistant/delta` request lines a client of a served store buffers before it
/// sends them and reads their replies (`Client::delta`): its memory for pipelined fragments
/// is this and one line, and the replies it has not read stay within the server's reply
/// buffer and the socket's, so neither side waits for the other.
pub const CLIENT_DELTA_BUFFER_BYTES: usize = 32 * 1024;

/// Longest request line a served store reads, newline included: the same cap as `factlog
/// emit`'s (a body of [`EVENT_BODY_BYTES_MAX`] spelled with escapes). A longer line is
/// answered `LIMIT_EXCEEDED` and the client is disconnected (its stream cannot be resynced
/// without reading the rest).
pub const SERVER_LINE_BYTES_MAX: usize = 4 * EVENT_BODY_BYTES_MAX;

/// Longest hello line (the first line of a connection).
pub const SERVER_HELLO_BYTES_MAX: usize = 4096;

/// Bytes of replies a served store buffers for one client before it writes them out: it
/// writes them whenever the client's input holds no further complete line, and at this size.
pub const SERVER_REPLY_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes of a client's input the server reads ahead (besides the line being read).
pub const SERVER_INPUT_BUFFER_BYTES: usize = 64 * 1024;

/// Capacity of the line buffer a served store's connection keeps from one request line to the
/// next: the buffer of a longer line is freed once the line is answered.
pub const SERVER_LINE_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes one connection of a served store may spend on one request without drawing on the
/// shared [`SERVER_REQUEST_BYTES_SHARED`]: its line buffer, the JSON tree the line is parsed
/// into and what running it copies, as estimated before it is parsed
/// (`format-spec/server.md`, "Memory"). Four times [`SERVER_LINE_BUFFER_BYTES`], so a line
/// that fits the kept buffer and takes the fast path of a bare fragment never touches the
/// shared budget (no atomic operation on the hot path).
pub const SERVER_REQUEST_BYTES_PER_CLIENT: usize = 4 * SERVER_LINE_BUFFER_BYTES;

/// Bytes that all connections of a served store together may spend on requests beyond their
/// own [`SERVER_REQUEST_BYTES_PER_CLIENT`], while those requests are read, parsed and run.
/// A request that would take more than is left is refused `LIMIT_EXCEEDED` (the connection
/// goes on; sent again once others are answered, it runs), so 128 clients sending 16 MiB lines
/// cannot take more than this and their own allowances. Room for four requests of the
/// longest line ([`SERVER_LINE_BYTES_MAX`], about 64 MiB each) at once.
pub const SERVER_REQUEST_BYTES_SHARED: usize = 256 * 1024 * 1024;

/// The most heap bytes, allocator overhead included, that parsing one JSON value costs beyond
/// its strings' bytes, charged per structural character (`[`, `{`, `,`, `:`) of a request
/// line before it is parsed: an array of one value is a vector of four 72-byte values (304
/// bytes with glibc's chunk header), and a growing array holds its old and new storage for a
/// moment (`tests/server_parse_bound.rs` measures the worst shapes). So a 16 MiB line of
/// `[0],[0],..` (about 1.5 GiB as a tree) is refused before it is parsed.
pub const SERVER_PARSE_BYTES_PER_TOKEN: usize = 320;

/// When the shared request budget falls back to nothing after having held at least this
/// many bytes, the server hands the heap's free memory back to the operating system
/// (`malloc_trim` with glibc): the allocator would otherwise keep the pages of long lines
/// that were answered long ago.
pub const SERVER_HEAP_TRIM_BYTES_MIN: usize = 4 * 1024 * 1024;

/// Default longest time a served store waits for a client to take a reply (its socket buffer
/// full: the client stopped reading) before it disconnects the client, in milliseconds.
pub const SERVER_WRITE_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// Default longest time a new connection of a served store may take to send its hello line, in
/// milliseconds: a client sends it at once, so a connection silent this long holds a slot for
/// nothing and is closed (connections that never say hello cannot lock others out).
pub const SERVER_HELLO_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// Default longest time a served store waits for a client's next request line, in
/// milliseconds: an idle connection is closed after it (its tasks are handed over, as when it
/// leaves). A harness that idles longer between requests reconnects.
pub const SERVER_IDLE_TIMEOUT_MS_DEFAULT: u64 = 30 * 60 * 1000;

/// When a served store admits other users (`--allow-group`), one user holds at most this
/// fraction (numerator over [`SERVER_SLOTS_SHARE_DENOMINATOR`]) of its client slots, so one
/// local user cannot take every slot from another admitted one.
pub const SERVER_SLOTS_SHARE_NUMERATOR: usize = 3;

/// See [`SERVER_SLOTS_SHARE_NUMERATOR`].
pub const SERVER_SLOTS_SHARE_DENOMINATOR: usize = 4;

/// Most distinct tasks one client connection may touch: the server remembers each until the
/// client leaves, to hand them over then (`format-spec/server.md`, "Holders").
pub const SERVER_TASKS_PER_CLIENT_MAX: usize = 65_536;

/// Most events one `events` reply of a served store holds (a client asks for the next page
/// from its `next_seq`).
pub const SERVER_EVENTS_PER_REPLY_MAX: usize = 1000;

/// Bytes of events or history entries after which a served store ends a page (the reply
/// then holds at least one item, whatever its size): a reply stays well below
/// [`SERVER_LINE_BYTES_MAX`] and a client's memory.
pub const SERVER_REPLY_PAGE_BYTES: usize = 1024 * 1024;

/// Longest a served store's `follow` request waits for an event (`timeout_ms`, also its
/// default), in milliseconds; a larger `timeout_ms` is refused. A waiting connection runs no
/// other request, and a client that goes away while it waits is noticed only when the wait
/// ends (its tasks are handed over then), so the wait is bounded; a client that wants to wait
/// longer asks again.
pub const SERVER_FOLLOW_TIMEOUT_MS_MAX: u64 = 30_000;

/// Most tasks one list request of the console returns (`factlog ui`, `/api/tasks`): a page, so
/// that a store of many thousand tasks never goes to a browser whole.
pub const CONSOLE_LIST_TASKS_MAX: usize = 500;

/// Most events of one page of a task's events in the console (`/api/tasks/T/events`).
pub const CONSOLE_PAGE_EVENTS_MAX: usize = 1_000;

/// Most records one page of the console looks at when it reads the store's files: a task whose
/// events are sparse among other tasks' is read over several pages instead of one long scan.
pub const CONSOLE_PAGE_RECORDS_SCANNED_MAX: usize = 100_000;

/// Record bytes of the events one page of a task's timeline read from the files holds at most
/// (a page ends after the event that takes it past this; a page always holds its first
/// event): a thousand events of up to 4 MiB each would otherwise be gigabytes in one reply.
/// Through a served store a page is one reply of the server's, bounded by
/// [`SERVER_REPLY_PAGE_BYTES`].
pub const CONSOLE_PAGE_BYTES_MAX: usize = 8 << 20;

/// Most events of one live update of the console's reader.
pub const CONSOLE_UPDATE_EVENTS_MAX: usize = 2_000;

/// The JSON bytes after which a live update of the console takes no further event.
pub const CONSOLE_UPDATE_BYTES_MAX: usize = 1 << 20;

/// Live updates the console keeps for pages that have not read them yet; a page further
/// behind is told to read again instead of being buffered for.
pub const CONSOLE_UPDATES_QUEUED_MAX: usize = 64;

/// Most live streams (open pages) of one console at once.
pub const CONSOLE_LIVE_STREAMS_MAX: usize = 64;

/// Most task ids one `changed` message of the console names (more: the page reads its list
/// again).
pub const CONSOLE_CHANGED_TASKS_MAX: usize = 200;

/// Longest operator name, and longest note, an answer given in the console takes, in bytes.
pub const CONSOLE_OPERATOR_TEXT_BYTES_MAX: usize = 4_096;

/// Chunks of a task's export the console reads ahead of a slow download.
pub const CONSOLE_EXPORT_CHUNKS_QUEUED_MAX: usize = 4;

const _: () = assert!(CONSOLE_PAGE_EVENTS_MAX <= CONSOLE_PAGE_RECORDS_SCANNED_MAX);
const _: () = assert!(CONSOLE_UPDATE_EVENTS_MAX > 0 && CONSOLE_UPDATES_QUEUED_MAX > 0);
const _: () = assert!(CONSOLE_LIST_TASKS_MAX > 0 && CONSOLE_LIVE_STREAMS_MAX > 0);
const _: () = assert!(SEGMENT_HEADER_BYTES.is_multiple_of(FRAME_ALIGN_BYTES));
const _: () = assert!(FRAME_HEADER_BYTES.is_multiple_of(FRAME_ALIGN_BYTES));
const _: () = assert!(SEGMENT_BYTES_MIN.is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(SEGMENT_BYTES_DEFAULT.is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(SEGMENT_BYTES_MIN >= (SEGMENT_HEADER_BYTES + 4 * FRAME_HEADER_BYTES) as u64);
const _: () = assert!(FRAME_PAYLOAD_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(BUFFER_BYTES_DEFAULT >= BUFFER_BYTES_MIN);
const _: () = assert!(BUFFER_BYTES_DEFAULT <= BUFFER_BYTES_MAX);
const _: () = assert!((ZERO_CHUNK_BYTES as u64).is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(GROWTH_STEP_BYTES_FIRST.is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(GROWTH_STEP_BYTES_MAX.is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(GROWTH_STEP_BYTES_FIRST <= GROWTH_STEP_BYTES_MAX);
const _: () = assert!(GROWTH_WHOLE_SEGMENT_BYTES_MAX.is_multiple_of(SEGMENT_BYTES_ALIGN));
const _: () = assert!(growth_step_bytes_first(SEGMENT_BYTES_DEFAULT) == GROWTH_STEP_BYTES_FIRST);
const _: () = assert!(growth_step_bytes_max(SEGMENT_BYTES_DEFAULT) == GROWTH_STEP_BYTES_MAX);
const _: () = assert!(growth_step_bytes_first(SEGMENT_BYTES_MIN) == SEGMENT_BYTES_MIN);
const _: () = assert!(growth_step_bytes_first(128 * 1024) == 8 * 1024);
const _: () = assert!(growth_step_bytes_max(128 * 1024) == 32 * 1024);
const _: () = assert!(
    EVENT_ENVELOPE_BYTES + TASK_ID_BYTES_MAX + DELTA_TEXT_BYTES_MAX < FRAME_PAYLOAD_BYTES_MAX
);
const _: () = assert!(EVENT_BODY_BYTES_MAX < FRAME_PAYLOAD_BYTES_MAX);
const _: () = assert!(EVENT_BATCH_MAX <= BATCH_RECORDS_MAX);
const _: () = assert!(PREALLOC_FREE_PERCENT_MIN < 50);
const _: () = assert!(SERVER_LINE_BUFFER_BYTES >= SERVER_HELLO_BYTES_MAX);
const _: () = assert!(SERVER_REQUEST_BYTES_PER_CLIENT >= 4 * SERVER_LINE_BUFFER_BYTES);
// The longest line holding one long string (its buffer, its tree and what running it copies:
// four times its bytes) fits the shared budget with room for three more.
const _: () = assert!(4 * (4 * SERVER_LINE_BYTES_MAX) <= SERVER_REQUEST_BYTES_SHARED);
const _: () = assert!(prealloc_free_bytes_min(SEGMENT_BYTES_MAX, 0) == SEGMENT_BYTES_MAX);
