//! The console's access token: 32 random bytes from the system's generator, written as 64
//! hexadecimal digits, printed once in the URL the console starts with. Every API request
//! carries it (the `x-factlog-token` header, or the `token` query parameter where a browser
//! cannot set a header: an `EventSource`, a download link); every action carries it in the
//! header, which no cross-site form or link can set.

use std::fmt;
use std::io::Read;

/// The bytes of randomness in a token.
const TOKEN_BYTES: usize = 32;

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "x-factlog-token";

/// A console's token.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token read from `/dev/urandom`.
    ///
    /// # Errors
    ///
    /// When the system's random device cannot be read.
    pub fn generate() -> std::io::Result<Token> {
        let mut bytes = [0_u8; TOKEN_BYTES];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let mut text = String::with_capacity(TOKEN_BYTES * 2);
        for byte in bytes {
            text.push(char::from(HEX[usize::from(byte >> 4)]));
            text.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Ok(Token(text))
    }

    /// The token's text (64 hexadecimal digits).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token, compared in time that does not depend on where
    /// the first difference is.
    #[must_use]
    pub fn matches(&self, candidate: &str) -> bool {
        let expected = self.0.as_bytes();
        let given = candidate.as_bytes();
        if expected.len() != given.len() {
            return false;
        }
        expected.iter().zip(given).fold(0_u8, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a secret: never in a log line or a panic message.
        f.write_str("Token(..)")
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex_and_compared_whole() {
        let one = Token::generate().expect("token");
        let two = Token::generate().expect("token");
        assert_ne!(one, two);
        assert_eq!(one.as_str().len(), 64);
        assert!(one.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(one.matches(one.as_str()));
        assert!(!one.matches(two.as_str()));
        assert!(!one.matches(&one.as_str()[..63]));
        assert!(!one.matches(""));
        assert_eq!(format!("{one:?}"), "Token(..)");
    }
}
