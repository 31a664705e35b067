"""HTTPS as Python's ssl and http.client speak it, against a Fairway server:
per TLS version, keep-alive GETs and an upload (the SHA-256 the server
computed checked) on one connection (ALPN http/1.1 checked), then a second
connection that offers the first one's session. Prints "<version> resumed"
or "<version> full" per version.

Usage: tls_client.py HOST PORT CAFILE (the certificate names localhost;
HOST is where localhost's server is reached)."""

import hashlib
import http.client
import socket
import ssl
import sys

host, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]


class To(http.client.HTTPSConnection):
    """An HTTPS connection to HOST that verifies the name localhost."""

    def connect(self):
        raw = socket.create_connection((host, port), timeout=self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname="localhost")


ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["http/1.1"])
for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
    ctx.minimum_version = ctx.maximum_version = version
    first = To("localhost", port, context=ctx, timeout=20)
    for i in range(3):
        first.request("GET", "/plaintext")
        r = first.getresponse()
        assert (r.status, r.read()) == (200, b"Hello, World!"), i
    body = bytes(i * 7 % 251 for i in range(300_007))
    first.request("POST", "/upload", body=body)
    want = f"{len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()
    got = first.getresponse().read()
    assert got == want, f"upload: {got!r}"
    assert first.sock.selected_alpn_protocol() == "http/1.1"
    session = first.sock.session
    first.close()
    raw = socket.create_connection((host, port), timeout=20)
    again = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    again.sendall(b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    reply = b""
    while True:
        chunk = again.recv(65536)
        if not chunk:
            break
        reply += chunk
    assert reply.endswith(b"Hello, World!"), reply
    print(version.name, "resumed" if again.session_reused else "full")
    again.close()
