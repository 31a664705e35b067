//! `cargo xtask bench loopback`: one bulk transfer between two Fairway shards
//! and the same transfer between two smoltcp sockets, both over an in-memory
//! link on one core, alternated in one run. Prints the medians and ends with
//! `loopback: fairway X Gbit/s, smoltcp Y Gbit/s, ratio R` (the first MTU and
//! the first API given).

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use fairway_benches::smoltcp_loopback::{Api, LoopbackConfig, LoopbackResult};
use fairway_benches::stats::median;
use fairway_benches::{fairway_loopback, smoltcp_loopback};

/// Moves --bytes from a client to a server over an in-memory link, once with
/// Fairway and once with smoltcp per round, alternating which goes first, at
/// each IP MTU and with each application API given. Checksums are computed
/// and verified by both stacks, and every byte is checked.
#[derive(Parser)]
#[command(name = "loopback")]
struct Args {
    /// Bytes per transfer.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: usize,
    /// Rounds per MTU and API (each runs both stacks once).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// IP MTUs, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1500, 9000])]
    mtu: Vec<usize>,
    /// Each socket's send and receive buffer, bytes.
    #[arg(long, default_value_t = 256 * 1024)]
    buffer: usize,
    /// The most each application write or read moves, bytes.
    #[arg(long, default_value_t = 64 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    chunk: u32,
    /// How the applications write and read, comma-separated: `in-place`
    /// (into the stacks' rings: Fairway's send_with/recv_with, smoltcp's
    /// send/recv closures) or `copy` (through a buffer of their own: send and
    /// recv, send_slice and recv_slice).
    #[arg(long, value_delimiter = ',', default_values_t = [ApiArg::InPlace, ApiArg::Copy])]
    api: Vec<ApiArg>,
    /// Then Fairway over IPv6 beside Fairway over IPv4, alternating, at each
    /// MTU and API, ending with `loopback ipv6: ... ratio R (ipv6/ipv4)`.
    #[arg(long)]
    ipv6: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum ApiArg {
    InPlace,
    Copy,
}

impl std::fmt::Display for ApiArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(Api::from(*self).name())
    }
}

impl From<ApiArg> for Api {
    fn from(a: ApiArg) -> Api {
        match a {
            ApiArg::InPlace => Api::InPlace,
            ApiArg::Copy => Api::Copy,
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    println!(
        "in-memory loopback, {} MiB per transfer, {} rounds, {} KiB buffers, {} KiB chunks, one core",
        args.bytes >> 20,
        args.rounds,
        args.buffer >> 10,
        args.chunk >> 10
    );
    println!(
        "{:>6} {:>9} {:>7} {:>16} {:>16} {:>8} {:>14} {:>14}",
        "mtu", "api", "round", "fairway Gbit/s", "smoltcp Gbit/s", "ratio", "fairway frames", "smoltcp frames"
    );
    let mut summary = Vec::new();
    for &mtu in &args.mtu {
        for &api in &args.api {
            let api = Api::from(api);
            let config = args.config(mtu, api);
            let (mut f, mut s) = (Vec::new(), Vec::new());
            for round in 0..args.rounds {
                let (fr, sr) = alternate(round, || fairway_loopback::run(&config), || smoltcp_loopback::run(&config));
                println!(
                    "{:>6} {:>9} {:>7} {:>16.2} {:>16.2} {:>8.2} {:>14} {:>14}",
                    mtu,
                    api.name(),
                    round + 1,
                    fr.gbit_per_s(),
                    sr.gbit_per_s(),
                    fr.gbit_per_s() / sr.gbit_per_s(),
                    fr.frames,
                    sr.frames
                );
                f.push(fr.gbit_per_s());
                s.push(sr.gbit_per_s());
            }
            let (fm, sm) = (median(f), median(s));
            println!("{:>6} {:>9} {:>7} {:>16.2} {:>16.2} {:>8.2}", mtu, api.name(), "median", fm, sm, fm / sm);
            summary.push((mtu, api, fm, sm));
        }
    }
    for &(mtu, api, fm, sm) in summary.iter().skip(1) {
        println!("mtu {mtu} {}: fairway {fm:.2} Gbit/s, smoltcp {sm:.2} Gbit/s, ratio {:.2}", api.name(), fm / sm);
    }
    let Some(&(mtu, api, fm, sm)) = summary.first() else {
        eprintln!("loopback: --mtu and --api need at least one value each");
        return ExitCode::from(2);
    };
    println!(
        "loopback: fairway {fm:.2} Gbit/s, smoltcp {sm:.2} Gbit/s, ratio {:.2} (MTU {mtu}, {} API)",
        fm / sm,
        api.name()
    );
    if args.ipv6 {
        families(&args);
    }
    ExitCode::SUCCESS
}

impl Args {
    /// One cell's transfer.
    fn config(&self, mtu: usize, api: Api) -> LoopbackConfig {
        LoopbackConfig { total_bytes: self.bytes, mtu, socket_buffer: self.buffer, chunk: self.chunk as usize, api }
    }
}

/// Runs `a` and `b` once each, `a` first in even rounds and `b` in odd
/// ones, so neither always runs on a warm cache.
fn alternate(
    round: u32,
    a: impl FnOnce() -> LoopbackResult,
    b: impl FnOnce() -> LoopbackResult,
) -> (LoopbackResult, LoopbackResult) {
    if round.is_multiple_of(2) {
        let a = a();
        (a, b())
    } else {
        let b = b();
        (a(), b)
    }
}

/// Fairway over IPv6 beside Fairway over IPv4, alternating which goes first.
fn families(args: &Args) {
    println!("{:>6} {:>9} {:>7} {:>16} {:>16} {:>8}", "mtu", "api", "round", "ipv4 Gbit/s", "ipv6 Gbit/s", "ratio");
    let mut summary = Vec::new();
    for &mtu in &args.mtu {
        for &api in &args.api {
            let api = Api::from(api);
            let config = args.config(mtu, api);
            let (mut v4, mut v6) = (Vec::new(), Vec::new());
            for round in 0..args.rounds {
                let (a, b) =
                    alternate(round, || fairway_loopback::run(&config), || fairway_loopback::run_ipv6(&config));
                let (a, b) = (a.gbit_per_s(), b.gbit_per_s());
                println!("{:>6} {:>9} {:>7} {:>16.2} {:>16.2} {:>8.2}", mtu, api.name(), round + 1, a, b, b / a);
                v4.push(a);
                v6.push(b);
            }
            let (a, b) = (median(v4), median(v6));
            println!("{:>6} {:>9} {:>7} {:>16.2} {:>16.2} {:>8.2}", mtu, api.name(), "median", a, b, b / a);
            summary.push((mtu, api, a, b));
        }
    }
    for &(mtu, api, a, b) in &summary {
        println!(
            "loopback ipv6: fairway over IPv6 {b:.2} Gbit/s, over IPv4 {a:.2} Gbit/s, ratio {:.2} (MTU {mtu}, {} API)",
            b / a,
            api.name()
        );
    }
}
