//! A load test of an axum application with criterion, written as a user of
//! Fairway would write one: the benchmark embeds the server
//! (`fairway::Server::builder()…spawn()` on kernel sockets at
//! 127.0.0.1:0), serves its router on it, and drives it with hyper's
//! HTTP/1 client over tokio's `TcpStream`:
//!
//! - `latency`: one request at a time on one keep-alive connection;
//! - `throughput`: 64 requests at once, one on each of 64 keep-alive
//!   connections, per iteration (criterion reports requests per second).
//!
//! ```sh
//! cargo bench -p fairway-benches --bench embedded_axum
//! ```
//!
//! The server runs one shard (one core) and the client a current-thread
//! runtime on the benchmark's own thread: on a two-core machine each gets
//! a core. The server is shut down gracefully at the end.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures_util::future::join_all;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Connections (and requests in flight) of the throughput benchmark.
const CONCURRENCY: usize = 64;

/// How long a request may take before the benchmark fails.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The application under test: what any axum application looks like.
fn app() -> Router {
    Router::new().route("/hello/{name}", get(|Path(name): Path<String>| async move { format!("Hello, {name}!") }))
}

/// A keep-alive HTTP/1.1 connection to `addr`.
async fn connect(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    sender
}

/// `GET /hello/criterion` on `sender`'s connection, its answer checked;
/// a server that stops answering fails the benchmark instead of hanging it.
async fn hello(sender: &mut SendRequest<Empty<Bytes>>) {
    let exchange = async {
        sender.ready().await.expect("the connection is open");
        let request = Request::get("/hello/criterion").header("host", "localhost").body(Empty::new()).unwrap();
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.status(), StatusCode::OK);
        response.into_body().collect().await.expect("body").to_bytes()
    };
    let body = tokio::time::timeout(TIMEOUT, exchange).await.expect("an answer in time");
    assert_eq!(body, "Hello, criterion!");
}

fn embedded_axum(c: &mut Criterion) {
    let server = fairway::Server::builder()
        .listen("127.0.0.1:0".parse().unwrap())
        .shards(1)
        .axum(app)
        .spawn()
        .expect("starting Fairway");
    let addr = server.local_addr();
    let client = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");

    let mut group = c.benchmark_group("axum_on_fairway");

    let mut conn = client.block_on(connect(addr));
    group.throughput(Throughput::Elements(1));
    group.bench_function("latency", |b| b.iter(|| client.block_on(hello(&mut conn))));

    let mut conns = client.block_on(join_all((0..CONCURRENCY).map(|_| connect(addr))));
    group.throughput(Throughput::Elements(CONCURRENCY as u64));
    group.bench_function(BenchmarkId::new("throughput", CONCURRENCY), |b| {
        b.iter(|| client.block_on(join_all(conns.iter_mut().map(hello))))
    });
    group.finish();

    // Close the connections, then stop the server (a request still in
    // flight would be answered first).
    drop((conn, conns, client));
    server.shutdown().expect("Fairway stopped cleanly");
}

criterion_group!(benches, embedded_axum);
criterion_main!(benches);
