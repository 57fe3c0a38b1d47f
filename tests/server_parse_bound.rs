//! Proves that `factlog::server::lines::parse_bytes_max`, the cost a served store charges a
//! request line before it parses it (`format-spec/server.md`, "Memory"), is an upper bound of
//! what parsing it takes: for lines of about 1 MiB shaped to make the JSON tree as large as
//! possible (two-byte values, one-element arrays and objects, distinct keys, nesting 100
//! deep, short strings, a batch of events), a counting global allocator measures the peak of
//! the heap while `protocol::request::parse_object` parses the line, each allocation counted
//! as the chunk glibc gives it (16-byte aligned, with its 8-byte header, at least 32 bytes).
//! Bytes, never time. One test in this binary, so no other test's allocations are counted.

#![expect(unsafe_code, reason = "a global allocator that counts heap bytes")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use factlog::protocol::request::parse_object;
use factlog::server::lines::parse_bytes_max;

struct Counting;

static HEAP_BYTES: AtomicUsize = AtomicUsize::new(0);
static HEAP_BYTES_PEAK: AtomicUsize = AtomicUsize::new(0);

/// The bytes glibc's allocator takes for an allocation of `size`.
fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

fn allocated(size: usize) {
    let now = HEAP_BYTES.fetch_add(chunk(size), Ordering::Relaxed) + chunk(size);
    HEAP_BYTES_PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: the caller's contract of `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP_BYTES.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: the caller's contract of `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as a move: the old and the new block are both held while it copies.
        allocated(new_size);
        HEAP_BYTES.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: the caller's contract of `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LINE_BYTES: usize = 1024 * 1024;

/// `head`, then `item` separated by commas to about `LINE_BYTES`, then `tail`; named `name`.
fn repeated(name: &str, head: &str, item: &str, tail: &str) -> (String, Vec<u8>) {
    let mut line = head.as_bytes().to_vec();
    let mut first = true;
    while line.len() < LINE_BYTES {
        if !first {
            line.push(b',');
        }
        first = false;
        line.extend_from_slice(item.as_bytes());
    }
    line.extend_from_slice(tail.as_bytes());
    (name.to_owned(), line)
}

fn shapes() -> Vec<(String, Vec<u8>)> {
    let deep_array = format!("{}0{}", "[".repeat(100), "]".repeat(100));
    let deep_object = format!("{}0{}", "{\"a\":".repeat(100), "}".repeat(100));
    let mut keys = b"{".to_vec();
    let mut n = 0;
    while keys.len() < LINE_BYTES {
        keys.extend_from_slice(format!("\"{n:x}\":0,").as_bytes());
        n += 1;
    }
    keys.extend_from_slice(b"\"end\":0}");
    let mut escaped = br#"{"text":""#.to_vec();
    while escaped.len() < LINE_BYTES {
        escaped.extend_from_slice(br"\u0041\n");
    }
    escaped.extend_from_slice(b"\"}");
    vec![
        repeated("zeros", "[", "0", "]"),
        repeated("one-element arrays", "[", "[0]", "]"),
        repeated("empty arrays", "[", "[]", "]"),
        repeated("empty objects", "[", "{}", "]"),
        repeated("one-key objects", "[", "{\"a\":0}", "]"),
        repeated("one-byte strings", "[", "\"a\"", "]"),
        repeated("empty strings", "[", "\"\"", "]"),
        repeated("floats", "[", "-1.5e300", "]"),
        repeated("nulls", "[", "null", "]"),
        repeated("arrays 5 deep", "[", "[[[[0]]]]", "]"),
        repeated("arrays 100 deep", "[", &deep_array, "]"),
        repeated("objects 100 deep", "[", &deep_object, "]"),
        repeated(
            "a batch of messages",
            r#"{"op":"batch","task":"t","events":["#,
            r#"{"type":"user/message","text":"x"}"#,
            "]}",
        ),
        repeated(
            "a body of short strings",
            r#"{"task":"t","type":"user/message","text":"x","args":["#,
            "\"ab\"",
            "]}",
        ),
        ("distinct keys".to_owned(), keys),
        ("one escaped string".to_owned(), escaped),
    ]
}

#[test]
fn the_charge_before_parsing_bounds_what_parsing_takes() {
    for (name, line) in shapes() {
        let charged = parse_bytes_max(&line);
        let base = HEAP_BYTES.load(Ordering::Relaxed);
        HEAP_BYTES_PEAK.store(base, Ordering::Relaxed);
        let parsed = parse_object(&line);
        let peak = HEAP_BYTES_PEAK.load(Ordering::Relaxed) - base;
        drop(parsed);
        eprintln!(
            "{name}: {} bytes, peak {peak} bytes while parsed ({:.0} per line byte), charged \
             {charged}",
            line.len(),
            peak as f64 / line.len() as f64
        );
        assert!(peak <= charged, "{name}: parsing took {peak} bytes, {charged} were charged");
    }
}
