//! An axum application on Fairway: hyper 1.x's server on each shard's
//! tokio runtime, one instance of the `Router` per core, on the userspace
//! stack or on kernel sockets, with the middleware most axum applications
//! have (tower-http's `TraceLayer` and `TimeoutLayer`). It is also what
//! `cargo xtask bench http` serves as axum on Fairway and, unchanged, on
//! tokio's own runtime.
//!
//! ```sh
//! cargo run --release --example axum_app                  # kernel sockets, 127.0.0.1:8080
//! curl http://127.0.0.1:8080/hello/fairway
//! curl -H 'content-type: application/json' -d '{"item":"tea","quantity":3}' http://127.0.0.1:8080/orders
//! curl http://127.0.0.1:8080/stats
//! curl -N http://127.0.0.1:8080/countdown/5
//! ```
//!
//! It takes the `fairway` binary's flags, so as root on the testbed it
//! serves over AF_XDP:
//!
//! ```sh
//! cargo build --release --features afxdp --example axum_app
//! sudo ip netns exec fw-srv target/release/examples/axum_app --backend afxdp --iface fw0 --ip 10.77.0.1/24
//! sudo ip netns exec fw-c0 curl http://10.77.0.1/hello/fairway
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use fairway::Builder;
use serde::{Deserialize, Serialize};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

/// What every shard's router shares: counters across cores.
#[derive(Clone, Default)]
pub struct AppState {
    greetings: Arc<AtomicU64>,
    orders: Arc<AtomicU64>,
}

async fn hello(Path(name): Path<String>, State(state): State<AppState>) -> String {
    let n = state.greetings.fetch_add(1, Ordering::Relaxed) + 1;
    format!("Hello, {name}! (greeting {n})\n")
}

#[derive(Deserialize)]
struct Order {
    item: String,
    quantity: u32,
}

#[derive(Serialize)]
struct Receipt {
    number: u64,
    item: String,
    quantity: u32,
    total_cents: u64,
}

/// JSON in, JSON out; a bad order is a 422.
async fn order(State(state): State<AppState>, Json(order): Json<Order>) -> impl IntoResponse {
    if order.quantity == 0 || order.item.is_empty() {
        return Err((StatusCode::UNPROCESSABLE_ENTITY, "an order needs an item and a quantity\n"));
    }
    let number = state.orders.fetch_add(1, Ordering::Relaxed) + 1;
    let total_cents = u64::from(order.quantity) * 250;
    Ok((StatusCode::CREATED, Json(Receipt { number, item: order.item, quantity: order.quantity, total_cents })))
}

#[derive(Serialize)]
struct Stats {
    greetings: u64,
    orders: u64,
}

async fn stats(State(state): State<AppState>) -> Json<Stats> {
    Json(Stats { greetings: state.greetings.load(Ordering::Relaxed), orders: state.orders.load(Ordering::Relaxed) })
}

/// N lines, 100 ms apart: a streamed (chunked) body, timed by
/// `tokio::time::sleep` on the shard's runtime.
async fn countdown(Path(from): Path<u32>) -> impl IntoResponse {
    if from > 100 {
        return Err((StatusCode::BAD_REQUEST, "at most 100\n"));
    }
    let lines = futures_util::stream::unfold(from, |n| async move {
        if n == 0 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let line = if n == 1 { "1... liftoff!\n".to_owned() } else { format!("{n}...\n") };
        Some((Ok::<_, std::convert::Infallible>(line), n - 1))
    });
    Ok(Body::from_stream(lines))
}

/// TechEmpower's plaintext, under a deadline as real handlers put on what
/// they await (one `tokio::time` call per request).
async fn plaintext() -> Result<&'static str, StatusCode> {
    tokio::time::timeout(Duration::from_secs(1), std::future::ready("Hello, World!"))
        .await
        .map_err(|_| StatusCode::GATEWAY_TIMEOUT)
}

/// How long a request may take to its response's head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The application: one per shard, sharing `state`. (Public, so the tests
/// serve this very application.)
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/plaintext", get(plaintext))
        .route("/hello/{name}", get(hello))
        .route("/orders", post(order))
        .route("/stats", get(stats))
        .route("/countdown/{from}", get(countdown))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

fn main() {
    // The `fairway` binary's flags: --backend, --listen, --iface, --ip, ...
    let builder = Builder::from_args().unwrap_or_else(|e| e.exit());
    if let Err(e) = fairway::logging::init(&builder.configuration().log) {
        eprintln!("axum_app: {e}");
        std::process::exit(2);
    }
    let state = AppState::default();
    if let Err(e) = builder.axum(move || app(state.clone())).run() {
        eprintln!("axum_app: {e}");
        std::process::exit(1);
    }
}
