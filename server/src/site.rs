//! What a shard's HTTP connections share: the cached `Date`, the static
//! files, and the shard's metrics. Both backends give every [`HttpConn`] of
//! a shard the same [`ShardSite`].
//!
//! [`HttpConn`]: crate::http::HttpConn

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::http::{DateCache, Site, StaticFiles};
use crate::metrics::{MetricsHub, ShardMetrics};
use crate::outbound::Outbound;

/// One shard's [`Site`]: owned by the shard's thread, never shared.
#[derive(Debug)]
pub struct ShardSite {
    date: DateCache,
    files: Option<StaticFiles>,
    metrics: ShardMetrics,
    hub: Arc<MetricsHub>,
    /// The sockets the shard opens itself (upstream connections), when it
    /// may open any.
    outbound: Option<Outbound>,
}

impl ShardSite {
    /// The site of shard `shard`, publishing into `hub`, serving files from
    /// `root` when there is one, and keeping the statistics of at most
    /// `max_flows` connections for `/metrics`.
    ///
    /// # Errors
    ///
    /// `root` cannot be opened as a directory.
    pub fn new(shard: u16, hub: Arc<MetricsHub>, root: Option<&Path>, max_flows: usize) -> io::Result<ShardSite> {
        let files = root.map(StaticFiles::new).transpose()?;
        Ok(ShardSite {
            date: DateCache::new(unix_secs()),
            files,
            metrics: ShardMetrics::new(shard, max_flows),
            hub,
            outbound: None,
        })
    }

    /// The same site, able to open outbound connections (the reverse
    /// proxy's): the shard's loop must also sleep on
    /// [`outbound_fd`](Self::outbound_fd).
    ///
    /// # Errors
    ///
    /// Their epoll cannot be made.
    pub fn with_outbound(mut self) -> io::Result<ShardSite> {
        self.outbound = Some(Outbound::new()?);
        Ok(self)
    }

    /// The same, whose host also opens links: an upstream beyond this host
    /// is reached through the shard's own stack ([`Outbound::with_links`]).
    ///
    /// # Errors
    ///
    /// Their epoll cannot be made.
    pub fn with_outbound_links(mut self) -> io::Result<ShardSite> {
        self.outbound = Some(Outbound::new()?.with_links());
        Ok(self)
    }

    /// The shard's outbound sockets and links, when it may open any.
    pub fn outbound_mut(&mut self) -> Option<&mut Outbound> {
        self.outbound.as_mut()
    }

    /// Whether a link has something for the host to do now.
    #[must_use]
    pub fn links_pending(&self) -> bool {
        self.outbound.as_ref().is_some_and(Outbound::link_work)
    }

    /// The descriptor of the outbound sockets' epoll, when there is one.
    #[must_use]
    pub fn outbound_fd(&self) -> Option<std::os::fd::RawFd> {
        self.outbound.as_ref().map(Outbound::fd)
    }

    /// Wakes the exchanges whose outbound sockets are ready; the host calls
    /// it once per turn, before it drives what was woken.
    pub fn dispatch_outbound(&mut self) {
        if let Some(outbound) = &mut self.outbound {
            outbound.dispatch();
        }
    }

    /// Moves the `Date` to the wall clock's second; cheap when the second
    /// has not changed, so a loop calls it every turn.
    pub fn tick(&mut self) {
        self.date.update(unix_secs());
    }

    /// The shard's metrics, for the backend to update (connections,
    /// packets, flows) and publish.
    pub fn metrics_mut(&mut self) -> &mut ShardMetrics {
        &mut self.metrics
    }

    /// The shard's metrics.
    #[must_use]
    pub fn metrics(&self) -> &ShardMetrics {
        &self.metrics
    }

    /// The hub every shard publishes into.
    #[must_use]
    pub fn hub(&self) -> &Arc<MetricsHub> {
        &self.hub
    }
}

impl Site for ShardSite {
    fn now_date(&self) -> &[u8] {
        self.date.as_bytes()
    }

    /// The shard answering the scrape publishes first, so it shows itself
    /// as of now; the others as of their last publication (≤ 1 s ago).
    fn metrics(&mut self, out: &mut Vec<u8>) {
        self.hub.publish(&self.metrics);
        self.hub.render(out);
    }

    fn files(&mut self) -> Option<&mut StaticFiles> {
        self.files.as_mut()
    }

    fn outbound(&mut self) -> Option<&mut Outbound> {
        self.outbound.as_mut()
    }

    fn proxy_counters(&mut self) -> Option<&mut crate::proxy::ProxyCounters> {
        Some(self.metrics.proxy_mut())
    }

    fn record(&mut self, status: u16, latency: Duration) {
        self.metrics.request();
        self.metrics.response(status, latency);
    }
}

/// Seconds since the Unix epoch by the wall clock (0 if it is before).
fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_count_requests_and_responses_and_a_scrape_shows_them_at_once() {
        let hub = Arc::new(MetricsHub::new(2, 4, "kernel"));
        let mut site = ShardSite::new(1, Arc::clone(&hub), None, 4).unwrap();
        site.record(200, Duration::from_micros(120));
        site.record(404, Duration::from_micros(80));
        assert_eq!((site.metrics().requests(), site.metrics().responses(200)), (2, 1));
        let mut out = Vec::new();
        Site::metrics(&mut site, &mut out);
        let text = String::from_utf8(out).unwrap();
        // Shard 1 never published on its own: the scrape did it.
        let line = text.lines().find(|l| l.starts_with("fairway_http_responses_total") && l.contains("\"404\""));
        assert!(line.is_some_and(|l| l.ends_with(" 1")), "{text}");
    }

    #[test]
    fn the_date_is_an_imf_fixdate_and_files_need_a_root() {
        let hub = Arc::new(MetricsHub::new(1, 0, "kernel"));
        let mut site = ShardSite::new(0, Arc::clone(&hub), None, 0).unwrap();
        site.tick();
        let date = std::str::from_utf8(site.now_date()).unwrap().to_owned();
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
        assert!(site.files().is_none());
        let missing = std::env::temp_dir().join(format!("fairway-no-such-root-{}", std::process::id()));
        assert!(ShardSite::new(0, hub, Some(&missing), 0).is_err());
    }
}
