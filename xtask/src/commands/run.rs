//! `cargo xtask run`: runs Fairway.
//!
//! The intended sequence is: install the Debian packages the server needs,
//! build the server (release, with AF_XDP), bring up the testbed (network
//! namespaces joined by veth pairs, bpffs for libxdp), start the server on it
//! and point a kernel client at it. The AF_XDP server does not exist yet, so
//! for now `run` only performs the first step and then runs the
//! simulated-network demo; the server and the testbed slot in here later.

use crate::cargo::Cargo;
use crate::cli::PassThrough;
use crate::commands::sim;
use crate::error::Failure;
use crate::system;

/// Debian packages `run` needs: none yet. The AF_XDP server will add
/// `clang llvm libelf-dev zlib1g-dev libpcap-dev m4 gcc-multilib pkg-config`
/// (what xsk-rs needs to build).
pub const PACKAGES: &[&str] = &[];

pub fn run(cargo: &Cargo, args: &PassThrough) -> Result<(), Failure> {
    system::ensure_debian_packages(PACKAGES)?;
    eprintln!("xtask run: the server is not built yet; running the simulated-network demo");
    let demo = sim::fairway_sim(cargo, &args.args);
    eprintln!("xtask run: $ {}", demo.display());
    demo.run()
}
