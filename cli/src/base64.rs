//! Standard base64 (RFC 4648 section 4, with `=` padding) encoding, for `dump --json`.
//!
//! Only the encoder is needed: the CLI never reads base64 back. Small enough that a dependency
//! would cost more than it saves.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes` as standard base64 with padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b0 = chunk.first().copied().unwrap_or(0);
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let group = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        // A chunk of n bytes carries 8n bits, which need n + 1 base64 digits.
        let digits = chunk.len() + 1;
        for index in 0..4 {
            if index < digits {
                let sextet = (group >> (18 - 6 * index)) & 0x3f;
                out.push(char::from(ALPHABET[sextet as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn rfc_4648_test_vectors() {
        // RFC 4648 section 10.
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            assert_eq!(encode(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn every_byte_value_and_the_last_alphabet_entries() {
        assert_eq!(encode(&[0xff, 0xfe, 0xfd]), "//79");
        assert_eq!(encode(&[0xfb, 0xef, 0xbe]), "++++");
        assert_eq!(encode(&[0x00]), "AA==");
        let all: Vec<u8> = (0..=255).collect();
        let encoded = encode(&all);
        assert_eq!(encoded.len(), 344);
        assert!(encoded.starts_with("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g"));
        assert!(encoded.ends_with("/P3+/w=="));
    }
}
