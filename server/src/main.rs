//! `fairway`: the server binary.
//!
//! The per-core runtime over AF_XDP, the HTTP/1.1 application and the kernel
//! backend are the next pieces of work; until they land this binary says so
//! instead of pretending to serve. The protocol engine it will drive
//! (`fairway-stack`) and the simulated network (`fairway-nic::sim`) are in
//! place: `cargo xtask sim` runs scenarios on them, and `cargo xtask run`
//! runs the simulated demo.

use std::process::ExitCode;

const HELP: &str = "\
fairway: a userspace TCP/IP server over AF_XDP (work in progress)

The AF_XDP runtime and the HTTP application are not built yet. What exists:
  cargo xtask run                 the simulated-network demo
  cargo xtask sim --list          scenarios on the deterministic simulated network
  cargo xtask bench loopback      Fairway vs smoltcp, in-memory loopback throughput";

fn main() -> ExitCode {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    if let Err(e) = fairway_server::logging::init(&filter) {
        eprintln!("fairway: {e}");
        return ExitCode::from(2);
    }
    let arg = std::env::args().nth(1);
    println!("{HELP}");
    match arg.as_deref() {
        None | Some("-h") | Some("--help") => ExitCode::SUCCESS,
        Some(other) => {
            eprintln!("fairway: '{other}': nothing to run yet (see above)");
            ExitCode::from(2)
        }
    }
}
