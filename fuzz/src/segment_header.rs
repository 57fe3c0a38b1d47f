//! Target `segment_header`: [`factlog::engine::segment::decode_header`] on arbitrary bytes. A header it
//! accepts must re-encode to exactly the first 64 bytes (a pair assertion); only those 64 bytes
//! may decide the outcome; anything it refuses is refused as corruption or as an unsupported
//! version, never as another kind of error.

use std::path::Path;

use factlog::ErrorKind;
use factlog::engine::segment;
use factlog::limits::SEGMENT_HEADER_BYTES;

/// The body of the target. Returns whether the bytes start with a valid header.
pub fn run(data: &[u8]) -> bool {
    let path = Path::new("/log/00000000000000000001.seg");
    let decoded = segment::decode_header(data, path);
    let head = &data[..data.len().min(SEGMENT_HEADER_BYTES)];
    let again = segment::decode_header(head, path);
    match (&decoded, &again) {
        (Ok(header), Ok(same)) => {
            assert_eq!(header, same, "only the first 64 bytes decide the header");
            assert_eq!(&header.encode()[..], head, "an accepted header re-encodes to its bytes");
            assert!(header.id.0 >= 1 && header.first_seq.0 >= 1);
            assert_eq!(header.salt_crc(), factlog::engine::frame::salt_crc(header.salt));
        }
        (Err(e), Err(same)) => {
            assert_eq!(e.to_string(), same.to_string(), "only the first 64 bytes decide");
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Corruption { offset: 0, .. } | ErrorKind::UnsupportedVersion { .. }
                ),
                "a bad header is corruption at offset 0 or an unsupported version: {e:?}"
            );
        }
        _ => panic!("the first 64 bytes decode differently alone: {decoded:?} / {again:?}"),
    }
    decoded.is_ok()
}
