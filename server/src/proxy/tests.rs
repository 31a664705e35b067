//! The proxy's parts without sockets: the response heads it reads and how
//! it answers with them, and how a group picks its server.

use std::sync::Arc;

use fairway_stack::time::{Duration, Instant};

use super::forward::{BadResponse, ReadHead, ResponseBody, ResponseHead, read_response};
use super::*;
use crate::config::Config;
use crate::http::{HttpConfig, builtin};

/// Reads `input` as an upstream response head for a GET (`head_only`:
/// a HEAD) and returns what was found and, when answered, what the client
/// would be sent first.
fn read(input: &[u8], head_only: bool) -> Result<(ResponseHead, String), Option<BadResponse>> {
    let (found, out) = crate::http::test_response(|res| match read_response(input, head_only, false, res) {
        ReadHead::Answered(head, reply) => (Ok(head), Some(reply)),
        ReadHead::Incomplete(_) => (Err(None), None),
        ReadHead::Bad(bad, _) => (Err(Some(bad)), None),
    });
    found.map(|head| (head, String::from_utf8_lossy(&out).into_owned()))
}

#[test]
fn a_response_head_is_forwarded_without_its_connections_fields() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\nConnection: keep-alive, \
                  X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nServer: up\r\nDate: x\r\nVia: 1.0 edge\r\nX-End: \
                  kept\r\n\r\nhello";
    let (head, out) = read(input, false).unwrap();
    assert_eq!(head.len, input.len() - 5, "the interim 100 is skipped and counted");
    assert_eq!((head.status, head.body, head.reusable), (201, ResponseBody::Length(5), true));
    assert!(out.starts_with("HTTP/1.1 201 Created\r\n"), "{out}");
    assert!(out.contains("X-End: kept\r\n") && out.contains("Via: 1.0 edge, 1.1 fairway\r\n"), "{out}");
    assert!(out.contains("Content-Length: 5\r\n"), "{out}");
    for gone in ["X-Hop", "Keep-Alive", "Server: up", "Date: x"] {
        assert!(!out.contains(gone), "{gone} in {out}");
    }
}

#[test]
fn the_body_framing_follows_rfc_9112() {
    let framing = |input: &[u8], head_only| read(input, head_only).map(|(h, _)| (h.body, h.reusable));
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false),
        Ok((ResponseBody::Chunked, true))
    );
    // Transfer-Encoding wins over Content-Length, and the connection is
    // not trusted with another request.
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false),
        Ok((ResponseBody::Chunked, false))
    );
    assert_eq!(framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false), Ok((ResponseBody::Close, false)));
    assert_eq!(framing(b"HTTP/1.1 200 OK\r\n\r\n", false), Ok((ResponseBody::Close, false)));
    assert_eq!(framing(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false), Ok((ResponseBody::Length(1), false)));
    assert_eq!(
        framing(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n", false),
        Ok((ResponseBody::Length(1), true))
    );
    assert_eq!(
        framing(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false),
        Ok((ResponseBody::Empty, true))
    );
    assert_eq!(framing(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true), Ok((ResponseBody::Empty, true)));
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\n", false),
        Ok((ResponseBody::Length(9), false))
    );
}

#[test]
fn what_cannot_be_forwarded_is_refused_and_a_partial_head_waits() {
    let bad = |input: &[u8]| read(input, false).map(|_| ()).unwrap_err();
    assert_eq!(bad(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"), Some(BadResponse::Length));
    assert_eq!(bad(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), Some(BadResponse::Length));
    assert_eq!(bad(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"), Some(BadResponse::Switch));
    assert_eq!(bad(b"SSH-2.0-OpenSSH\r\n\r\n"), Some(BadResponse::Malformed));
    assert_eq!(bad(b"HTTP/1.1 200 OK\r\nContent-Le"), None, "incomplete: wait for more");
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..200 {
        many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(bad(&many), Some(BadResponse::TooLarge));
    // Two identical lengths are one length.
    assert!(read(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", false).is_ok());
}

fn proxy(flags: &[&str]) -> Proxy {
    let config = Config::load(std::iter::once("fairway").chain(flags.iter().copied()), None).unwrap();
    Proxy::new(Arc::clone(config.proxy.as_ref().unwrap()), Box::new(builtin(&HttpConfig::default())), None)
}

#[test]
fn a_group_picks_in_turn_or_the_least_busy_and_skips_servers_out_of_turn() {
    let now = Instant::from_secs(1);
    let servers = ["--upstream", "a=http://127.0.0.1:1", "--upstream", "a=http://127.0.0.1:2"];
    let mut rr = proxy(&[&servers[..], &["--upstream", "a=http://127.0.0.1:3"]].concat());
    assert_eq!((0..6).map(|_| rr.pick(0, now)).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2]);
    rr.groups[0].servers[1].down_until = Some(now + Duration::from_secs(10));
    assert_eq!((0..4).map(|_| rr.pick(0, now)).collect::<Vec<_>>(), [0, 2, 0, 2], "1 is out of turn");
    let later = now + Duration::from_secs(10);
    assert_eq!((0..3).map(|_| rr.pick(0, later)).collect::<Vec<_>>(), [0, 1, 2], "and back");
    for s in 0..3 {
        rr.groups[0].servers[s].down_until = Some(later + Duration::from_secs(1));
    }
    assert_eq!((0..3).map(|_| rr.pick(0, later)).collect::<Vec<_>>(), [0, 1, 2], "all out: tried anyway, in turn");

    let dir = std::env::temp_dir().join(format!("fairway-least-{}.toml", std::process::id()));
    let text =
        "[upstream.a]\nservers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\"]\nbalance = \"least-connections\"\n";
    std::fs::write(&dir, text).unwrap();
    let mut least = proxy(&["--config", dir.to_str().unwrap()]);
    let _ = std::fs::remove_file(&dir);
    least.groups[0].servers[0].active = 5;
    assert_eq!((0..3).map(|_| least.pick(0, now)).collect::<Vec<_>>(), [1, 1, 1], "the least busy");
    least.groups[0].servers[1].active = 5;
    assert_eq!((0..4).map(|_| least.pick(0, now)).collect::<Vec<_>>(), [0, 1, 0, 1], "ties in turn");
    assert_eq!(least.pick_except(0, now, 0), 1);
}
