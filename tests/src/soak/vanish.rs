//! A client that vanishes: it stops mid-exchange and never sends anything
//! again, as a host that lost power or left the network would.
//!
//! Killing a process is not enough for that: its kernel closes the sockets
//! and sends FIN or RST, and answers whatever the server sends later with
//! RST. So the vanishing client gets an address of its own in a load
//! client's namespace (`/32` beside the namespace's own, a fresh one each
//! time), opens its connections from it, and leaves them mid-exchange;
//! then the address is deleted and the sockets closed, as kill -9 would
//! close them. Without the address, the kernel can route nothing from it
//! (the FIN or RST of the close never leaves) and drops what arrives for it
//! without a word (it is no longer local, and the namespace does not
//! forward). The server is left with connections to a peer that is gone,
//! in every state a client can leave one in:
//!
//! - a 48 MiB download the client never read: the server's data waits on a
//!   zero window;
//! - an answered keep-alive request, its answer unread: then idle;
//! - an upload whose body stopped after 1000 of 100 000 bytes;
//! - a request head cut in the middle;
//! - eight pipelined 100 kB downloads, unread.
//!
//! Each must be cleared by a server timeout (user timeout, idle, body,
//! header), which the end of the soak checks through the connection
//! counts.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use super::http::{Conn, get};
use super::load::{CONNECT_TIMEOUT, IO_TIMEOUT};
use crate::testbed::{self, CLIENT_IF, Testbed};

/// How long the connections get to reach their states (answers in flight,
/// windows filled) before the client vanishes.
const SETTLE: Duration = Duration::from_millis(500);

/// Makes a client vanish from `tb`'s client `client` at address `alias`:
/// returns how many connections it left behind.
///
/// # Errors
///
/// When the address cannot be added or deleted, or a connection cannot be
/// opened (the address is deleted all the same).
pub fn vanish(tb: &Testbed, client: usize, alias: Ipv4Addr, server: SocketAddrV4) -> Result<usize, String> {
    let ns = tb.client_ns(client);
    let address = format!("{alias}/32");
    testbed::exec(&ns, &["ip", "addr", "add", &address, "dev", CLIENT_IF])
        .and_then(|out| out.checked_as("adding the vanishing client's address"))
        .map_err(|e| e.to_string())?;
    let opened = testbed::in_netns(&ns, || open(alias, server)).map_err(|e| e.to_string());
    std::thread::sleep(SETTLE);
    // First the address, then the sockets: their FIN or RST has no route.
    let deleted = testbed::exec(&ns, &["ip", "addr", "del", &address, "dev", CLIENT_IF])
        .and_then(|out| out.checked_as("deleting the vanishing client's address"))
        .map_err(|e| e.to_string());
    let conns = opened??;
    deleted?;
    let left = conns.len();
    drop(conns);
    Ok(left)
}

/// The connections, from `alias`, each left in its state.
fn open(alias: Ipv4Addr, server: SocketAddrV4) -> Result<Vec<Conn>, String> {
    let connect = || Conn::connect(server, Some(alias), CONNECT_TIMEOUT, IO_TIMEOUT).map_err(|e| format!("{e:?}"));
    let send = |conn: &mut Conn, bytes: &[u8]| conn.send(bytes).map_err(|e| format!("{e:?}"));
    let mut conns = Vec::new();

    let mut download = connect()?;
    send(&mut download, &get("/bytes/50331648", false, ""))?;
    conns.push(download);

    let mut idle = connect()?;
    send(&mut idle, &get("/plaintext", false, ""))?;
    conns.push(idle);

    let mut upload = connect()?;
    let mut head = b"POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: 100000\r\n\r\n".to_vec();
    head.extend_from_slice(&[b'u'; 1000]);
    send(&mut upload, &head)?;
    conns.push(upload);

    let mut half = connect()?;
    send(&mut half, b"GET /plaintext HTTP/1.1\r\nHost: fair")?;
    conns.push(half);

    let mut pipelined = connect()?;
    let batch: Vec<u8> = (0..8).flat_map(|_| get("/bytes/100000", false, "")).collect();
    send(&mut pipelined, &batch)?;
    conns.push(pipelined);
    Ok(conns)
}
