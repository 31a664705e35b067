//! A user's application on the `Handler` API, as the platform tests serve
//! it on every backend: the built-in endpoints beside routes that stream
//! both ways, defer, and fail.
//!
//! | request | answer |
//! |---|---|
//! | `GET /plaintext`, `/json`, `/bytes/N`, `POST /upload`, `GET /healthz`, `/metrics` | the built-in endpoints, mounted in this router |
//! | `GET /stream?n=N` | N bytes of the pattern (`i mod 251`), chunked, made as the window frees up |
//! | `POST /sink` | the body streamed through SHA-256, at most 16 KiB a call and woken for more: `<count> <sha256>` |
//! | `POST /echo` | the body, gathered whole (64 KiB at most: 413 beyond), sent back |
//! | `GET /later?ms=N` | deferred, answered N ms later on the connection's timer: `waited N ms` |
//! | `GET /woken?ms=N` | deferred, answered when another thread wakes it N ms later: `woken` |
//! | `GET /never` | deferred forever: the server's response timeout answers 503 |
//! | `GET /panic` | the handler panics: 500 |

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairway::http::builtin::{Bytes, Healthz, Json, Metrics, Plaintext, Upload};
use fairway::http::{
    Context, Exchange, ExchangeMap, Handler, Method, Produce, Reply, Request, Response, Router, pattern_byte,
};
use fairway_stack::time::Instant;
use sha2::{Digest, Sha256};

use super::hex;

/// The most `/sink` takes per call before it asks to be woken.
pub const SINK_STEP: usize = 16 * 1024;

/// The router the platform tests serve: see the [module docs](self).
#[must_use]
pub fn test_app() -> Router {
    Router::new()
        .route(Method::Get, "/plaintext", Plaintext)
        .route(Method::Get, "/json", Json)
        .prefix(Method::Get, "/bytes/", Bytes { max: 1 << 30 })
        .route(Method::Post, "/upload", Upload::default())
        .route(Method::Get, "/healthz", Healthz)
        .route(Method::Get, "/metrics", Metrics)
        .route(Method::Get, "/stream", Stream::default())
        .route(Method::Post, "/sink", Sink::default())
        .route(Method::Post, "/echo", Echo)
        .route(Method::Get, "/later", Later::default())
        .route(Method::Get, "/woken", Woken::default())
        .route(Method::Get, "/never", Never)
        .route(Method::Get, "/panic", Panics)
}

fn query_number(req: &Request<'_>, name: &str) -> Option<u64> {
    req.query()?.split('&').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

/// `GET /stream?n=N`.
#[derive(Default)]
struct Stream {
    /// Per exchange: bytes made so far, and in all.
    made: ExchangeMap<(u64, u64)>,
}

impl Handler for Stream {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let n = query_number(req, "n").unwrap_or(1000);
        self.made.insert(cx.exchange(), (0, n));
        res.status(200).header("Content-Type", b"application/octet-stream").stream(None)
    }

    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        let Some((made, total)) = self.made.get_mut(cx.exchange()) else { return Produce::End(0) };
        let n = out.len().min(usize::try_from(*total - *made).unwrap_or(usize::MAX));
        for (i, b) in out[..n].iter_mut().enumerate() {
            *b = pattern_byte(*made + i as u64);
        }
        *made += n as u64;
        if made == total {
            self.made.remove(cx.exchange());
            Produce::End(n)
        } else {
            Produce::Data(n)
        }
    }

    fn cancel(&mut self, exchange: Exchange) {
        self.made.remove(exchange);
    }
}

/// `POST /sink`: back-pressure on purpose.
#[derive(Default)]
struct Sink {
    digests: ExchangeMap<(Sha256, u64)>,
}

impl Handler for Sink {
    fn request(&mut self, cx: &mut Context<'_>, _: &Request<'_>, res: Response<'_>) -> Reply {
        self.digests.insert(cx.exchange(), (Sha256::new(), 0));
        res.read_body()
    }

    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        let Some((sha, count)) = self.digests.get_mut(cx.exchange()) else { return data.len() };
        let take = data.len().min(SINK_STEP);
        sha.update(&data[..take]);
        *count += take as u64;
        if take < data.len() {
            // Holds the rest back; asks to be driven again at once.
            cx.waker().wake_by_ref();
        }
        take
    }

    fn body_end(&mut self, cx: &mut Context<'_>, _: &[u8], res: Response<'_>) -> Reply {
        let Some((sha, count)) = self.digests.remove(cx.exchange()) else { return res.error(500) };
        res.text(200, &format!("{count} {}\n", hex(&sha.finalize())))
    }

    fn cancel(&mut self, exchange: Exchange) {
        self.digests.remove(exchange);
    }
}

/// `POST /echo`.
struct Echo;

impl Handler for Echo {
    fn request(&mut self, _: &mut Context<'_>, _: &Request<'_>, res: Response<'_>) -> Reply {
        res.collect_body()
    }

    fn body_end(&mut self, _: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        res.status(200).header("Content-Type", b"application/octet-stream").body(body)
    }
}

/// `GET /later?ms=N`.
#[derive(Default)]
struct Later {
    due: ExchangeMap<(Instant, u64)>,
}

impl Handler for Later {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let ms = query_number(req, "ms").unwrap_or(100);
        let due = cx.now() + fairway_stack::time::Duration::from_millis(ms);
        self.due.insert(cx.exchange(), (due, ms));
        cx.wake_at(due);
        res.defer()
    }

    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        match self.due.get_mut(cx.exchange()) {
            Some(&mut (due, ms)) if cx.now() >= due => {
                self.due.remove(cx.exchange());
                res.text(200, &format!("waited {ms} ms\n"))
            }
            Some(_) => res.defer(),
            None => res.error(500),
        }
    }

    fn cancel(&mut self, exchange: Exchange) {
        self.due.remove(exchange);
    }
}

/// `GET /woken?ms=N`: a thread of its own wakes the connection.
#[derive(Default)]
struct Woken {
    ready: ExchangeMap<Arc<AtomicBool>>,
}

impl Handler for Woken {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let ms = query_number(req, "ms").unwrap_or(100);
        let ready = Arc::new(AtomicBool::new(false));
        let (flag, waker) = (Arc::clone(&ready), cx.waker().clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            flag.store(true, Ordering::Release);
            waker.wake();
        });
        self.ready.insert(cx.exchange(), ready);
        res.defer()
    }

    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        match self.ready.get_mut(cx.exchange()) {
            Some(ready) if ready.load(Ordering::Acquire) => {
                self.ready.remove(cx.exchange());
                res.text(200, "woken\n")
            }
            Some(_) => res.defer(),
            None => res.error(500),
        }
    }

    fn cancel(&mut self, exchange: Exchange) {
        self.ready.remove(exchange);
    }
}

/// `GET /never`.
struct Never;

impl Handler for Never {
    fn request(&mut self, _: &mut Context<'_>, _: &Request<'_>, res: Response<'_>) -> Reply {
        res.defer()
    }
}

/// `GET /panic`.
struct Panics;

impl Handler for Panics {
    fn request(&mut self, _: &mut Context<'_>, _: &Request<'_>, _: Response<'_>) -> Reply {
        panic!("the test application's handler panics, as asked")
    }
}
