//! Your own application on Fairway with the `Handler` API: a router of your
//! routes beside two of the built-in endpoints, answered on the core that
//! owns each connection, with no heap allocation per request.
//!
//! ```sh
//! cargo run --release --example hello_handler              # kernel sockets, 127.0.0.1:8080
//! curl http://127.0.0.1:8080/hello/fairway
//! curl 'http://127.0.0.1:8080/count?to=5'
//! curl -d 'some bytes' http://127.0.0.1:8080/echo
//! ```
//!
//! It takes the `fairway` binary's flags (`--help` lists them), so as root
//! on the testbed (`cargo xtask testbed up`) it serves over AF_XDP:
//!
//! ```sh
//! cargo build --release --features afxdp --example hello_handler
//! sudo ip netns exec fw-srv target/release/examples/hello_handler \
//!     --backend afxdp --iface fw0 --ip 10.77.0.1/24
//! sudo ip netns exec fw-c0 curl http://10.77.0.1/hello/fairway
//! ```

use std::io::Write;

use fairway::Builder;
use fairway::http::builtin::{Healthz, Metrics};
use fairway::http::{Context, ExchangeMap, Handler, Method, Produce, Reply, Request, Response, Router, handler_fn};

/// `GET /hello/{name}`: a greeting, and how many this shard has given.
#[derive(Default)]
struct Greeter {
    greeted: u64,
}

impl Handler for Greeter {
    fn request(&mut self, _: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        self.greeted += 1;
        let name = req.path().strip_prefix("/hello/").filter(|n| !n.is_empty()).unwrap_or("world");
        let greeted = self.greeted;
        // Rendered into the connection's own buffer, whose room is reused.
        res.status(200).header("Content-Type", b"text/plain; charset=utf-8").body_with(|out| {
            let _ = writeln!(out, "Hello, {name}! (greeting {greeted} on this core)");
        })
    }
}

/// `GET /count?to=N`: the numbers 1 to N, one per line, streamed as the
/// connection takes them (chunked: the length is not known in advance).
#[derive(Default)]
struct Counter {
    /// Per exchange: the next number and the last.
    counting: ExchangeMap<(u64, u64)>,
}

impl Handler for Counter {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let to = req.query().and_then(|q| q.strip_prefix("to=")).and_then(|n| n.parse().ok()).unwrap_or(10);
        if to > 1_000_000 {
            return res.text(400, "to is at most 1000000\n");
        }
        self.counting.insert(cx.exchange(), (1, to));
        res.status(200).header("Content-Type", b"text/plain").stream(None)
    }

    fn produce(&mut self, cx: &mut Context<'_>, mut out: &mut [u8]) -> Produce {
        let Some((next, last)) = self.counting.get_mut(cx.exchange()) else { return Produce::End(0) };
        let room = out.len();
        // Whole lines only: stop when the next one might not fit.
        while *next <= *last && out.len() >= 21 {
            let _ = writeln!(out, "{next}");
            *next += 1;
        }
        let written = room - out.len();
        if *next > *last {
            self.counting.remove(cx.exchange());
            Produce::End(written)
        } else {
            Produce::Data(written)
        }
    }

    fn cancel(&mut self, exchange: fairway::http::Exchange) {
        self.counting.remove(exchange);
    }
}

/// `POST /echo`: the request body, gathered whole, sent back.
struct Echo;

impl Handler for Echo {
    fn request(&mut self, _: &mut Context<'_>, _: &Request<'_>, res: Response<'_>) -> Reply {
        res.collect_body()
    }

    fn body_end(&mut self, _: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        res.status(200).header("Content-Type", b"application/octet-stream").body(body)
    }
}

fn app() -> Router {
    Router::new()
        .prefix(Method::Get, "/hello/", Greeter::default())
        .about("a greeting: /hello/NAME")
        .route(Method::Get, "/count", Counter::default())
        .about("1 to N, streamed: /count?to=N")
        .route(Method::Post, "/echo", Echo)
        .about("the body, sent back")
        .route(
            Method::Get,
            "/time",
            handler_fn(|cx, _, res| {
                let now = cx.now();
                res.status(200).header("Content-Type", b"text/plain").body_with(|out| {
                    let _ = writeln!(out, "{now}");
                })
            }),
        )
        .about("the shard's clock")
        // Two of Fairway's own endpoints, composed with ours.
        .route(Method::Get, "/metrics", Metrics)
        .route(Method::Get, "/healthz", Healthz)
        .with_index("hello_handler: a Fairway Handler application. It serves:")
}

fn main() {
    // The `fairway` binary's flags: --backend, --listen, --iface, --ip, ...
    let builder = Builder::from_args().unwrap_or_else(|e| e.exit());
    if let Err(e) = fairway::logging::init(&builder.configuration().log) {
        eprintln!("hello_handler: {e}");
        std::process::exit(2);
    }
    if let Err(e) = builder.handler(app).run() {
        eprintln!("hello_handler: {e}");
        std::process::exit(1);
    }
}
