//! An ordinary axum application on Fairway, unchanged: tower-http's
//! middleware around the router, and handlers that use tokio as they would
//! on `#[tokio::main]` — timers, `tokio::spawn`, `spawn_local`,
//! `spawn_blocking`, a `tokio::net` client of another service, and
//! `tokio::sync`. Every shard runs a tokio runtime of its own, so all of it
//! runs on the core that owns the connection.
//!
//! ```sh
//! cargo run --release --example axum_tower               # kernel sockets, 127.0.0.1:8080
//! curl http://127.0.0.1:8080/sleep/250                   # tokio::time::sleep
//! curl -i http://127.0.0.1:8080/too-slow                 # TimeoutLayer: 408 after two seconds
//! curl http://127.0.0.1:8080/spawned                     # tokio::spawn, then awaited
//! curl http://127.0.0.1:8080/blocking                    # spawn_blocking
//! curl http://127.0.0.1:8080/upstream                    # a tokio::net client of an echo service
//! curl -i http://127.0.0.1:8080/panic                    # CatchPanicLayer: 500
//! curl -N http://127.0.0.1:8080/ticks/5                  # tokio::time::interval, streamed
//! curl -H 'accept-encoding: gzip' -o /dev/null -w '%{size_download}\n' http://127.0.0.1:8080/big
//! ```
//!
//! It takes the `fairway` binary's flags (`--backend afxdp --iface fw0
//! --ip 10.77.0.1/24` on the testbed, see the axum_app example).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use fairway::Builder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;
use tower_http::cors::CorsLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// How long a request may take before `TimeoutLayer` answers 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// What every shard's router shares.
#[derive(Clone)]
pub struct TowerState {
    /// The service `/upstream` talks to (a line echo), over `tokio::net`.
    pub upstream: SocketAddr,
    /// A count kept across shards behind tokio's async mutex.
    pub counter: Arc<tokio::sync::Mutex<u64>>,
}

impl TowerState {
    /// State whose `/upstream` reaches `upstream`.
    #[must_use]
    pub fn new(upstream: SocketAddr) -> TowerState {
        TowerState { upstream, counter: Arc::default() }
    }
}

async fn sleep(Path(ms): Path<u64>) -> Result<String, StatusCode> {
    if ms > 10_000 {
        return Err(StatusCode::BAD_REQUEST);
    }
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(format!("slept {} ms\n", start.elapsed().as_millis()))
}

/// Longer than [`REQUEST_TIMEOUT`]: the middleware answers first.
async fn too_slow() -> &'static str {
    tokio::time::sleep(REQUEST_TIMEOUT * 4).await;
    "too late\n"
}

/// Work on a task of its own (`tokio::spawn`: it runs on this shard's
/// runtime), its result awaited through the join handle.
async fn spawned() -> Result<String, StatusCode> {
    let task = tokio::spawn(async {
        tokio::task::yield_now().await;
        (1..=10u64).product::<u64>()
    });
    let product = task.await.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    Ok(format!("10! = {product}\n"))
}

/// A `!Send` task (it holds an `Rc`): `spawn_local` on the shard's
/// `LocalSet`, answering through a oneshot channel.
async fn local() -> Result<String, StatusCode> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::task::spawn_local(async move {
        let shared = Rc::new(String::from("from a local task"));
        tokio::task::yield_now().await;
        let _ = tx.send(format!("{} ({} refs)\n", shared, Rc::strong_count(&shared)));
    });
    rx.await.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)
}

/// CPU work off the shard: `spawn_blocking` runs it on the runtime's
/// blocking pool, and the shard goes on serving meanwhile.
async fn blocking() -> Result<String, StatusCode> {
    let sum = tokio::task::spawn_blocking(|| (0..2_000_000u64).fold(0u64, |a, x| a.wrapping_add(x * x)))
        .await
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    Ok(format!("sum of squares below 2000000: {sum}\n"))
}

/// `n` ticks of `tokio::time::interval`, 10 ms apart (the first at
/// once), streamed as they come.
async fn ticks(Path(n): Path<u32>) -> Result<Body, StatusCode> {
    if n > 100 {
        return Err(StatusCode::BAD_REQUEST);
    }
    let interval = tokio::time::interval(Duration::from_millis(10));
    let lines = futures_util::stream::unfold((interval, 0), move |(mut interval, i)| async move {
        if i == n {
            return None;
        }
        interval.tick().await;
        Some((Ok::<_, std::convert::Infallible>(format!("tick {}\n", i + 1)), (interval, i + 1)))
    });
    Ok(Body::from_stream(lines))
}

/// One line to the upstream service and its answer back, over a
/// `tokio::net::TcpStream` (a kernel socket, as a database client's is).
async fn upstream(State(state): State<TowerState>) -> Result<String, (StatusCode, String)> {
    let failed = |e: std::io::Error| (StatusCode::BAD_GATEWAY, format!("upstream {}: {e}\n", state.upstream));
    let mut conn = tokio::net::TcpStream::connect(state.upstream).await.map_err(failed)?;
    conn.write_all(b"ping from a handler\n").await.map_err(failed)?;
    let mut reply = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut reply))
        .await
        .map_err(|_| (StatusCode::GATEWAY_TIMEOUT, "upstream timed out\n".to_owned()))?
        .map_err(failed)?;
    Ok(format!("upstream said: {}", String::from_utf8_lossy(&reply[..n])))
}

/// tokio's async mutex, shared by every shard.
async fn count(State(state): State<TowerState>) -> String {
    let mut n = state.counter.lock().await;
    *n += 1;
    format!("{n}\n")
}

async fn panics() -> &'static str {
    panic!("a handler bug")
}

/// 64 KiB of text: what `CompressionLayer` shrinks for clients that ask.
async fn big() -> String {
    "all work and no play makes a dull server\n".repeat(1600)
}

/// The application, one per shard. The routes added after the middleware
/// (`/panic-raw`) have none: a panic there costs its connection, as it
/// would on tokio.
pub fn app(state: TowerState) -> Router {
    Router::new()
        .route("/sleep/{ms}", get(sleep))
        .route("/too-slow", get(too_slow))
        .route("/spawned", get(spawned))
        .route("/local", get(local))
        .route("/blocking", get(blocking))
        .route("/ticks/{n}", get(ticks))
        .route("/upstream", get(upstream))
        .route("/count", get(count))
        .route("/panic", get(panics))
        .route("/big", get(big))
        .layer(CompressionLayer::new())
        .layer(CorsLayer::permissive())
        .layer(CatchPanicLayer::new())
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
        .layer(TraceLayer::new_for_http())
        .route("/panic-raw", get(panics))
        .route("/healthz", get(|| async { "ok\n".into_response() }))
        .with_state(state)
}

/// A line echo on `127.0.0.1` (a port of its own), on a thread of its
/// own: the other service the example's `/upstream` talks to.
///
/// # Errors
///
/// The port cannot be bound.
pub fn echo_service() -> std::io::Result<SocketAddr> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    let addr = listener.local_addr()?;
    std::thread::Builder::new().name("echo".into()).spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    })?;
    Ok(addr)
}

fn main() {
    let builder = Builder::from_args().unwrap_or_else(|e| e.exit());
    if let Err(e) = fairway::logging::init(&builder.configuration().log) {
        eprintln!("axum_tower: {e}");
        std::process::exit(2);
    }
    let state = match echo_service() {
        Ok(upstream) => TowerState::new(upstream),
        Err(e) => {
            eprintln!("axum_tower: cannot start the echo service: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = builder.axum(move || app(state.clone())).run() {
        eprintln!("axum_tower: {e}");
        std::process::exit(1);
    }
}
