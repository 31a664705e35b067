//! The kernel's address for Fairway's 10.77.0.1 on the testbed's `fw0`,
//! for the kernel-stack servers a benchmark compares Fairway with. `fw0`
//! must not have it while Fairway serves there (the kernel would answer
//! for Fairway), so it lives only as long as a [`KernelAddress`].

use std::io;

use fairway_tests::testbed::{self, SERVER_IF, Testbed};

/// The address on `fw0`, removed when dropped.
#[derive(Debug)]
pub struct KernelAddress {
    ns: String,
    address: String,
}

impl KernelAddress {
    /// Gives `fw0` in `tb`'s server namespace the server's address.
    ///
    /// # Errors
    ///
    /// When `ip addr add` fails.
    pub fn add(tb: &Testbed) -> io::Result<KernelAddress> {
        let address = format!("{}/{}", tb.server_ip(), tb.prefix_len());
        let added = KernelAddress { ns: tb.server_ns(), address };
        added.ip("add")?;
        Ok(added)
    }

    fn ip(&self, verb: &str) -> io::Result<()> {
        let out = testbed::exec(&self.ns, &["ip", "addr", verb, &self.address, "dev", SERVER_IF])
            .map_err(io::Error::other)?;
        if out.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("ip addr {verb} {} dev {SERVER_IF}: {}", self.address, out.stderr_text())))
        }
    }
}

impl Drop for KernelAddress {
    fn drop(&mut self) {
        if let Err(e) = self.ip("del") {
            eprintln!("benches: {e}");
        }
    }
}
