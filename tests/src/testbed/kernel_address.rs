//! The kernel's address for Fairway's 10.77.0.1 (and fd77::1 on a testbed
//! with IPv6) on the testbed's `fw0`,
//! for the kernel-stack servers Fairway is compared with (the kernel
//! backend, nginx). `fw0` must not have it while Fairway serves there (the
//! kernel would answer for Fairway), so it lives only as long as a
//! [`KernelAddress`].
//!
//! The server namespace also reaches the switch through the TAP path
//! (`tapup`/`brtap`), and by default Linux answers ARP for any of its
//! addresses on any interface: clients could then reach the kernel's
//! server around a [`server_link`](super::TestbedConfig::server_link)
//! bottleneck (uploads measured 1.8 Gbit/s "through" a 20 Mbit/s link). So
//! the namespace answers ARP only on the interface that has the address
//! (`arp_ignore = 1`), which changes nothing for Fairway, to which the
//! kernel there has no address to answer for.

use std::io;

use super::{SERVER_IF, Testbed, exec};

/// The address on `fw0` (and on a testbed with IPv6, fd77::1 too),
/// removed when dropped.
#[derive(Debug)]
pub struct KernelAddress {
    ns: String,
    address: String,
    /// The IPv6 address, on a testbed with IPv6.
    address6: Option<String>,
}

impl KernelAddress {
    /// Gives `fw0` in `tb`'s server namespace the server's address, and
    /// makes the namespace answer ARP for it on `fw0` only.
    ///
    /// # Errors
    ///
    /// When `sysctl` or `ip addr add` fails.
    pub fn add(tb: &Testbed) -> io::Result<KernelAddress> {
        let address = tb.server_prefix();
        let address6 = tb.config().ipv6.then(|| tb.server_prefix6());
        let mut added = KernelAddress { ns: tb.server_ns(), address, address6: None };
        added.run(&["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"])?;
        added.ip("add")?;
        if let Some(address6) = address6 {
            // IPv6 on fw0 only while the kernel serves there: its own
            // link-local address, from fw0's MAC, is Fairway's too.
            added.run(&["sysctl", "-qw", &format!("net.ipv6.conf.{SERVER_IF}.disable_ipv6=0")])?;
            added.run(&["ip", "-6", "addr", "add", &address6, "dev", SERVER_IF, "nodad"])?;
            added.address6 = Some(address6);
        }
        Ok(added)
    }

    fn ip(&self, verb: &str) -> io::Result<()> {
        self.run(&["ip", "addr", verb, &self.address, "dev", SERVER_IF])
    }

    fn run(&self, cmd: &[&str]) -> io::Result<()> {
        let out = exec(&self.ns, cmd).map_err(io::Error::other)?;
        if out.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("{}: {}", cmd.join(" "), out.stderr_text().trim())))
        }
    }
}

impl Drop for KernelAddress {
    fn drop(&mut self) {
        if let Err(e) = self.ip("del") {
            eprintln!("testbed: {e}");
        }
        if self.address6.take().is_some() {
            // Off again, its addresses with it.
            if let Err(e) = self.run(&["sysctl", "-qw", &format!("net.ipv6.conf.{SERVER_IF}.disable_ipv6=1")]) {
                eprintln!("testbed: {e}");
            }
        }
    }
}
