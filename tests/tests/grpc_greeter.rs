//! Issue 37: gRPC on Fairway. The grpc_greeter example (tonic's Greeter,
//! unary and server-streaming) served in-process as its `main` serves it,
//! on kernel sockets and over AF_XDP (root, on a testbed it builds and
//! removes), against tonic clients: tonic's own channel, and tonic's
//! `Grpc` over hyper-util's HTTP/2 client, which keeps no deadline of its
//! own, so the server's is what it sees.
#![cfg(target_os = "linux")]

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fairway::config::Config;
use fairway::{Builder, Server};
use fairway_tests::platform::{gauge, wait_for_gauge};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use hyper_util::service::TowerToHyperService;
use tonic::client::{Grpc, GrpcService};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::{Body, Bytes, StdError};
use tonic::transport::Endpoint;
use tonic::{Code, IntoRequest, Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

#[path = "../../server/examples/grpc_greeter.rs"]
#[allow(dead_code)]
mod grpc_greeter;

use grpc_greeter::{HELLOS_INTERVAL, HelloReply, HelloRequest, HellosRequest};

/// The client side of `helloworld.Greeter`: what tonic-prost-build
/// generates from the example's greeter.proto, trimmed as the server side
/// is.
#[derive(Clone)]
struct GreeterClient<T>(Grpc<T>);

impl<T> GreeterClient<T>
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    async fn say_hello(&mut self, request: impl IntoRequest<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        self.0.ready().await.map_err(|e| Status::unknown(format!("the service was not ready: {}", e.into())))?;
        let path = PathAndQuery::from_static("/helloworld.Greeter/SayHello");
        self.0.unary(request.into_request(), path, ProstCodec::default()).await
    }

    async fn say_hellos(
        &mut self,
        request: impl IntoRequest<HellosRequest>,
    ) -> Result<Response<Streaming<HelloReply>>, Status> {
        self.0.ready().await.map_err(|e| Status::unknown(format!("the service was not ready: {}", e.into())))?;
        let path = PathAndQuery::from_static("/helloworld.Greeter/SayHellos");
        self.0.server_streaming(request.into_request(), path, ProstCodec::default()).await
    }
}

fn hello(name: &str, delay_ms: u32) -> HelloRequest {
    HelloRequest { name: name.to_owned(), delay_ms }
}

/// A call that takes two seconds, with a deadline of 200 ms: the error it
/// ends with, within 1.5 s.
async fn past_the_deadline<T>(client: &mut GreeterClient<T>) -> Status
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let mut slow = Request::new(hello("slow", 2000));
    slow.set_timeout(Duration::from_millis(200));
    let started = Instant::now();
    let status = client.say_hello(slow).await.expect_err("a call past its deadline");
    let took = started.elapsed();
    assert!((Duration::from_millis(200)..Duration::from_millis(1500)).contains(&took), "{status:?} after {took:?}");
    status
}

/// Every check, from a tokio runtime of the caller's thread (in the
/// namespace the caller is in): unary calls (one, a refused one, 200 at
/// once on the one connection), a stream of 50 replies all there in order
/// and paced by the server's interval, and the deadline as each client
/// sees it; the channel still serves after them.
fn check_greeter(server: SocketAddr) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let url = format!("http://{server}");
        let channel = Endpoint::from_shared(url.clone()).unwrap().connect().await.unwrap();
        let mut client = GreeterClient(Grpc::new(channel));

        let reply = client.say_hello(hello("fairway", 0)).await.unwrap().into_inner();
        assert_eq!(reply.message, "Hello, fairway!");
        let refused = client.say_hello(hello("", 0)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

        let started = Instant::now();
        let request = HellosRequest { name: "stream".to_owned(), count: 50 };
        let mut replies = client.say_hellos(request).await.unwrap().into_inner();
        let mut got = Vec::new();
        while let Some(reply) = replies.message().await.unwrap() {
            got.push(reply.message);
        }
        let want: Vec<String> = (1..=50).map(|i| format!("Hello #{i}, stream!")).collect();
        assert_eq!(got, want);
        let took = started.elapsed();
        assert!(took >= HELLOS_INTERVAL * 49, "50 replies 10 ms apart came in {took:?}");

        let calls = (0..200).map(|i| {
            let mut client = client.clone();
            async move { client.say_hello(hello(&format!("caller {i}"), 0)).await }
        });
        for (i, answer) in futures_util::future::join_all(calls).await.into_iter().enumerate() {
            assert_eq!(answer.unwrap().into_inner().message, format!("Hello, caller {i}!"));
        }

        // tonic's channel times the call itself (its grpc-timeout), as the
        // server does; either side's timeout is tonic's Cancelled.
        let timed_out = (Code::Cancelled, "Timeout expired");
        let status = past_the_deadline(&mut client).await;
        assert_eq!((status.code(), status.message()), timed_out, "{status:?}");

        // Without a client-side timer the server's deadline answers (before
        // the two seconds the call would take).
        let http2 = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
        let mut plain = GreeterClient(Grpc::with_origin(http2, url.parse().unwrap()));
        let status = past_the_deadline(&mut plain).await;
        assert_eq!((status.code(), status.message()), timed_out, "{status:?}");
        let reply = plain.say_hello(hello("hyper", 0)).await.unwrap().into_inner();
        assert_eq!(reply.message, "Hello, hyper!");

        let reply = client.say_hello(hello("again", 0)).await.unwrap().into_inner();
        assert_eq!(reply.message, "Hello, again!");
    });
}

#[test]
fn grpc_timeout_is_read_as_grpc_over_http2_writes_it() {
    let read = |value: &str| {
        let mut headers = tonic::codegen::http::HeaderMap::new();
        headers.insert("grpc-timeout", value.parse().unwrap());
        grpc_greeter::grpc_timeout(&headers)
    };
    assert_eq!(read("200m"), Some(Duration::from_millis(200)));
    assert_eq!(read("3S"), Some(Duration::from_secs(3)));
    assert_eq!(read("2M"), Some(Duration::from_secs(120)));
    assert_eq!(read("99999999H"), Some(Duration::from_secs(99_999_999 * 3600)));
    assert_eq!(read("7u"), Some(Duration::from_micros(7)));
    assert_eq!(read("40n"), Some(Duration::from_nanos(40)));
    for bad in ["", "m", "100", "123456789m", "1.5S", "-1S", "10x", "1 S"] {
        assert_eq!(read(bad), None, "{bad:?}");
    }
    assert_eq!(grpc_greeter::grpc_timeout(&tonic::codegen::http::HeaderMap::new()), None);
}

/// The example's application on `builder`, as its `main` sets it.
fn greeter(builder: Builder) -> Builder {
    builder.task(|| {
        let service = grpc_greeter::service();
        fairway::rt::serve(move |_| TowerToHyperService::new(service.clone()))
    })
}

/// One server at a time on two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn grpc_unary_streaming_and_deadlines_on_kernel_sockets() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let args = ["fairway", "--listen", "127.0.0.1:0", "--shards", "2", "--log", "warn"];
    let server = greeter(Server::builder().config(Config::load(args, None).unwrap())).spawn().unwrap();
    check_greeter(server.local_addr());
    // Every connection's task has ended (the reset calls' too), none panicked.
    wait_for_gauge(&server, "fairway_tasks", 2);
    assert_eq!(gauge(&server, "fairway_task_panics_total"), 0);
    assert_eq!(server.shutdown().unwrap().len(), 2);
}

#[cfg(feature = "afxdp")]
#[test]
fn grpc_unary_streaming_and_deadlines_over_afxdp() {
    use fairway_tests::served::Served;
    use fairway_tests::testbed::{self, SERVER_IF, Testbed, TestbedConfig};

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("gr{}", std::process::id() % 100_000);
    let tb = Testbed::up(TestbedConfig::new(prefix).clients(1).queues(2)).unwrap_or_else(|e| panic!("{e}"));
    let ip = tb.server_prefix();
    let flags = ["--backend", "afxdp", "--iface", SERVER_IF, "--ip", &ip, "--queues", "2"];
    let served = Served::start_with(&tb, &flags, greeter);
    let server = SocketAddr::new(tb.server_ip().into(), 80);
    testbed::in_netns(&tb.client_ns(0), || check_greeter(server)).unwrap();
    wait_for_gauge(served.handle(), "fairway_tasks", 2);
    assert_eq!(gauge(served.handle(), "fairway_task_panics_total"), 0);
    assert_eq!(served.stop().len(), 2);
}
