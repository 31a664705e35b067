//! `cargo xtask bench loopback`: one bulk transfer between two Fairway shards
//! and the same transfer between two smoltcp sockets, both over an in-memory
//! link on one core, alternated in one run. Prints the medians and ends with
//! `loopback: fairway X Gbit/s, smoltcp Y Gbit/s, ratio R`.

use std::process::ExitCode;

use fairway_benches::smoltcp_loopback::{LoopbackConfig, LoopbackResult};
use fairway_benches::stats::median;
use fairway_benches::{fairway_loopback, smoltcp_loopback};

const USAGE: &str = "\
usage: loopback [--bytes N] [--rounds N] [--mtu N[,N...]] [--buffer N] [--chunk N]

Moves --bytes (default 1073741824) from a client to a server over an in-memory
link, once with Fairway and once with smoltcp per round, alternating, for
--rounds rounds (default 5), at each IP MTU in --mtu (default 1500,9000).
--buffer sets each socket's buffers (default 262144), --chunk the size of
application writes and reads (default 65536). Prints per-MTU medians; the last
line compares the first MTU.";

struct Args {
    bytes: usize,
    rounds: usize,
    mtus: Vec<usize>,
    buffer: usize,
    chunk: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { bytes: 1 << 30, rounds: 5, mtus: vec![1500, 9000], buffer: 256 * 1024, chunk: 64 * 1024 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |s: String| s.parse::<usize>().map_err(|e| format!("{s}: {e}"));
        match flag.as_str() {
            "--bytes" => a.bytes = num(value()?)?,
            "--rounds" => a.rounds = num(value()?)?.max(1),
            "--mtu" => a.mtus = value()?.split(',').map(|s| num(s.to_string())).collect::<Result<_, _>>()?,
            "--buffer" => a.buffer = num(value()?)?,
            "--chunk" => a.chunk = num(value()?)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.mtus.is_empty() {
        return Err("--mtu needs at least one value".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("loopback: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) };
        }
    };
    println!(
        "in-memory loopback, {} MiB per transfer, {} rounds, {} KiB buffers, {} KiB chunks, one core",
        args.bytes >> 20,
        args.rounds,
        args.buffer >> 10,
        args.chunk >> 10
    );
    println!(
        "{:>6} {:>10} {:>16} {:>16} {:>8} {:>14} {:>14}",
        "mtu", "round", "fairway Gbit/s", "smoltcp Gbit/s", "ratio", "fairway frames", "smoltcp frames"
    );
    let mut summary = Vec::new();
    for &mtu in &args.mtus {
        let config = LoopbackConfig { total_bytes: args.bytes, mtu, socket_buffer: args.buffer, chunk: args.chunk };
        let (mut f, mut s) = (Vec::new(), Vec::new());
        for round in 0..args.rounds {
            // Alternate which goes first so neither always runs on a warm cache.
            let (fr, sr): (LoopbackResult, LoopbackResult) = if round % 2 == 0 {
                let fr = fairway_loopback::run(&config);
                (fr, smoltcp_loopback::run(&config))
            } else {
                let sr = smoltcp_loopback::run(&config);
                (fairway_loopback::run(&config), sr)
            };
            println!(
                "{:>6} {:>10} {:>16.2} {:>16.2} {:>8.2} {:>14} {:>14}",
                mtu,
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
        println!("{:>6} {:>10} {:>16.2} {:>16.2} {:>8.2}", mtu, "median", fm, sm, fm / sm);
        summary.push((mtu, fm, sm));
    }
    for &(mtu, fm, sm) in summary.iter().skip(1) {
        println!("mtu {mtu}: fairway {fm:.2} Gbit/s, smoltcp {sm:.2} Gbit/s, ratio {:.2}", fm / sm);
    }
    let (_, fm, sm) = summary[0];
    println!("loopback: fairway {fm:.2} Gbit/s, smoltcp {sm:.2} Gbit/s, ratio {:.2}", fm / sm);
    ExitCode::SUCCESS
}
