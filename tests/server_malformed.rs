//! Proves what a served store does with bad input: garbage, invalid UTF-8, a JSON value that
//! is not an object, an unknown `op`, a read without `task` and a refused event each get one
//! error reply and the connection goes on; a first line that is not a hello, or a hello of an
//! unknown version, is answered and disconnected; a line over `SERVER_LINE_BYTES_MAX` is
//! answered `LIMIT_EXCEEDED` and disconnected, while another connection is not affected.

use crate::common;

use common::server::{Conn, Served, store_dir};
use factlog::limits::SERVER_LINE_BYTES_MAX;
use serde_json::json;

#[test]
fn malformed_lines_get_error_replies_and_the_connection_goes_on() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    conn.hello();
    let bad: [&[u8]; 6] = [
        b"not json\n",
        b"\xff\xfe\x00garbage\n",
        b"[1,2,3]\n",
        b"{\"id\":1,\"op\":\"frobnicate\",\"task\":\"t\"}\n",
        b"{\"id\":2,\"op\":\"state\"}\n",
        b"{\"id\":3,\"task\":\"t\",\"type\":\"no/such\"}\n",
    ];
    for line in bad {
        conn.send_raw(line);
        let reply = conn.read().expect("a reply");
        assert_eq!(reply["error"], "INVALID_EVENT", "{reply}");
    }
    // Blank lines get no reply; the next request is answered in order.
    conn.send_raw(b"\n   \n");
    let reply = conn.call(&json!({"id": 4, "task": "t", "type": "user/message", "text": "ok"}));
    assert_eq!((reply["id"].clone(), reply["revision"].clone()), (json!(4), json!(1)), "{reply}");
}

#[test]
fn a_bad_hello_is_answered_and_disconnected() {
    let (_temp, dir) = store_dir();
    let _served = Served::start(&dir, &[]);
    let mut conn = Conn::connect(&dir).expect("connect");
    let reply = conn.call(&json!({"task": "t", "type": "user/message", "text": "no hello"}));
    assert_eq!(reply["error"], "HELLO_REQUIRED", "{reply}");
    assert!(conn.read().is_none());
    let mut conn = Conn::connect(&dir).expect("connect");
    let reply = conn.call(&json!({"hello": "factlog", "version": 99}));
    assert_eq!(reply["error"], "UNSUPPORTED_VERSION", "{reply}");
    assert_eq!(reply["supported"], json!([1]));
    assert!(conn.read().is_none());
}

#[test]
fn an_over_long_line_is_refused_and_disconnected_and_others_go_on() {
    let (_temp, dir) = store_dir();
    let served = Served::start(&dir, &[]);
    let mut other = Conn::connect(&dir).expect("connect");
    other.hello();
    let mut long = Conn::connect(&dir).expect("connect");
    long.hello();
    let mut writer = long.stream.try_clone().expect("clone");
    // Written from a thread: the server stops reading at the limit and answers.
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = vec![b'x'; 64 * 1024];
        let mut sent = 0;
        while sent <= SERVER_LINE_BYTES_MAX {
            if writer.write_all(&chunk).is_err() {
                return;
            }
            sent += chunk.len();
        }
        let _ = writer.write_all(b"\n");
    });
    let reply = long.read().expect("a reply");
    assert_eq!(reply["error"], "LIMIT_EXCEEDED", "{reply}");
    assert!(long.read().is_none(), "disconnected after the reply");
    drop(long);
    sender.join().expect("sender");
    let reply = other.call(&json!({"id": 1, "task": "t", "type": "user/message", "text": "ok"}));
    assert_eq!(reply["revision"], 1, "{reply}");
    drop(other);
    let (code, stderr) = served.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("over the limit"), "{stderr}");
}
