//! [`HttpApp`]: the HTTP server on one shard of the userspace stack: the
//! [host](crate::host) over the shard, running the [HTTP
//! service](crate::http::HttpService), with the stack's own window control
//! ([`WindowControl`]) when `--fairness` asks for it.
//!
//! What the host does for it (slots, one timer wheel for every deadline,
//! lingering close, the connection limit, draining on the stop flag) is
//! the kernel backend's too; only the transport differs.
//!
//! # Shutting down
//!
//! When the stop flag is raised the app takes the connections already
//! established, stops listening (new connections are refused by the
//! stack), closes every connection between requests at once, and lets the
//! others finish what they started: each is closed as soon as it is idle
//! again. The app is finished when its last connection is gone and the
//! stack has delivered what was queued (every connection closed or in
//! TIME-WAIT), or when the grace period ends: then what is left is reset.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fairway_stack::Shard;

use super::fairness::WindowControl;
use crate::backend::connection_limit::ConnectionLimit;
use crate::host::Host;
use crate::host::wake::WakeQueue;
use crate::http::{HttpConfig, HttpService};
use crate::site::ShardSite;

/// The HTTP server on one shard: the host over the shard with the built-in
/// endpoints and the stack's window control.
pub type HttpApp = Host<Shard, HttpService, WindowControl>;

impl Host<Shard, HttpService, WindowControl> {
    /// The server on the shard whose site is `site`: HTTP as `http` says,
    /// connections counted against `limit`, shutting down gracefully within
    /// `grace` once `stop` is raised. It listens on port 80. Wakes from
    /// other threads wait for the loop's next turn (see
    /// [`Host::with_service`] for a notified queue).
    #[must_use]
    pub fn new(
        site: ShardSite,
        http: HttpConfig,
        limit: Arc<ConnectionLimit>,
        stop: Arc<AtomicBool>,
        grace: Duration,
    ) -> HttpApp {
        Host::with_service(HttpService::new(http), site, limit, stop, grace, WakeQueue::new(None))
    }
}
