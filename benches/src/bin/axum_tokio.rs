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
use clap::Parser;
use fairway_benches::cli::at_least_one;
use tokio::signal::unix::{Signal, SignalKind, signal};

#[path = "../../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

/// What `--help` says before the options.
const LONG_ABOUT: &str = "\
Serves the axum example's router (server/examples/axum_app.rs) with
axum::serve on a tokio multi-thread runtime of N worker threads (default:
one per core) at ADDR, with TCP_NODELAY on every connection as Fairway
sets it. Prints nothing unless something fails; SIGTERM or SIGINT stop it
gracefully.";

// The option docs are verbatim, as clap here does not wrap help text: each
// first line is a phrase for `-h`, the rest is for `--help`, which indents
// them by 10 columns, so they are at most 70.
/// The axum example's router by axum::serve on tokio's multi-thread runtime.
#[derive(Parser, Debug, PartialEq, Eq)]
#[command(name = "axum_tokio", long_about = LONG_ABOUT)]
// As the hand-written parser did: a repeated option takes its last value,
// and `-1` is a value (which the option then refuses), not an unknown flag.
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Cli {
    /// The address to serve at, e.g. 10.77.0.1:8082
    #[arg(long, value_name = "ADDR", verbatim_doc_comment)]
    listen: SocketAddr,
    /// Worker threads (default: one per core)
    // The default is hidden, as it is this machine's core count.
    #[arg(long, value_name = "N", value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    #[arg(default_value_t = one_per_core(), hide_default_value = true)]
    threads: usize,
}

/// `--threads` by default: as many as the cores this process may run on.
fn one_per_core() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn main() -> ExitCode {
    // A bad command line exits with status 2, -h and --help with 0.
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cli.threads).enable_all().build();
    let served = runtime.and_then(|runtime| runtime.block_on(serve(cli.listen)));
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

    use clap::CommandFactory;
    use fairway_benches::cli::{checked_help, refusal, shows_help};

    /// `axum_tokio ARGS` as `main` reads it.
    fn parse_strs(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("axum_tokio").chain(args.iter().copied()))
    }

    #[test]
    fn arguments() {
        let a = parse_strs(&["--listen", "10.77.0.1:8082", "--threads", "2"]).unwrap();
        assert_eq!(a, Cli { listen: "10.77.0.1:8082".parse().unwrap(), threads: 2 });
        assert!(parse_strs(&["--listen", "127.0.0.1:0"]).unwrap().threads >= 1);
        assert_eq!(parse_strs(&["--listen", "127.0.0.1:0"]).unwrap().threads, one_per_core());
        for help in ["--help", "-h"] {
            assert!(shows_help(parse_strs(&[help])), "{help}");
        }
        let error = |args: &[&str]| refusal(parse_strs(args));
        // Where clap words an error its own way, the fragment is clap's:
        // "--listen nowhere: ..." and "unknown argument" were the
        // hand-written parser's.
        assert!(error(&[]).contains("--listen <ADDR>"));
        assert!(error(&["--listen", "nowhere"]).contains("invalid value 'nowhere' for '--listen <ADDR>'"));
        assert!(error(&["--listen", "127.0.0.1:0", "--threads", "0"]).contains("at least 1"));
        assert!(error(&["--nope"]).contains("unexpected argument '--nope'"));
    }

    #[test]
    fn the_help_names_every_option_and_fits_80_columns() {
        let _ = checked_help(Cli::command(), &["--listen", "--threads"]);
    }
}
