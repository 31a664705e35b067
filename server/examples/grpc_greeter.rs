//! A gRPC service on Fairway: tonic's Greeter, with a unary `SayHello`
//! and a server-streaming `SayHellos` (replies paced by
//! `tokio::time::interval`), served over HTTP/2 with prior knowledge
//! (h2c, as gRPC clients speak to a plain port) by each shard's hyper
//! server, on either backend. tonic's `Routes` is a tower service like an
//! axum `Router`: `fairway::rt::serve` serves it through hyper-util's
//! `TowerToHyperService`.
//!
//! Deadlines: a client's `grpc-timeout` bounds the call here as it does
//! on tonic's own `transport::Server` ([`Deadlines`]): past it the
//! handler's work is dropped and the answer is tonic's, `CANCELLED` with
//! "Timeout expired" (gRPC's spec names `DEADLINE_EXCEEDED`; tonic's
//! client reports its own side of a deadline the same way, so a tonic
//! client sees one status whichever side's timer fires first).
//!
//! ```sh
//! cargo run --release --example grpc_greeter                     # kernel sockets, 127.0.0.1:8080
//! grpcurl -plaintext -proto greeter.proto -d '{"name":"fairway"}' 127.0.0.1:8080 helloworld.Greeter/SayHello
//! grpcurl -plaintext -proto greeter.proto -d '{"name":"fairway","count":5}' 127.0.0.1:8080 helloworld.Greeter/SayHellos
//! grpcurl -plaintext -proto greeter.proto -max-time 0.2 -d '{"name":"slow","delay_ms":1000}' 127.0.0.1:8080 helloworld.Greeter/SayHello
//! ```
//!
//! with `greeter.proto`, the service this file implements:
//!
//! ```proto
//! syntax = "proto3";
//! package helloworld;
//! service Greeter {
//!   rpc SayHello (HelloRequest) returns (HelloReply);
//!   rpc SayHellos (HellosRequest) returns (stream HelloReply);
//! }
//! message HelloRequest { string name = 1; uint32 delay_ms = 2; }
//! message HellosRequest { string name = 1; uint32 count = 2; }
//! message HelloReply { string message = 1; }
//! ```
//!
//! The messages and the service glue below are what tonic-prost-build
//! generates from it, written out (and trimmed of the compression and
//! message-size options) so that building needs neither `protoc` nor a
//! build script. It takes the `fairway` binary's flags (`--backend afxdp
//! --iface fw0 --ip 10.77.0.1/24` on the testbed, see the axum_app
//! example).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use fairway::Builder;
use hyper_util::service::TowerToHyperService;
use tonic::codegen::{Service, http};
use tonic::service::Routes;
use tonic::{Request, Response, Status};

/// The longest `delay_ms` a `SayHello` takes.
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// The most replies a `SayHellos` streams.
pub const MAX_HELLOS: u32 = 1000;

/// How far apart `SayHellos` sends its replies (the first at once).
pub const HELLOS_INTERVAL: Duration = Duration::from_millis(10);

// ---- What tonic-prost-build generates from greeter.proto ----

/// `helloworld.HelloRequest`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HelloRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    /// How long the greeting takes (a slow call, for trying deadlines).
    #[prost(uint32, tag = "2")]
    pub delay_ms: u32,
}

/// `helloworld.HellosRequest`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HellosRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// `helloworld.HelloReply`.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct HelloReply {
    #[prost(string, tag = "1")]
    pub message: String,
}

/// The server side of `helloworld.Greeter`.
pub mod greeter_server {
    use tonic::codegen::*;

    use super::{HelloReply, HelloRequest, HellosRequest};

    /// What an implementation of the service provides.
    #[async_trait]
    pub trait Greeter: Send + Sync + 'static {
        /// `rpc SayHello (HelloRequest) returns (HelloReply)`.
        async fn say_hello(
            &self,
            request: tonic::Request<HelloRequest>,
        ) -> Result<tonic::Response<HelloReply>, tonic::Status>;

        /// The stream [`say_hellos`](Greeter::say_hellos) answers with.
        type SayHellosStream: tokio_stream::Stream<Item = Result<HelloReply, tonic::Status>> + Send + 'static;

        /// `rpc SayHellos (HellosRequest) returns (stream HelloReply)`.
        async fn say_hellos(
            &self,
            request: tonic::Request<HellosRequest>,
        ) -> Result<tonic::Response<Self::SayHellosStream>, tonic::Status>;
    }

    /// The HTTP service that decodes each call for a [`Greeter`] and
    /// encodes its answer.
    #[derive(Debug)]
    pub struct GreeterServer<T> {
        inner: Arc<T>,
    }

    impl<T> GreeterServer<T> {
        /// Serves `inner`.
        pub fn new(inner: T) -> Self {
            GreeterServer { inner: Arc::new(inner) }
        }
    }

    impl<T> Clone for GreeterServer<T> {
        fn clone(&self) -> Self {
            GreeterServer { inner: Arc::clone(&self.inner) }
        }
    }

    impl<T, B> Service<http::Request<B>> for GreeterServer<T>
    where
        T: Greeter,
        B: Body + Send + 'static,
        B::Error: Into<StdError> + Send + 'static,
    {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Self::Response, Self::Error>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<B>) -> Self::Future {
            let inner = Arc::clone(&self.inner);
            match req.uri().path() {
                "/helloworld.Greeter/SayHello" => {
                    struct SayHelloSvc<T: Greeter>(Arc<T>);
                    impl<T: Greeter> tonic::server::UnaryService<HelloRequest> for SayHelloSvc<T> {
                        type Response = HelloReply;
                        type Future = BoxFuture<tonic::Response<Self::Response>, tonic::Status>;
                        fn call(&mut self, request: tonic::Request<HelloRequest>) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            Box::pin(async move { inner.say_hello(request).await })
                        }
                    }
                    Box::pin(async move {
                        let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                        Ok(grpc.unary(SayHelloSvc(inner), req).await)
                    })
                }
                "/helloworld.Greeter/SayHellos" => {
                    struct SayHellosSvc<T: Greeter>(Arc<T>);
                    impl<T: Greeter> tonic::server::ServerStreamingService<HellosRequest> for SayHellosSvc<T> {
                        type Response = HelloReply;
                        type ResponseStream = T::SayHellosStream;
                        type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;
                        fn call(&mut self, request: tonic::Request<HellosRequest>) -> Self::Future {
                            let inner = Arc::clone(&self.0);
                            Box::pin(async move { inner.say_hellos(request).await })
                        }
                    }
                    Box::pin(async move {
                        let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                        Ok(grpc.server_streaming(SayHellosSvc(inner), req).await)
                    })
                }
                _ => Box::pin(async move { Ok(tonic::Status::unimplemented("").into_http()) }),
            }
        }
    }

    impl<T> tonic::server::NamedService for GreeterServer<T> {
        const NAME: &'static str = "helloworld.Greeter";
    }
}

// ---- The application ----

use greeter_server::{Greeter, GreeterServer};

/// The Greeter this example serves.
#[derive(Debug, Default)]
pub struct MyGreeter;

fn named(name: &str) -> Result<&str, Status> {
    if name.is_empty() { Err(Status::invalid_argument("say who to greet: name is empty")) } else { Ok(name) }
}

#[tonic::async_trait]
impl Greeter for MyGreeter {
    async fn say_hello(&self, request: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let HelloRequest { name, delay_ms } = request.into_inner();
        let delay = Duration::from_millis(delay_ms.into());
        if delay > MAX_DELAY {
            return Err(Status::invalid_argument(format!("delay_ms is over {}", MAX_DELAY.as_millis())));
        }
        let message = format!("Hello, {}!", named(&name)?);
        tokio::time::sleep(delay).await;
        Ok(Response::new(HelloReply { message }))
    }

    type SayHellosStream = tonic::codegen::BoxStream<HelloReply>;

    async fn say_hellos(&self, request: Request<HellosRequest>) -> Result<Response<Self::SayHellosStream>, Status> {
        let HellosRequest { name, count } = request.into_inner();
        named(&name)?;
        if count > MAX_HELLOS {
            return Err(Status::invalid_argument(format!("count is over {MAX_HELLOS}")));
        }
        let interval = tokio::time::interval(HELLOS_INTERVAL);
        let replies = futures_util::stream::unfold((interval, 1), move |(mut interval, i)| {
            let message = format!("Hello #{i}, {name}!");
            async move {
                if i > count {
                    return None;
                }
                interval.tick().await;
                Some((Ok(HelloReply { message }), (interval, i + 1)))
            }
        });
        Ok(Response::new(Box::pin(replies)))
    }
}

/// A client's `grpc-timeout` (gRPC over HTTP/2: up to eight digits and a
/// unit, `H`ours, `M`inutes, `S`econds, `m`illi-, `u` micro-, `n`anoseconds).
#[must_use]
pub fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Bounds each call by its `grpc-timeout` until its answer begins (a
/// unary call's whole answer, a stream's headers), as tonic's
/// `transport::Server` does: past it the call is dropped and answered
/// with the status tonic makes of its `TimeoutExpired`.
#[derive(Clone, Debug)]
pub struct Deadlines<S>(pub S);

impl<S, B> Service<http::Request<B>> for Deadlines<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>, Error = Infallible>,
    S::Future: 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let deadline = grpc_timeout(request.headers());
        let answer = self.0.call(request);
        Box::pin(async move {
            let Some(deadline) = deadline else { return answer.await };
            match tokio::time::timeout(deadline, answer).await {
                Ok(answered) => answered,
                Err(_) => Ok(Status::from_error(tonic::TimeoutExpired(()).into()).into_http()),
            }
        })
    }
}

/// The gRPC application: the Greeter behind tonic's router, with
/// [`Deadlines`].
#[must_use]
pub fn service() -> Deadlines<Routes> {
    Deadlines(Routes::new(GreeterServer::new(MyGreeter)))
}

fn main() {
    let builder = Builder::from_args().unwrap_or_else(|e| e.exit());
    if let Err(e) = fairway::logging::init(&builder.configuration().log) {
        eprintln!("grpc_greeter: {e}");
        std::process::exit(2);
    }
    let served = builder.task(|| {
        let service = service();
        fairway::rt::serve(move |_| TowerToHyperService::new(service.clone()))
    });
    if let Err(e) = served.run() {
        eprintln!("grpc_greeter: {e}");
        std::process::exit(1);
    }
}
