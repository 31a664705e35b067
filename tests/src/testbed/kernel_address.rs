//! The kernel's address for Fairway's 10.77.0.1 on the testbed's `fw0`,
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

/// The address on `fw0`, removed when dropped.
#[derive(Debug)]
pub struct KernelAddress {
    ns: String,
    address: String,
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
        let added = KernelAddress { ns: tb.server_ns(), address };
        added.run(&["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"])?;
        added.ip("add")?;
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
    }
}
