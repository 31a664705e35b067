//! HTTPS end to end on the kernel backend: the real `fairway` binary with
//! `--tls-cert`/`--tls-key` on 127.0.0.1, driven by curl, Python's `ssl`
//! and `http.client`, and `openssl s_client`. Certificates are made per
//! test: ECDSA with rcgen, RSA with the `openssl` tool.
//!
//! Needs `curl`, `python3` and `openssl` on the PATH; `cargo xtask test`
//! installs them.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use fairway::http::pattern_byte;
use sha2::{Digest, Sha256};
use support::{FairwayProcess, TempDir};

/// Runs a tool that the test needs, with a clear failure if it is missing.
#[track_caller]
fn run(program: &str, args: &[&str], stdin: &[u8]) -> Output {
    let child =
        Command::new(program).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("`{program}` is not installed; run the tests through `cargo xtask test`, which installs it")
        }
        Err(e) => panic!("cannot run {program}: {e}"),
    };
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// A self-signed certificate for `localhost` and its key, in `dir`:
/// ECDSA P-256 (rcgen), or RSA 2048 (the openssl tool).
fn certificate(dir: &TempDir, name: &str, rsa: bool) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.path(&format!("{name}.crt")), dir.path(&format!("{name}.key")));
    if rsa {
        let out = run(
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost",
                "-keyout",
                key.to_str().unwrap(),
                "-out",
                cert.to_str().unwrap(),
            ],
            b"",
        );
        assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    } else {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    }
    (cert, key)
}

/// `fairway` serving plain HTTP and HTTPS with `cert` and `key`, plus `extra`.
fn start(cert: &Path, key: &Path, extra: &[&str]) -> FairwayProcess {
    let flags = [
        &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap(), "--tls-listen", "127.0.0.1:0"],
        extra,
    ]
    .concat();
    FairwayProcess::start(&flags)
}

/// `curl` over HTTPS to `path` on `server`, trusting `cert` for
/// `localhost`: its output.
#[track_caller]
fn curl(server: &FairwayProcess, cert: &Path, path: &str, args: &[&str]) -> Output {
    let port = server.tls_addr.expect("an HTTPS address").port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = format!("https://localhost:{port}{path}");
    let base = ["-sS", "--max-time", "60", "--cacert", cert.to_str().unwrap(), "--resolve", &resolve];
    run("curl", &[&base[..], args, &[&url]].concat(), b"")
}

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn curl_gets_and_uploads_over_tls_1_3_and_1_2_with_alpn_and_the_plain_port_goes_on() {
    let dir = TempDir::new("curl");
    for rsa in [false, true] {
        let (cert, key) = certificate(&dir, if rsa { "rsa" } else { "ecdsa" }, rsa);
        let server = start(&cert, &key, &[]);
        for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"]] {
            // curl offers h2 and http/1.1; the server picks h2 first, and
            // http/1.1 when that is all the client offers.
            for (alpn, protocol) in [(&[][..], "h2"), (&["--http1.1"][..], "http/1.1")] {
                let out = curl(&server, &cert, "/plaintext", &[version, alpn, &["-v"]].concat());
                let log = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "rsa={rsa} {version:?} {alpn:?}: {log}");
                assert_eq!(out.stdout, b"Hello, World!");
                assert!(log.contains(&format!("ALPN: server accepted {protocol}")), "{log}");
                let want = if version.len() == 1 { "TLSv1.3" } else { "TLSv1.2" };
                assert!(log.contains(want), "{want}: {log}");
            }
        }
        // An upload, its SHA-256 as the server computed it, over HTTP/2 and
        // over HTTP/1.1.
        let data: Vec<u8> = (0..3_000_017u64).map(|i| (i * 7 % 251) as u8).collect();
        let file = dir.path("upload.bin");
        std::fs::write(&file, &data).unwrap();
        let at = format!("@{}", file.display());
        for alpn in ["--http2", "--http1.1"] {
            let out = curl(&server, &cert, "/upload", &[alpn, "--data-binary", &at]);
            assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{} {}\n", data.len(), sha_hex(&data)), "{alpn}");
        }
        // The plain port beside it.
        let plain = run("curl", &["-sS", &server.url("/plaintext")], b"");
        assert_eq!(plain.stdout, b"Hello, World!");
        let handshakes = server.wait_total("fairway_tls_handshakes_total", 6.0);
        assert!(handshakes >= 6.0, "{handshakes} handshakes counted");
    }
}

#[test]
fn a_gigabyte_over_tls_arrives_byte_exact() {
    let dir = TempDir::new("gigabyte");
    let (cert, key) = certificate(&dir, "ecdsa", false);
    let server = start(&cert, &key, &[]);
    let n: u64 = 1_000_000_000;
    let port = server.tls_addr.unwrap().port();
    let mut child = Command::new("curl")
        .args(["-sS", "--max-time", "300", "--cacert", cert.to_str().unwrap()])
        .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
        .arg(format!("https://localhost:{port}/bytes/{n}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("curl is installed");
    let mut stdout = child.stdout.take().unwrap();
    let (mut got, mut buf, mut at) = (Sha256::new(), vec![0u8; 1 << 20], 0u64);
    let mut want = Sha256::new();
    let mut expected = vec![0u8; 1 << 20];
    loop {
        let k = stdout.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        got.update(&buf[..k]);
        for (i, b) in expected[..k].iter_mut().enumerate() {
            *b = pattern_byte(at + i as u64);
        }
        want.update(&expected[..k]);
        at += k as u64;
    }
    assert!(child.wait().unwrap().success());
    assert_eq!(at, n, "the whole body");
    assert_eq!(got.finalize(), want.finalize(), "byte-exact");
}

/// Python's client (keep-alive, an upload, ALPN, resumption per version).
const PYTHON_CLIENT: &str = include_str!("support/tls_client.py");

#[test]
fn python_keeps_the_connection_alive_and_resumes_its_session() {
    let dir = TempDir::new("python");
    let (cert, key) = certificate(&dir, "ecdsa", false);
    let server = start(&cert, &key, &[]);
    let port = server.tls_addr.unwrap().port().to_string();
    let out = run("python3", &["-c", PYTHON_CLIENT, "127.0.0.1", &port, cert.to_str().unwrap()], b"");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("TLSv1_3 resumed") && said.contains("TLSv1_2 resumed"), "{said}");
    let resumed = server.wait_total("fairway_tls_resumed_total", 2.0);
    assert!(resumed >= 2.0, "{resumed} resumptions counted");
}

/// `openssl s_client` to `connect` with `args`, sending a GET that closes
/// the connection: what it printed.
fn s_client(connect: &str, cert: &Path, args: &[&str]) -> String {
    let base = ["s_client", "-connect", connect, "-servername", "localhost", "-CAfile", cert.to_str().unwrap()];
    let request = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let out = run("openssl", &[&base[..], &["-alpn", "http/1.1", "-ign_eof"], args].concat(), request);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn openssl_s_client_negotiates_alpn_and_resumes_its_session() {
    let dir = TempDir::new("openssl");
    let (cert, key) = certificate(&dir, "rsa", true);
    let server = start(&cert, &key, &[]);
    let connect = server.tls_addr.unwrap().to_string();
    for version in ["-tls1_3", "-tls1_2"] {
        // The first connection reads the response, and with it the
        // tickets TLS 1.3 sends after the handshake (s_client -reconnect
        // would drop it before they come).
        let session = dir.path(&format!("session{version}"));
        let session = session.to_str().unwrap();
        let said = s_client(&connect, &cert, &[version, "-sess_out", session]);
        assert!(said.contains("ALPN protocol: http/1.1"), "{version}: {said}");
        assert!(said.contains("Verify return code: 0 (ok)"), "{version}: {said}");
        assert!(said.contains("New, TLSv1") && said.contains("Hello, World!"), "{version}: {said}");
        let again = s_client(&connect, &cert, &[version, "-sess_in", session]);
        assert!(again.contains("Reused, TLSv1"), "{version}: the session resumed: {again}");
        assert!(again.contains("Hello, World!"), "{version}: {again}");
    }
}

#[test]
fn garbage_and_a_truncated_client_hello_get_an_alert_and_a_close_and_the_server_goes_on() {
    let dir = TempDir::new("garbage");
    let (cert, key) = certificate(&dir, "ecdsa", false);
    let server = start(&cert, &key, &[]);
    let tls = server.tls_addr.unwrap();
    // Plain HTTP to the TLS port: an alert record, then the end.
    let mut s = TcpStream::connect(tls).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert_eq!(reply.first(), Some(&21), "an alert record: {reply:?}");
    // A ClientHello's first bytes (a handshake record announcing more),
    // then the FIN: the server closes.
    let mut s = TcpStream::connect(tls).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[22, 3, 1, 0, 200, 1, 0, 0, 196, 3, 3]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let ended = s.read_to_end(&mut rest);
    assert!(ended.is_ok() || ended.is_err_and(|e| e.kind() == ErrorKind::ConnectionReset), "ended");
    // An oversized handshake message: refused with an alert.
    let mut s = TcpStream::connect(tls).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut record = vec![22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff];
    record.resize(5 + 0x4000, 0);
    let _ = s.write_all(&record);
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    assert_eq!(reply.first(), Some(&21), "an alert for the oversized message: {reply:?}");
    // A TLS 1.2 client asking to renegotiate: refused with an alert
    // (no_renegotiation), which openssl reports.
    let base = ["s_client", "-connect", &tls.to_string(), "-servername", "localhost", "-tls1_2"];
    let out = run("openssl", &base, b"R\n");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("RENEGOTIATING") && said.contains("no renegotiation"), "{said}");
    // And a real client is served.
    let out = curl(&server, &cert, "/plaintext", &[]);
    assert_eq!(out.stdout, b"Hello, World!", "{}", String::from_utf8_lossy(&out.stderr));
    let errors = server.wait_total("fairway_tls_errors_total", 2.0);
    assert!(errors >= 2.0, "{errors} TLS errors counted");
}

#[test]
fn a_mismatched_key_stops_the_start_with_one_clear_line() {
    let dir = TempDir::new("mismatch");
    let (cert, _) = certificate(&dir, "one", false);
    let (_, other_key) = certificate(&dir, "two", false);
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["--backend", "kernel", "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0"])
        .args(["--tls-cert", cert.to_str().unwrap(), "--tls-key", other_key.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("is not the key of the certificate"), "{said}");
    let out = Command::new(env!("CARGO_BIN_EXE_fairway")).args(["--tls-cert", "x.pem"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a flag without its pair is a usage error");
}

#[test]
fn sighup_reloads_the_certificate_for_new_connections() {
    let dir = TempDir::new("reload");
    let (cert, key) = certificate(&dir, "served", false);
    let old = dir.path("old.crt");
    std::fs::copy(&cert, &old).unwrap();
    let server = start(&cert, &key, &[]);
    assert_eq!(curl(&server, &old, "/plaintext", &[]).stdout, b"Hello, World!");
    // New files in place, then SIGHUP.
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    std::fs::write(&cert, made.cert.pem()).unwrap();
    let pid = server.pid().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !server.log().contains("SIGHUP: reloaded") {
        assert!(std::time::Instant::now() < deadline, "no reload logged: {}", server.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(curl(&server, &cert, "/plaintext", &[]).stdout, b"Hello, World!", "the new certificate");
    assert!(!curl(&server, &old, "/plaintext", &[]).status.success(), "the old one is gone");
}

/// The stalled-handshake attack (the TLS form of slowloris), from Python:
/// `stalled` connections that send the first 5 bytes of a ClientHello and
/// nothing more, and one that trickles a whole ClientHello a byte every
/// 200 ms, while a real client makes TLS requests, one connection each,
/// for the same time before the attack and during it. Prints, per attacking
/// connection, how long after it opened the server closed it, and the real
/// client's rates.
const STALLED_HANDSHAKES: &str = r#"
import resource, selectors, socket, ssl, sys, time, threading
port, cert, stalled, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
resource.setrlimit(resource.RLIMIT_NOFILE, (stalled + 256, stalled + 256))
ctx = ssl.create_default_context(cafile=cert)

def served_for(span):
    end, n = time.monotonic() + span, 0
    while time.monotonic() < end:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                got = b""
                while chunk := s.recv(4096):
                    got += chunk
                if b"Hello, World!" not in got:
                    sys.exit(f"a real client got {got[:60]!r}")
                n += 1
    return n / span

before = served_for(seconds)
# A ClientHello to trickle: what the ssl module would send first.
bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(bio_in, bio_out, server_hostname="localhost")
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = bio_out.read()
opened, closed = {}, {}
sel = selectors.DefaultSelector()
for i in range(stalled):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"\x16\x03\x01\x02\x00")
    s.setblocking(False)
    opened[i] = time.monotonic()
    sel.register(s, selectors.EVENT_READ, i)
trickler = socket.create_connection(("127.0.0.1", port), timeout=30)
opened["trickle"] = time.monotonic()

def trickle():
    try:
        for b in hello:
            trickler.sendall(bytes([b]))
            time.sleep(0.2)
    except OSError:
        pass
threading.Thread(target=trickle, daemon=True).start()
trickler_fd = trickler.dup()
trickler_fd.setblocking(False)
sel.register(trickler_fd, selectors.EVENT_READ, "trickle")

def watch():
    # One thread, one poll: when each connection ends (EOF or reset).
    deadline = time.monotonic() + 40
    while len(closed) < len(opened) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            try:
                ended = not key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                ended = True
            if ended:
                closed[key.data] = time.monotonic()
                sel.unregister(key.fileobj)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
during = served_for(seconds)
watcher.join(45)
took = sorted(closed[k] - opened[k] for k in opened if k in closed)
if not took:
    sys.exit("no stalled connection was closed")
print(len(opened), len(took), f"{took[0]:.3f}", f"{took[-1]:.3f}", f"{before:.1f}", f"{during:.1f}")
"#;

#[test]
fn stalled_and_trickled_handshakes_are_closed_at_the_handshake_timeout_while_clients_are_served() {
    let dir = TempDir::new("handshakes");
    let (cert, key) = certificate(&dir, "ecdsa", false);
    let server = start(&cert, &key, &["--handshake-timeout", "2s"]);
    let port = server.tls_addr.expect("an HTTPS address").port().to_string();
    let stalled = "2000";
    let out = run("python3", &["-c", STALLED_HANDSHAKES, &port, cert.to_str().unwrap(), stalled, "2"], b"");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let fields: Vec<&str> = said.split_whitespace().collect();
    let [opened, closed, first, last, before, during] = fields[..] else { panic!("{said}") };
    assert_eq!((opened, closed), ("2001", "2001"), "every stalled handshake was closed: {said}");
    let (first, last): (f64, f64) = (first.parse().unwrap(), last.parse().unwrap());
    // The clock starts at the turn that accepted the connection: with a
    // thousand accepted in one turn, the last of them a little after that
    // turn's time.
    assert!(first >= 1.5, "a handshake was closed well before its 2 s: {said}");
    assert!(last <= 3.0, "every handshake was closed within the timeout and a second: {said}");
    let (before, during): (f64, f64) = (before.parse().unwrap(), during.parse().unwrap());
    assert!(during > 0.0, "real clients were served during the attack: {said}");
    eprintln!(
        "2000 stalled TLS handshakes (and one trickled): closed {first:.3}..{last:.3} s after they opened \
         (--handshake-timeout 2s); a real client's TLS requests, a connection each: {before:.1}/s before, \
         {during:.1}/s during ({:.2} ×)",
        during / before
    );
    let timeouts = server.wait_total("fairway_tls_handshake_timeouts_total", 2001.0);
    assert!(timeouts >= 2001.0, "{timeouts} handshake timeouts counted");
}

#[test]
fn handshakes_beyond_the_shards_share_cut_the_oldest_short() {
    let dir = TempDir::new("evict");
    let (cert, key) = certificate(&dir, "ecdsa", false);
    // One shard, 20 connections at most: 10 may be in their handshake.
    let server = start(&cert, &key, &["--handshake-timeout", "60s", "--shards", "1", "--max-connections", "20"]);
    let addr = server.tls_addr.expect("an HTTPS address");
    let mut stalled: Vec<TcpStream> = (0..15)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s
        })
        .collect();
    // The first five were cut to make room for the last five, oldest first.
    for (i, s) in stalled.iter_mut().enumerate() {
        let mut buf = [0u8; 64];
        let ended = match s.read(&mut buf) {
            Ok(0) | Err(_) => true,
            // An alert, then the end.
            Ok(_) => matches!(s.read(&mut buf), Ok(0) | Err(_)),
        };
        if i < 5 {
            assert!(ended, "stalled handshake {i} (of the oldest) was cut");
        } else {
            s.set_nonblocking(true).unwrap();
            assert!(matches!(s.read(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock), "{i} still waits");
        }
        if i == 4 {
            break;
        }
    }
    // A real client gets through with ten stalled beside it.
    let out = curl(&server, &cert, "/plaintext", &[]);
    assert_eq!(out.stdout, b"Hello, World!", "{}", String::from_utf8_lossy(&out.stderr));
    let evicted = server.wait_total("fairway_tls_handshakes_evicted_total", 6.0);
    assert!(evicted >= 6.0, "{evicted} handshakes evicted (five for the stalled, one for curl)");
    drop(stalled);
}
