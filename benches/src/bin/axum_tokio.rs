//! `axum_tokio --listen ADDR [--threads N]`: the axum example's router
//! (server/examples/axum_app.rs, this very file included) served by
//! `axum::serve` on tokio's multi-thread runtime with N worker threads:
//! the `http` benchmark's axum/tokio, what the example on Fairway is
//! compared with. Prints nothing unless something fails; SIGTERM or
//! SIGINT stop it gracefully (answers in flight finish, idle connections
//! close) and it exits 0.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use axum::serve::ListenerExt;
use tokio::signal::unix::{Signal, SignalKind, signal};

#[path = "../../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

const USAGE: &str = "\
usage: axum_tokio --listen ADDR [--threads N]

Serves the axum example's router (server/examples/axum_app.rs) with
axum::serve on a tokio multi-thread runtime of N worker threads (default:
one per core) at ADDR, with TCP_NODELAY on every connection as Fairway
sets it. Prints nothing unless something fails; SIGTERM or SIGINT stop it
gracefully.";

/// The command line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Args {
    listen: SocketAddr,
    threads: usize,
}

/// Parses the arguments after the program name. `Err("")` asks for the
/// help.
fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut listen = None;
    let mut threads = std::thread::available_parallelism().map_or(1, usize::from);
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                listen = Some(v.parse::<SocketAddr>().map_err(|e| format!("--listen {v}: {e}"))?);
            }
            "--threads" => {
                let v = value()?;
                threads = match v.parse::<usize>() {
                    Ok(0) => return Err("--threads must be at least 1".into()),
                    Ok(n) => n,
                    Err(e) => return Err(format!("--threads {v}: {e}")),
                };
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args { listen: listen.ok_or("--listen ADDR is required")?, threads })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("axum_tokio: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(args.threads).enable_all().build();
    let served = runtime.and_then(|runtime| runtime.block_on(serve(args.listen)));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Serves until SIGTERM or SIGINT.
async fn serve(addr: SocketAddr) -> io::Result<()> {
    // Before serving: a server that could not be stopped cleanly is not
    // started.
    let stop = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    let listener = listener.tap_io(|stream| {
        // Small answers go out at once, as on Fairway's kernel backend; a
        // socket that refuses is served as it is.
        let _ = stream.set_nodelay(true);
    });
    let app = axum_app::app(axum_app::AppState::default());
    axum::serve(listener, app).with_graceful_shutdown(stopped(stop)).await
}

/// Returns when either signal arrives.
async fn stopped((mut terminate, mut interrupt): (Signal, Signal)) {
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn arguments() {
        let a = parse_strs(&["--listen", "10.77.0.1:8082", "--threads", "2"]).unwrap();
        assert_eq!(a, Args { listen: "10.77.0.1:8082".parse().unwrap(), threads: 2 });
        assert!(parse_strs(&["--listen", "127.0.0.1:0"]).unwrap().threads >= 1);
        assert_eq!(parse_strs(&["--help"]), Err(String::new()));
        assert!(parse_strs(&[]).unwrap_err().contains("--listen"));
        assert!(parse_strs(&["--listen", "nowhere"]).unwrap_err().starts_with("--listen nowhere"));
        assert!(parse_strs(&["--listen", "127.0.0.1:0", "--threads", "0"]).is_err());
        assert!(parse_strs(&["--nope"]).unwrap_err().contains("--nope"));
        assert!(USAGE.lines().all(|l| l.chars().count() <= 80));
    }
}
