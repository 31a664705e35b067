//! [`Router`]: handlers composed by method and path, itself a [`Handler`].
//!
//! Routes are tried in the order they were added: an exact path
//! ([`Router::route`]) or a prefix ([`Router::prefix`]), each for a set of
//! [`Methods`] (`GET` brings `HEAD` with it). The first whose path and
//! method match takes the request; a path that matches only under other
//! methods is answered 405 with `Allow`. A method the router has no name
//! for ([`Method::Other`]: not one of the seven it knows, or not in upper
//! case, as method names are case-sensitive) is answered 501 unless a
//! route for [`Methods::ANY`] takes it (RFC 9110 §9.1). Anything else goes
//! to the [fallback](Router::fallback), or is a 404. With
//! [`with_index`](Router::with_index), `GET /` lists the routes (unless a
//! route takes `/`, or the site's static root has an `index.html`, which
//! the fallback then serves).
//!
//! The router remembers which route took each exchange, so the later calls
//! of that exchange (body, produce, resume, cancel) reach the same handler.
//! Matching is a scan of the routes with string compares; nothing is
//! allocated per request.

use std::ops::BitOr;

use crate::http::handler::{Context, Exchange, ExchangeMap, Handler, Head, Method, Produce, Reply, Request, Response};
use crate::http::response::{ByteWriter, reason};

/// A set of methods a route answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Methods(u16);

const ORDER: [Method; 7] =
    [Method::Get, Method::Head, Method::Post, Method::Put, Method::Delete, Method::Patch, Method::Options];

fn bit(m: Method) -> u16 {
    match m {
        Method::Get => 1,
        Method::Head => 2,
        Method::Post => 4,
        Method::Put => 8,
        Method::Delete => 16,
        Method::Patch => 32,
        Method::Options => 64,
        Method::Other => 0,
    }
}

impl Methods {
    /// Every method, those without a name of their own included.
    pub const ANY: Methods = Methods(u16::MAX);

    /// Whether `m` is in the set.
    #[must_use]
    pub fn contains(self, m: Method) -> bool {
        self == Methods::ANY || self.0 & bit(m) != 0
    }

    /// `GET, HEAD, ...`, for an `Allow` header.
    fn allow(self, out: &mut ByteWriter<'_>) {
        let mut first = true;
        for m in ORDER.into_iter().filter(|&m| self.contains(m)) {
            if !first {
                out.put(b", ");
            }
            out.put(m.name().as_bytes());
            first = false;
        }
    }
}

impl From<Method> for Methods {
    /// `GET` comes with `HEAD`, answered the same way without the body.
    fn from(m: Method) -> Methods {
        Methods(if m == Method::Get { bit(Method::Get) | bit(Method::Head) } else { bit(m) })
    }
}

impl<const N: usize> From<[Method; N]> for Methods {
    fn from(ms: [Method; N]) -> Methods {
        ms.into_iter().map(Methods::from).fold(Methods::default(), |a, b| a | b)
    }
}

impl BitOr for Methods {
    type Output = Methods;
    fn bitor(self, other: Methods) -> Methods {
        Methods(self.0 | other.0)
    }
}

impl BitOr for Method {
    type Output = Methods;
    fn bitor(self, other: Method) -> Methods {
        Methods::from(self) | Methods::from(other)
    }
}

struct Route {
    path: Box<str>,
    prefix: bool,
    methods: Methods,
    about: Box<str>,
    handler: Box<dyn Handler>,
}

impl Route {
    fn matches(&self, path: &str) -> bool {
        if self.prefix { path.starts_with(&*self.path) } else { *path == *self.path }
    }
}

/// Which handler took an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Route(usize),
    Fallback,
}

/// Handlers by method and path. See the [module documentation](self).
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
    fallback: Option<(Box<str>, Box<dyn Handler>)>,
    /// The fallback was added after the last route: [`about`](Router::about)
    /// describes it.
    fallback_last: bool,
    owners: ExchangeMap<Owner>,
    index: Option<Box<str>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: Vec<_> = self.routes.iter().map(|r| (&*r.path, r.prefix, r.methods)).collect();
        f.debug_struct("Router").field("routes", &routes).field("fallback", &self.fallback.is_some()).finish()
    }
}

impl Router {
    /// A router with no routes: every request is a 404.
    #[must_use]
    pub fn new() -> Router {
        Router::default()
    }

    /// Sends requests for exactly `path` with one of `methods` to `handler`.
    #[must_use]
    pub fn route(self, methods: impl Into<Methods>, path: &str, handler: impl Handler + 'static) -> Router {
        self.add(methods.into(), path, false, handler)
    }

    /// Sends requests whose path starts with `prefix` with one of
    /// `methods` to `handler`.
    #[must_use]
    pub fn prefix(self, methods: impl Into<Methods>, prefix: &str, handler: impl Handler + 'static) -> Router {
        self.add(methods.into(), prefix, true, handler)
    }

    /// Sends every request no route matches to `handler`.
    #[must_use]
    pub fn fallback(mut self, handler: impl Handler + 'static) -> Router {
        self.fallback = Some((Box::from(""), Box::new(handler)));
        self.fallback_last = true;
        self
    }

    /// Describes the route (or fallback) added last, for the index.
    #[must_use]
    pub fn about(mut self, text: &str) -> Router {
        match (&mut self.fallback, self.routes.last_mut()) {
            (Some((about, _)), _) if self.fallback_last => *about = Box::from(text),
            (_, Some(route)) => route.about = Box::from(text),
            (Some((about, _)), None) => *about = Box::from(text),
            (None, None) => {}
        }
        self
    }

    /// Answers `GET /` with a list of the routes under `title`.
    #[must_use]
    pub fn with_index(mut self, title: &str) -> Router {
        self.index = Some(Box::from(title));
        self
    }

    fn add(mut self, methods: Methods, path: &str, prefix: bool, handler: impl Handler + 'static) -> Router {
        self.fallback_last = false;
        self.routes.push(Route {
            path: Box::from(path),
            prefix,
            methods,
            about: Box::from(""),
            handler: Box::new(handler),
        });
        self
    }

    fn owner(&mut self, ex: Exchange) -> Option<&mut dyn Handler> {
        match *self.owners.get_mut(ex)? {
            Owner::Route(i) => Some(&mut *self.routes.get_mut(i)?.handler),
            Owner::Fallback => Some(&mut *self.fallback.as_mut()?.1),
        }
    }

    /// The index: each route's methods, path and description.
    fn render_index(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.index.as_deref().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\n\n");
        let mut line = |methods: Methods, path: &str, wildcard: bool, about: &str| {
            let mut buf = [0u8; 64];
            let mut w = ByteWriter::new(&mut buf);
            methods.allow(&mut w);
            let len = w.len();
            out.extend_from_slice(&buf[..len]);
            out.extend(std::iter::repeat_n(b' ', 12usize.saturating_sub(len).max(1)));
            out.extend_from_slice(path.as_bytes());
            if wildcard {
                out.push(b'*');
            }
            if !about.is_empty() {
                let shown = path.len() + usize::from(wildcard);
                out.extend(std::iter::repeat_n(b' ', 16usize.saturating_sub(shown).max(1)));
                out.extend_from_slice(about.as_bytes());
            }
            out.push(b'\n');
        };
        for route in &self.routes {
            line(route.methods, &route.path, route.prefix, &route.about);
        }
        if let Some((about, _)) = &self.fallback {
            line(Methods::from(Method::Get), "/", true, about);
        }
    }
}

/// 405 with `Allow`.
fn not_allowed(res: Response<'_>, allowed: Methods) -> Reply {
    let mut allow = [0u8; 64];
    let mut w = ByteWriter::new(&mut allow);
    allowed.allow(&mut w);
    let len = w.len();
    error_with(res, 405, |h| h.trusted_header("Allow", &allow[..len]))
}

/// An error answer (its reason phrase as the body) with `extra` headers
/// after `Content-Length`.
pub(crate) fn error_with(res: Response<'_>, status: u16, extra: impl FnOnce(Head<'_>) -> Head<'_>) -> Reply {
    let mut text = [0u8; 48];
    let mut w = ByteWriter::new(&mut text);
    w.put(reason(status).as_bytes());
    w.put(b"\n");
    let len = w.len();
    let mut head = res.status(status).trusted_header("Content-Type", b"text/plain");
    head.content_length(len as u64);
    extra(head).body(&text[..len])
}

impl Handler for Router {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let (path, method) = (req.path(), req.method());
        let mut allowed = Methods::default();
        for (i, route) in self.routes.iter_mut().enumerate() {
            if !route.matches(path) {
                continue;
            }
            if route.methods.contains(method) {
                let reply = route.handler.request(cx, req, res);
                // Remembered only for an exchange it will be called for again.
                if reply.holds() {
                    self.owners.insert(cx.exchange(), Owner::Route(i));
                }
                return reply;
            }
            allowed = allowed | route.methods;
        }
        if method == Method::Other {
            return res.error(501);
        }
        if allowed != Methods::default() {
            return not_allowed(res, allowed);
        }
        if self.index.is_some() && path == "/" {
            let root_index = cx.site().files().is_some_and(|files| files.open("/").is_ok());
            if !(root_index && self.fallback.is_some()) {
                if !Methods::from(Method::Get).contains(method) {
                    return not_allowed(res, Methods::from(Method::Get));
                }
                return res
                    .status(200)
                    .header("Content-Type", b"text/plain; charset=utf-8")
                    .body_with(|out| self.render_index(out));
            }
        }
        match &mut self.fallback {
            Some((_, handler)) => {
                let reply = handler.request(cx, req, res);
                if reply.holds() {
                    self.owners.insert(cx.exchange(), Owner::Fallback);
                }
                reply
            }
            None => res.error(404),
        }
    }

    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        match self.owner(cx.exchange()) {
            Some(handler) => handler.body(cx, data),
            None => data.len(),
        }
    }

    fn body_end(&mut self, cx: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        match self.owner(cx.exchange()) {
            Some(handler) => handler.body_end(cx, body, res),
            None => res.error(500),
        }
    }

    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        match self.owner(cx.exchange()) {
            Some(handler) => handler.produce(cx, out),
            None => Produce::End(0),
        }
    }

    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        match self.owner(cx.exchange()) {
            Some(handler) => handler.resume(cx, res),
            None => res.error(500),
        }
    }

    fn cancel(&mut self, exchange: Exchange) {
        if let Some(handler) = self.owner(exchange) {
            handler.cancel(exchange);
        }
        self.owners.remove(exchange);
    }
}

/// A handler made of a function: `handler_fn(|cx, req, res| res.text(200,
/// "hi"))`, for routes that answer at once.
pub fn handler_fn<F>(f: F) -> FnHandler<F>
where
    F: FnMut(&mut Context<'_>, &Request<'_>, Response<'_>) -> Reply,
{
    FnHandler(f)
}

/// See [`handler_fn`].
pub struct FnHandler<F>(F);

impl<F> Handler for FnHandler<F>
where
    F: FnMut(&mut Context<'_>, &Request<'_>, Response<'_>) -> Reply,
{
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        (self.0)(cx, req, res)
    }
}
