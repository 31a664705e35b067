//! Applications that run on the stack through the server's runtime, for the
//! real-peer tests: a minimal HTTP responder kernel clients talk to, an
//! HTTP client that fetches from a kernel server, and a user's `Handler`
//! application for the platform tests.

pub mod fetcher;
pub mod handler_app;
pub mod responder;

/// A SHA-256 digest in lowercase hex, as `sha256sum` prints it.
#[must_use]
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
