//! HTTP/2 against a server, from Python's `h2` package (PyPI; `cargo xtask
//! test` installs it): what a client does ([`check_http2`]: multiplexed
//! requests to the built-in endpoints and a `Handler`'s streams, deferred
//! answers and bodies both ways, over TLS by ALPN or in clear text with
//! prior knowledge), and what an attacker does ([`check_http2_defences`]:
//! rapid reset, a CONTINUATION flood, SETTINGS and PING floods, an HPACK
//! bomb, more streams than allowed), each followed by a client that must
//! still be served.

use std::path::Path;
use std::time::Duration;

use crate::platform::Target;

/// What every HTTP/2 script starts with: a client on `h2`'s state machine
/// (flow control handled), and raw frames for the attacks.
const PRELUDE: &str = r#"
import hashlib, socket, ssl, struct, sys, time
import h2.config, h2.connection, h2.events, h2.exceptions, hpack
HOST, PORT = sys.argv[1], int(sys.argv[2])
CA = sys.argv[3] if sys.argv[3] != "-" else None
ARGS = sys.argv[4:]
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

def connect(timeout=30):
    s = socket.create_connection((HOST, PORT), timeout=timeout)
    if CA:
        ctx = ssl.create_default_context(cafile=CA)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
        if s.selected_alpn_protocol() != "h2":
            sys.exit(f"ALPN chose {s.selected_alpn_protocol()!r}, not h2")
    return s

def pattern(n):
    return bytes(i % 251 for i in range(n))

def expect(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")

class Client:
    """One HTTP/2 connection; requests run concurrently on it."""
    def __init__(self):
        self.s = connect()
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.c.initiate_connection()
        self.c.increment_flow_control_window(16 << 20)
        self.s.sendall(self.c.data_to_send())
        self.streams = {}
        self.bodies = {}
    def start(self, method, path, body=None, headers=(), length=True):
        sid = self.c.get_next_available_stream_id()
        h = [(":method", method), (":path", path), (":scheme", "https" if CA else "http"), (":authority", "localhost")]
        if body is not None and length:
            h.append(("content-length", str(len(body))))
        h += list(headers)
        self.c.send_headers(sid, h, end_stream=body is None)
        self.streams[sid] = {"status": None, "headers": {}, "data": b"", "ended": False, "reset": None, "at": None}
        if body is not None:
            self.bodies[sid] = body
        self.pump()
        return sid
    def pump(self):
        for sid, body in list(self.bodies.items()):
            room = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            while body and room > 0:
                n = min(room, len(body))
                self.c.send_data(sid, body[:n]); body = body[n:]
                room = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            if body:
                self.bodies[sid] = body
            else:
                self.c.end_stream(sid); del self.bodies[sid]
        self.s.sendall(self.c.data_to_send())
    def wait(self, sids, timeout=60):
        end = time.monotonic() + timeout
        while not all(self.streams[i]["ended"] or self.streams[i]["reset"] is not None for i in sids):
            if time.monotonic() > end:
                sys.exit(f"streams {sids} not done in {timeout} s")
            data = self.s.recv(1 << 16)
            if not data:
                sys.exit("the server closed the connection")
            for e in self.c.receive_data(data):
                st = self.streams.get(getattr(e, "stream_id", None))
                if isinstance(e, h2.events.ResponseReceived):
                    st["headers"] = dict(e.headers); st["status"] = int(st["headers"][":status"])
                elif isinstance(e, h2.events.DataReceived):
                    st["data"] += e.data
                    self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                elif isinstance(e, h2.events.StreamEnded):
                    st["ended"] = True; st["at"] = time.monotonic()
                elif isinstance(e, h2.events.StreamReset):
                    st["reset"] = e.error_code
                elif isinstance(e, h2.events.ConnectionTerminated):
                    sys.exit(f"GOAWAY {e.error_code} {e.additional_data!r}")
            self.pump()
        return [self.streams[i] for i in sids]
    def get(self, path, **kw):
        return self.wait([self.start("GET", path, **kw)])[0]

def frame(kind, flags, sid, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload

HEADERS, DATA, RST, SETTINGS, PING, GOAWAY, CONTINUATION = 1, 0, 3, 4, 6, 7, 9

class Raw:
    """Frames by hand, for what no client library sends."""
    def __init__(self):
        self.s = connect(10)
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.buf = b""
        self.enc = hpack.Encoder()
    def block(self, path="/plaintext", extra=(), method="GET"):
        scheme = "https" if CA else "http"
        return self.enc.encode([(":method", method), (":path", path), (":scheme", scheme), (":authority", "localhost")] + list(extra))
    def send(self, data):
        try:
            self.s.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return False
    def frames(self, seconds):
        """What the server sends within `seconds`, or until it closes: (kind, flags, stream, payload); ("closed",) last if it closed."""
        end = time.monotonic() + seconds
        out = []
        self.s.settimeout(0.2)
        while time.monotonic() < end:
            try:
                data = self.s.recv(1 << 16)
            except socket.timeout:
                continue
            except (ConnectionResetError, ssl.SSLError):
                out.append(("closed",)); break
            if not data:
                out.append(("closed",)); break
            self.buf += data
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                f = (self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF, self.buf[9:9 + n])
                self.buf = self.buf[9 + n:]
                out.append(f)
                if f[0] == SETTINGS and not f[1] & 1:
                    self.send(frame(SETTINGS, 1, 0))
        return out

def goaway(frames):
    """The error code of the server's GOAWAY, if it sent one."""
    for f in frames:
        if f[0] == GOAWAY:
            return int.from_bytes(f[3][4:8], "big")
    return None

def resets(frames):
    return {f[2]: int.from_bytes(f[3], "big") for f in frames if f[0] == RST}

def still_served(what):
    st = Client().get("/plaintext")
    expect(f"a client after {what}", (st["status"], st["data"]), (200, b"Hello, World!"))
"#;

/// Runs the prelude and `body` against `target`, over TLS (ALPN `h2`) when
/// `ca` (the server certificate's issuer) is given, else in clear text
/// with prior knowledge. Its standard output, or why it failed.
fn python(target: &Target, ca: Option<&Path>, body: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let ca = ca.map_or_else(|| "-".to_owned(), |p| p.display().to_string());
    let mut all = vec![ca.as_str()];
    all.extend_from_slice(args);
    target.python(&format!("{PRELUDE}\n{body}"), &all, timeout)
}

/// A client's HTTP/2 against a server running the platform tests' handler
/// app (fairway_tests::apps::handler_app, which mounts the built-in
/// endpoints): on one connection, at once, the built-in endpoints (`HEAD`,
/// `Range` and a 404 among them), a streamed download, uploads with and
/// without a declared length, an echo and its limit, a deferred answer that
/// does not hold the others back, one woken from another thread, the
/// response timeout, a handler's panic (a 500, and the connection goes
/// on), a header list over the limit, and a hundred concurrent downloads.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_http2(target: &Target, ca: Option<&Path>, response_timeout: Duration) {
    const CHECKS: &str = r#"
timeout_s = float(ARGS[0])
c = Client()
later = c.start("GET", "/later?ms=300")
plain = c.start("GET", "/plaintext")
json_ = c.start("GET", "/json")
head = c.start("HEAD", "/json")
bytes_ = c.start("GET", "/bytes/100000")
ranged = c.start("GET", "/bytes/1000", headers=[("range", "bytes=10-19")])
nope = c.start("GET", "/nope")
stream = c.start("GET", "/stream?n=3000000")
up = bytes((i * 7) % 256 for i in range(5000000))
sink = c.start("POST", "/sink", up)
sink2 = c.start("POST", "/sink", up[:1234567], length=False)
echo = c.start("POST", "/echo", bytes(range(256)) * 40)
big_echo = c.start("POST", "/echo", b"x" * 70000)
woken = c.start("GET", "/woken?ms=100")
got = dict(zip(["plain", "json", "head", "bytes", "ranged", "nope"], c.wait([plain, json_, head, bytes_, ranged, nope])))
expect("plaintext", (got["plain"]["status"], got["plain"]["data"], got["plain"]["headers"].get("server")), (200, b"Hello, World!", "fairway"))
expect("json", (got["json"]["status"], got["json"]["data"]), (200, b'{"message":"Hello, World!"}'))
expect("head", (got["head"]["status"], got["head"]["headers"].get("content-length"), got["head"]["data"]), (200, "27", b""))
expect("bytes", (got["bytes"]["status"], hashlib.sha256(got["bytes"]["data"]).hexdigest()), (200, hashlib.sha256(pattern(100000)).hexdigest()))
expect("range", (got["ranged"]["status"], got["ranged"]["data"]), (206, pattern(1000)[10:20]))
expect("404", got["nope"]["status"], 404)
if any(h in r["headers"] for r in got.values() for h in ("connection", "transfer-encoding", "keep-alive")):
    sys.exit(f"a connection-specific header in an HTTP/2 response: {got}")
s, k, e, be, w, l = c.wait([stream, sink, echo, big_echo, woken, later])
expect("stream", (s["status"], len(s["data"]), hashlib.sha256(s["data"]).hexdigest()), (200, 3000000, hashlib.sha256(pattern(3000000)).hexdigest()))
expect("sink", (k["status"], k["data"].decode()), (200, f"5000000 {hashlib.sha256(up).hexdigest()}\n"))
k2 = c.wait([sink2])[0]
expect("sink without a length", (k2["status"], k2["data"].decode()), (200, f"1234567 {hashlib.sha256(up[:1234567]).hexdigest()}\n"))
expect("echo", (e["status"], e["data"]), (200, bytes(range(256)) * 40))
expect("echo over its limit", be["status"], 413)
expect("woken", (w["status"], w["data"]), (200, b"woken\n"))
expect("later", (l["status"], l["data"]), (200, b"waited 300 ms\n"))
if not l["at"] > c.streams[plain]["at"]:
    sys.exit("the deferred answer held back the plaintext one on its connection")
t = time.monotonic(); st = c.get("/never"); took = time.monotonic() - t
expect("never", st["status"], 503)
if not timeout_s * 0.9 <= took < timeout_s + 5: sys.exit(f"the response timeout of {timeout_s} s came after {took:.3f} s")
expect("a handler's panic", c.get("/panic")["status"], 500)
expect("the same connection after it", c.get("/plaintext")["data"], b"Hello, World!")
big = c.get("/plaintext", headers=[("x-big", "a" * 20000)])
if big["status"] != 431 and big["reset"] is None:
    sys.exit(f"a header list over the limit was answered {big['status']}")
many = [c.start("GET", "/bytes/10000") for _ in range(100)]
for r in c.wait(many):
    expect("one of a hundred", (r["status"], r["data"]), (200, pattern(10000)))
print("checked")
"#;
    let secs = response_timeout.as_secs_f64().to_string();
    let out =
        python(target, ca, CHECKS, &[&secs], Duration::from_secs(180)).unwrap_or_else(|e| panic!("HTTP/2 checks: {e}"));
    assert_eq!(out.trim(), "checked", "HTTP/2 checks ended early: {out}");
}

/// HTTP/2's own attacks, each on a connection of its own, each followed by a
/// well-behaved client that must be served: rapid reset (10,000 streams
/// opened and reset at once: a GOAWAY, ENHANCE_YOUR_CALM, long before they
/// are all processed), a CONTINUATION flood (a header block that never
/// ends: the connection closed within a few megabytes), SETTINGS and PING
/// floods (100,000 each, sent without reading: answered or not, the server
/// keeps its memory), an HPACK bomb (a 4 KB header referenced a thousand
/// times: that stream refused, the one beside it answered), and more
/// streams than `max_streams` (the ones beyond refused with
/// REFUSED_STREAM, the others answered).
///
/// # Panics
///
/// When the server falls for one.
pub fn check_http2_defences(target: &Target, ca: Option<&Path>, max_streams: u32) {
    const ATTACKS: &str = r#"
max_streams = int(ARGS[0])
# Rapid reset (CVE-2023-44487).
r = Raw()
burst = b"".join(frame(HEADERS, 0x4, 1 + 2 * i, r.block()) + frame(RST, 0, 1 + 2 * i, (8).to_bytes(4, "big")) for i in range(10000))
r.send(burst)
fr = r.frames(5)
expect("rapid reset: GOAWAY", goaway(fr), 11)
answered = sum(1 for f in fr if f[0] == HEADERS)
if answered > 1000: sys.exit(f"rapid reset: {answered} of 10,000 reset streams answered before the GOAWAY")
still_served("a rapid reset")
# A CONTINUATION flood (CVE-2024-27316): a header block that never ends.
r = Raw()
r.send(frame(HEADERS, 0, 1, r.block()))
piece = r.enc.encode([("x-junk", "y" * 100)])
sent = 0
while sent < 100000 and r.send(frame(CONTINUATION, 0, 1, piece)):
    sent += 1
fr = r.frames(3)
if not (fr and fr[-1] == ("closed",)) and goaway(fr) is None:
    sys.exit(f"a CONTINUATION flood of {sent} frames: the connection goes on")
if sent * len(piece) > 16 << 20: sys.exit(f"a CONTINUATION flood: {sent} frames taken before the end")
still_served("a CONTINUATION flood")
# SETTINGS and PING floods, sent without reading the answers.
for kind, payload in ((SETTINGS, b""), (PING, b"12345678")):
    r = Raw()
    r.s.settimeout(10)
    flood = frame(kind, 0, 0, payload) * 1000
    for _ in range(100):
        if not r.send(flood):
            break
    still_served(f"a flood of frames of type {kind}")
    r.s.close()
# An HPACK bomb: a 1 KB header put in the dynamic table, then a thousand
# references to it in the same block: 1 MB of headers from 2 KB.
r = Raw()
block = r.block() + r.enc.encode([("bomb", "x" * 1000)])
newest = 62
r.send(frame(HEADERS, 0x5, 1, block + bytes([0x80 | newest]) * 1000))
r.send(frame(HEADERS, 0x5, 3, r.block()))
fr = r.frames(3)
heads = {f[2] for f in fr if f[0] == HEADERS}
if 1 in heads: sys.exit("an HPACK bomb of 1 MB of headers was answered")
if 3 not in heads and goaway(fr) is None: sys.exit(f"after an HPACK bomb the stream beside it got nothing: {fr[:5]}")
still_served("an HPACK bomb")
# More streams than allowed: uploads whose bodies never come hold theirs open.
r = Raw()
r.frames(0.5)
r.send(b"".join(frame(HEADERS, 0x4, 1 + 2 * i, r.block("/sink", method="POST")) for i in range(max_streams + 50)))
fr = r.frames(3)
refused = [sid for sid, code in resets(fr).items() if code == 7]
expect("streams beyond the limit refused", len(refused), 50)
if goaway(fr) is not None: sys.exit(f"GOAWAY {goaway(fr)} for too many streams, not REFUSED_STREAM")
still_served("too many streams")
print("defended")
"#;
    let streams = max_streams.to_string();
    let out = python(target, ca, ATTACKS, &[&streams], Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("HTTP/2 attacks: {e}"));
    assert_eq!(out.trim(), "defended", "HTTP/2 attacks ended early: {out}");
}
