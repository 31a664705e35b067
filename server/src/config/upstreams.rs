//! The reverse proxy's settings: upstream groups (`--upstream NAME=URL`,
//! the file's `[upstream.NAME]` tables) and the routes that send requests
//! to them (`--route [HOST]/PREFIX=NAME`, the file's `[[route]]` tables),
//! as given ([`UpstreamSpec`], [`RouteSpec`]) and resolved
//! ([`ProxyConfig`]).

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

use super::Span;

/// How a group spreads requests over its servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Each in turn.
    #[default]
    RoundRobin,
    /// The one with the fewest requests in progress from this shard (ties:
    /// in turn).
    LeastConnections,
}

/// One group's settings as the file gives them; on the command line,
/// `--upstream NAME=URL` gives one server and nothing else.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GroupOptions {
    /// `http://HOST[:PORT]` URLs.
    #[serde(default, deserialize_with = "super::one_or_many")]
    pub servers: Vec<String>,
    /// [default: round-robin]
    pub balance: Option<Balance>,
    /// Time to establish a connection (504 beyond) [default: 5s].
    pub connect_timeout: Option<Span>,
    /// Time from the request's last byte to the response's first (504
    /// beyond) [default: 20s].
    pub first_byte_timeout: Option<Span>,
    /// Longest pause in a response being received (cut beyond), and how
    /// long an idle pooled connection is kept [default: 60s].
    pub idle_timeout: Option<Span>,
    /// Failures within `fail-timeout` that put a server out of turn for
    /// `fail-timeout` [default: 1].
    pub max_fails: Option<u32>,
    /// [default: 10s]
    pub fail_timeout: Option<Span>,
    /// Idle keep-alive connections kept per server per shard [default: 32].
    pub keepalive: Option<usize>,
    /// A path to `GET` on each server every `health-interval`; a server
    /// that does not answer 2xx or 3xx is out of turn until it does.
    pub health_check: Option<String>,
    /// [default: 5s]
    pub health_interval: Option<Span>,
}

/// An upstream group as given: its name and what the flag or the file
/// says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The group's name, which routes refer to.
    pub name: String,
    /// Its servers and settings.
    pub options: GroupOptions,
}

impl FromStr for UpstreamSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<UpstreamSpec, String> {
        let (name, url) =
            s.split_once('=').ok_or_else(|| format!("'{s}' is not NAME=URL (e.g. app=http://127.0.0.1:8000)"))?;
        check_name(name)?;
        Ok(UpstreamSpec {
            name: name.to_owned(),
            options: GroupOptions { servers: vec![url.to_owned()], ..GroupOptions::default() },
        })
    }
}

/// The route target that means the server's own endpoints (or the
/// application's handler), not an upstream.
pub const BUILTIN: &str = "builtin";

/// Idle connections a group keeps per server per shard unless its
/// `keepalive` says otherwise.
pub const DEFAULT_KEEPALIVE: usize = 256;

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(format!("upstream name '{name}': letters, digits, '-' and '_' only"));
    }
    if name == BUILTIN {
        return Err(format!("upstream name '{BUILTIN}' is taken: a route to it means the server's own endpoints"));
    }
    Ok(())
}

/// The file's `[upstream.NAME]` tables (or a list of `"NAME=URL"`).
pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<UpstreamSpec>, D::Error> {
    struct TableOrList;

    impl<'de> Visitor<'de> for TableOrList {
        type Value = Vec<UpstreamSpec>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("[upstream.NAME] tables (servers = [\"http://HOST:PORT\"], ...) or a list of \"NAME=URL\"")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<UpstreamSpec>, A::Error> {
            let mut specs = Vec::new();
            while let Some((name, options)) = map.next_entry::<String, GroupOptions>()? {
                check_name(&name).map_err(A::Error::custom)?;
                specs.push(UpstreamSpec { name, options });
            }
            Ok(specs)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<UpstreamSpec>, A::Error> {
            let mut specs = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                specs.push(text.parse().map_err(A::Error::custom)?);
            }
            Ok(specs)
        }
    }

    d.deserialize_any(TableOrList)
}

/// A route as given: requests for `host` (any, when none) whose path
/// starts with `path` go to the group `upstream`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The `Host` it matches (without the port; any when absent).
    pub host: Option<String>,
    /// The path prefix it matches [default: /].
    pub path: Option<String>,
    /// The upstream group's name.
    pub upstream: String,
}

impl FromStr for RouteSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<RouteSpec, String> {
        let bad = || format!("'{s}' is not [HOST]/PREFIX=NAME (e.g. /api/=app or example.com/=web)");
        let (left, upstream) = s.rsplit_once('=').ok_or_else(bad)?;
        let slash = left.find('/').ok_or_else(bad)?;
        let (host, path) = left.split_at(slash);
        Ok(RouteSpec {
            host: (!host.is_empty()).then(|| host.to_owned()),
            path: Some(path.to_owned()),
            upstream: upstream.to_owned(),
        })
    }
}

/// The reverse proxy, resolved: every group with its servers' addresses,
/// and the routes, most specific first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyConfig {
    /// The upstream groups.
    pub groups: Vec<UpstreamGroup>,
    /// The routes: those for a host before those for any, longer prefixes
    /// before shorter. A request no route matches gets the built-in
    /// endpoints.
    pub routes: Vec<Route>,
}

/// An upstream group, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamGroup {
    /// Its name.
    pub name: String,
    /// Its servers.
    pub servers: Vec<UpstreamServer>,
    /// How requests are spread over them.
    pub balance: Balance,
    /// Time to connect.
    pub connect_timeout: Duration,
    /// Time from the request's end to the response's first byte.
    pub first_byte_timeout: Duration,
    /// Longest pause within a response; an idle pooled connection's life.
    pub idle_timeout: Duration,
    /// Failures within `fail_timeout` that take a server out of turn.
    pub max_fails: u32,
    /// How long failures count, and how long a server stays out.
    pub fail_timeout: Duration,
    /// Idle connections kept per server per shard ([`DEFAULT_KEEPALIVE`]).
    pub keepalive: usize,
    /// The active health check, if any: path and interval.
    pub health: Option<(String, Duration)>,
}

/// One upstream server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamServer {
    /// As configured, for log lines.
    pub url: String,
    /// Where it is connected to.
    pub addr: SocketAddr,
}

/// A route, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The host it matches, lower case; any when `None`.
    pub host: Option<String>,
    /// The path prefix it matches.
    pub prefix: String,
    /// The group, by index in [`ProxyConfig::groups`]; `None`: the
    /// server's own endpoints (a route to `builtin`).
    pub group: Option<usize>,
}

impl ProxyConfig {
    /// The group a request for `host` (its `Host` header, port and all)
    /// and `path` goes to, if any route matches.
    #[must_use]
    pub fn route(&self, host: Option<&[u8]>, path: &str) -> Option<usize> {
        let host = host.map(|h| {
            // Drop the port (an IPv6 literal keeps its brackets' colons).
            match h.iter().rposition(|&b| b == b':') {
                Some(i) if !h[i..].contains(&b']') => &h[..i],
                _ => h,
            }
        });
        self.routes
            .iter()
            .find(|r| {
                let host_ok = match (&r.host, host) {
                    (None, _) => true,
                    (Some(want), Some(have)) => want.as_bytes().eq_ignore_ascii_case(have),
                    (Some(_), None) => false,
                };
                host_ok && path.starts_with(&r.prefix)
            })
            .and_then(|r| r.group)
    }
}

/// Resolves the groups and routes given; none: no proxy. `looked` says
/// where routes were looked for (the command line, the file), for the
/// error when several groups have none.
///
/// # Errors
///
/// One line naming what is wrong: a bad URL, a name that does not
/// resolve, a route to no group, several groups and no route.
pub(super) fn resolve(
    upstreams: Vec<UpstreamSpec>,
    routes: Vec<RouteSpec>,
    response_timeout: Duration,
    looked: &str,
) -> Result<Option<ProxyConfig>, String> {
    if upstreams.is_empty() {
        if let Some(r) = routes.first() {
            return Err(format!("route to '{}': no --upstream or [upstream.NAME] is configured", r.upstream));
        }
        return Ok(None);
    }
    // One group per name, its servers in the order given.
    let mut specs: Vec<UpstreamSpec> = Vec::new();
    for spec in upstreams {
        match specs.iter_mut().find(|s| s.name == spec.name) {
            Some(s) => s.options.servers.extend(spec.options.servers),
            None => specs.push(spec),
        }
    }
    let mut groups = Vec::with_capacity(specs.len());
    for UpstreamSpec { name, options: o } in specs {
        let at = |key: &str| format!("upstream '{name}': {key}");
        if o.servers.is_empty() {
            return Err(format!("{}: give at least one server (servers = [\"http://HOST:PORT\"])", at("servers")));
        }
        let servers = o.servers.iter().map(|url| server(url).map_err(|e| at(&e))).collect::<Result<Vec<_>, _>>()?;
        let positive = |span: Option<Span>, default: u64, key: &str| {
            let d = span.map_or(Duration::from_secs(default), |s| s.0);
            if d.is_zero() { Err(format!("{} must be more than 0", at(key))) } else { Ok(d) }
        };
        let connect_timeout = positive(o.connect_timeout, 5, "connect-timeout")?;
        let first_byte_timeout = positive(o.first_byte_timeout, 20, "first-byte-timeout")?;
        if connect_timeout + first_byte_timeout >= response_timeout {
            return Err(format!(
                "{}: connect-timeout + first-byte-timeout ({:?}) must be less than --response-timeout ({:?}), \
                 which answers 503 first; raise --response-timeout",
                at("timeouts"),
                connect_timeout + first_byte_timeout,
                response_timeout
            ));
        }
        let health = match o.health_check {
            Some(path) if !path.starts_with('/') => {
                return Err(format!("{}: '{path}' is not a path (it starts with /)", at("health-check")));
            }
            Some(path) => Some((path, positive(o.health_interval, 5, "health-interval")?)),
            None => None,
        };
        groups.push(UpstreamGroup {
            name: name.clone(),
            servers,
            balance: o.balance.unwrap_or_default(),
            connect_timeout,
            first_byte_timeout,
            idle_timeout: positive(o.idle_timeout, 60, "idle-timeout")?,
            max_fails: o.max_fails.unwrap_or(1).max(1),
            fail_timeout: positive(o.fail_timeout, 10, "fail-timeout")?,
            // As many idle connections as a burst of requests from a
            // benchmark's or a busy site's 256 clients needs: with 32, under
            // 256 concurrent requests, two in three proxied requests opened a
            // new upstream connection on the kernel backend (benches/README.md,
            // 2026-12-03). Idle ones still close after idle-timeout.
            keepalive: o.keepalive.unwrap_or(DEFAULT_KEEPALIVE),
            health,
        });
    }
    let mut resolved = Vec::with_capacity(routes.len().max(1));
    for r in routes {
        let group = match groups.iter().position(|g| g.name == r.upstream) {
            Some(g) => Some(g),
            None if r.upstream == BUILTIN => None,
            None => {
                let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
                return Err(format!(
                    "route to '{}': no such upstream (there are: {}, and {BUILTIN} for the server's own)",
                    r.upstream,
                    names.join(", ")
                ));
            }
        };
        let prefix = r.path.unwrap_or_else(|| "/".to_owned());
        if !prefix.starts_with('/') {
            return Err(format!("route path '{prefix}' does not start with /"));
        }
        resolved.push(Route { host: r.host.map(|h| h.to_ascii_lowercase()), prefix, group });
    }
    if !resolved.iter().any(|r| r.group.is_some()) {
        if groups.len() > 1 {
            return Err(format!(
                "{} upstream groups and no route in {looked}: say which requests go where (--route /PREFIX=NAME, \
                 or [[route]] tables in the --config file)",
                groups.len()
            ));
        }
        resolved.push(Route { host: None, prefix: "/".to_owned(), group: Some(0) });
    }
    // Most specific first: a host's routes, then longer prefixes.
    resolved.sort_by(|a, b| b.host.is_some().cmp(&a.host.is_some()).then(b.prefix.len().cmp(&a.prefix.len())));
    Ok(Some(ProxyConfig { groups, routes: resolved }))
}

/// `http://HOST[:PORT][/]`, resolved to its first address.
fn server(url: &str) -> Result<UpstreamServer, String> {
    let rest = match url.split_once("://") {
        Some(("http", rest)) => rest,
        Some(("https", _)) => return Err(format!("'{url}': upstreams are reached over plain HTTP (no https://)")),
        _ => return Err(format!("'{url}' is not http://HOST[:PORT]")),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains('/') {
        return Err(format!("'{url}': a server is http://HOST[:PORT], without a path"));
    }
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:80")
    } else {
        authority.to_owned()
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("'{url}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{url}': the name has no address"))?;
    Ok(UpstreamServer { url: url.to_owned(), addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: Duration = Duration::from_secs(30);

    fn spec(s: &str) -> UpstreamSpec {
        s.parse().unwrap()
    }

    #[test]
    fn one_group_takes_every_request_and_servers_resolve() {
        let p = resolve(vec![spec("app=http://127.0.0.1:8000"), spec("app=http://[::1]/")], vec![], RESPONSE, "")
            .unwrap()
            .unwrap();
        let g = &p.groups[0];
        assert_eq!(g.servers[0].addr, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(g.servers[1].addr, "[::1]:80".parse().unwrap());
        assert_eq!((g.balance, g.keepalive, g.max_fails), (Balance::RoundRobin, DEFAULT_KEEPALIVE, 1));
        assert_eq!(p.route(Some(b"x"), "/anything"), Some(0));
        assert_eq!(resolve(vec![], vec![], RESPONSE, ""), Ok(None));
    }

    #[test]
    fn a_route_to_builtin_keeps_a_path_for_the_servers_own_endpoints() {
        let routes = vec!["/metrics=builtin".parse().unwrap()];
        let p = resolve(vec![spec("app=http://127.0.0.1:1")], routes, RESPONSE, "").unwrap().unwrap();
        assert_eq!((p.route(None, "/metrics"), p.route(None, "/x")), (None, Some(0)), "and / still goes to app");
    }

    #[test]
    fn routes_match_host_then_the_longest_prefix() {
        let routes = ["/=web", "/api/=api", "example.com/=site"].map(|r| r.parse().unwrap()).to_vec();
        let ups = vec![spec("web=http://127.0.0.1:1"), spec("api=http://127.0.0.1:2"), spec("site=http://127.0.0.1:3")];
        let p = resolve(ups, routes, RESPONSE, "").unwrap().unwrap();
        assert_eq!(p.route(Some(b"Example.COM:8080"), "/api/x"), Some(2), "the host's route first");
        assert_eq!(p.route(Some(b"other"), "/api/x"), Some(1));
        assert_eq!(p.route(Some(b"other"), "/apix"), Some(0));
        assert_eq!(p.route(None, "/"), Some(0));
        assert_eq!(p.route(Some(b"[::1]:80"), "/"), Some(0));
    }

    #[test]
    fn errors_say_what_is_wrong_in_one_line() {
        let err = |ups: Vec<UpstreamSpec>, routes: Vec<&str>| {
            resolve(ups, routes.into_iter().map(|r| r.parse().unwrap()).collect(), RESPONSE, "the flags").unwrap_err()
        };
        assert!(err(vec![spec("a=https://x")], vec![]).contains("plain HTTP"));
        assert!(err(vec![spec("a=http://127.0.0.1/x")], vec![]).contains("without a path"));
        assert!(err(vec![spec("a=127.0.0.1:80")], vec![]).contains("is not http://"));
        assert!(err(vec![spec("a=http://no.such.host.invalid")], vec![]).starts_with("upstream 'a': "));
        assert!(err(vec![spec("a=http://127.0.0.1"), spec("b=http://127.0.0.1")], vec![]).contains("no route"));
        assert!(err(vec![spec("a=http://127.0.0.1")], vec!["/=b"]).contains("no such upstream (there are: a, and"));
        assert!("builtin=http://127.0.0.1".parse::<UpstreamSpec>().unwrap_err().contains("is taken"));
        assert!(err(vec![], vec!["/=b"]).contains("no --upstream"));
        assert!("bad name=http://x".parse::<UpstreamSpec>().is_err());
        assert!("api=app".parse::<RouteSpec>().is_err());
        let mut slow = spec("a=http://127.0.0.1");
        slow.options.first_byte_timeout = Some(Span(Duration::from_secs(60)));
        assert!(err(vec![slow], vec![]).contains("raise --response-timeout"));
    }
}
