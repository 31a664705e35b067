//! Applications that run on the stack through the server's runtime, for the
//! real-peer tests: the server's own HTTP layer on a bare shard, which
//! kernel clients talk to, an HTTP client that fetches from a kernel
//! server, and a user's `Handler` application for the platform tests.

pub mod fetcher;
pub mod handler_app;
pub mod http_shard;

/// What an application leaves when its shard's loop ends, for the test to
/// check. It is made on the shard's thread, so the application itself
/// need not be `Send` (the server's HTTP layer keeps its handlers there).
pub trait Leaves {
    /// What is left.
    type Left: Send + 'static;

    /// Takes what is left, on the shard's thread.
    fn leave(self) -> Self::Left;
}

/// A SHA-256 digest in lowercase hex, as `sha256sum` prints it.
#[must_use]
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
