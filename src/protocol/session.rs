//! The session of a served store's socket (`format-spec/server.md`): the hello that opens a
//! connection, the key naming a read or batch operation, and the codes only a server answers.
//! The server and the client both take these names from here; the operations themselves are
//! [`super::Op`].

/// The server protocol version (`format-spec/server.md`, "Hello"): what a client's hello
/// must name. The request lines inside it are protocol version
/// [`super::PROTOCOL_VERSION`].
pub const SERVER_PROTOCOL_VERSION: u32 = 1;

/// The key of a read (or batch) request naming the operation, whose values are the names of
/// [`super::Op`] (`Op::NAMES`); a line with `type` is an append, whatever else it holds.
pub const KEY_OP: &str = "op";
/// The key of the hello line naming the protocol (`"factlog"`).
pub const KEY_HELLO: &str = "hello";
/// The key of the hello line holding the server protocol version.
pub const KEY_VERSION: &str = "version";

/// The key of the hello line asking for a connection's acknowledgements (`"every"`, the
/// default, or `"durable-only"`: [`super::acks::AckMode`]); the server's hello says it back.
pub const KEY_ACKS: &str = "acks";

/// The key of the server's hello offering fragments lines (`true`; `format-spec/server.md`,
/// "Fragments lines"): a client sends a task's consecutive fragments in one line only to a
/// server whose hello has it (a server of an earlier release would refuse the line).
pub const KEY_TEXTS: &str = "texts";

/// The error code of a first line that is not a hello.
pub const CODE_HELLO_REQUIRED: &str = "HELLO_REQUIRED";
/// The error code of a hello asking for a server protocol version this server does not speak.
pub const CODE_UNSUPPORTED_VERSION: &str = "UNSUPPORTED_VERSION";

/// The error code of a peer whose credentials are refused.
pub const CODE_PERMISSION_DENIED: &str = "PERMISSION_DENIED";
/// The error code of a connection beyond `ServeOptions::clients_max` (`crate::server`).
pub const CODE_SERVER_BUSY: &str = "SERVER_BUSY";
