//! What `http` runs: the servers, the cases, the cores each side gets, and
//! the command lines. Pure, so that it is tested without a testbed.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fairway_tests::nginx::{TLS_CERT, TLS_KEY};
use fairway_tests::{nginx, testbed};

/// Fairway's address on the testbed.
pub const SERVER_IP: &str = "10.77.0.1";
/// Its IPv6 address there (the testbed's IPv6 subnet, fd77::/64).
pub const SERVER_IP6: &str = "fd77::1";
/// The prefix length of [`SERVER_IP`]'s subnet.
pub const PREFIX_LEN: u8 = 24;
/// The static file every server serves, and its size: 1 MB.
pub const STATIC_FILE: &str = "1mb.bin";
/// The size of [`STATIC_FILE`].
pub const STATIC_BYTES: u64 = 1_000_000;
/// The 16 KB file of the ablation's response case ([`Case::Small16k`]).
pub const SMALL_FILE: &str = "16k.bin";
/// The size of [`SMALL_FILE`].
pub const SMALL_BYTES: u64 = 16_384;
/// The plaintext body, as TechEmpower defines it.
pub const PLAINTEXT_BODY: &str = "Hello, World!";
/// Requests per write in the pipelined case (TechEmpower's depth).
pub const PIPELINE_DEPTH: usize = 16;
/// Concurrent streams per connection in the HTTP/2 cases (h2load's `-m`).
pub const H2_STREAMS: usize = 32;
/// nginx's cleartext HTTP/2 listener on 10.77.0.1, for [`Case::H2c`]: HTTP/2
/// with prior knowledge only (nginx 1.22's `listen ... http2` without
/// `ssl`), so not its port 80, where the wrk cases speak HTTP/1.1.
pub const NGINX_H2C_PORT: u16 = 8085;

/// A server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// Fairway over AF_XDP on `fw0`, which has no kernel address.
    FairwayAfxdp,
    /// The same server, its clients coming over IPv6 (`--ip fd77::1/64`
    /// beside the IPv4 address).
    FairwayAfxdp6,
    /// Fairway on kernel sockets, `fw0` with the kernel address 10.77.0.1/24.
    FairwayKernel,
    /// nginx on kernel sockets, the same way.
    Nginx,
    /// nginx as deployed on a veth: the same, with tx checksum, TSO and GSO
    /// turned on on `fw0` for its run (the testbed turns them off on every
    /// veth, so that no frame exceeds the MTU), so its segments leave as
    /// packets of up to 64 KB.
    NginxGso,
    /// [`Subject::FairwayAfxdp`] from another build of Fairway (`--baseline
    /// PATH`): the server before a change, beside it after.
    BaselineAfxdp,
    /// [`Subject::FairwayKernel`] from that other build, on its own port.
    BaselineKernel,
    /// The axum example (server/examples/axum_app.rs) on Fairway's async
    /// runtime over AF_XDP.
    AxumAfxdp,
    /// The axum example on Fairway's kernel backend.
    AxumKernel,
    /// The same router served by `axum::serve` on tokio (`axum_tokio`):
    /// what the axum example on Fairway is compared with.
    AxumTokio,
    /// [`Subject::FairwayAfxdp`] serving HTTPS only (`--tls-only`), on
    /// port 443, with the run's ECDSA P-256 certificate.
    TlsAfxdp,
    /// [`Subject::FairwayKernel`] serving HTTPS only, on 10.77.0.1:8443.
    TlsKernel,
    /// nginx (OpenSSL) serving HTTPS on port 443 with the same
    /// certificate: what the HTTPS servers are compared with.
    TlsNginx,
    /// [`Subject::FairwayAfxdp`] as a reverse proxy (`--upstream`) in
    /// front of the run's [upstream](upstream_command), port 80.
    ProxyAfxdp,
    /// [`Subject::FairwayKernel`] as that reverse proxy, on 10.77.0.1:8084.
    ProxyKernel,
    /// nginx as that reverse proxy (`proxy_pass` with a keep-alive
    /// upstream pool), on 10.77.0.1:8090: what the proxies are compared
    /// with.
    ProxyNginx,
}

/// Where the proxies' upstream listens by default, in the server's
/// namespace.
pub const UPSTREAM: &str = "127.0.0.1:9080";

/// Where the proxies' upstream listens with `--nic-upstream`: the
/// client's namespace, its address (host 10 of the testbed's subnet).
pub const UPSTREAM_BEYOND_NIC: &str = "10.77.0.10:9080";

/// Where the proxies' upstream runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamAt {
    /// On the server namespace's loopback ([`UPSTREAM`]): every proxy
    /// reaches it through a kernel socket.
    #[default]
    Loopback,
    /// In the client's namespace ([`UPSTREAM_BEYOND_NIC`]), still on the
    /// server's cores: Fairway over AF_XDP reaches it through its own stack
    /// (a link), the kernel proxies through fw0.
    BeyondNic,
}

impl UpstreamAt {
    /// Its address and port.
    #[must_use]
    pub fn addr(self) -> &'static str {
        match self {
            UpstreamAt::Loopback => UPSTREAM,
            UpstreamAt::BeyondNic => UPSTREAM_BEYOND_NIC,
        }
    }
}

impl Subject {
    /// Every server, in the order they run and are listed: the built-in
    /// server's group, then the axum group. Each server gets the kernel
    /// address on `fw0` for its own run only, so the AF_XDP ones may come
    /// anywhere.
    pub const ALL: [Subject; 16] = [
        Subject::FairwayAfxdp,
        Subject::FairwayKernel,
        Subject::Nginx,
        Subject::NginxGso,
        Subject::FairwayAfxdp6,
        Subject::BaselineAfxdp,
        Subject::BaselineKernel,
        Subject::AxumAfxdp,
        Subject::AxumKernel,
        Subject::AxumTokio,
        Subject::TlsAfxdp,
        Subject::TlsKernel,
        Subject::TlsNginx,
        Subject::ProxyAfxdp,
        Subject::ProxyKernel,
        Subject::ProxyNginx,
    ];

    /// The name in tables and in `--servers`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Subject::FairwayAfxdp => "fairway/afxdp",
            Subject::FairwayAfxdp6 => "fairway/afxdp6",
            Subject::FairwayKernel => "fairway/kernel",
            Subject::Nginx => "nginx",
            Subject::NginxGso => "nginx/gso",
            Subject::BaselineAfxdp => "baseline/afxdp",
            Subject::BaselineKernel => "baseline/kernel",
            Subject::AxumAfxdp => "axum/afxdp",
            Subject::AxumKernel => "axum/kernel",
            Subject::AxumTokio => "axum/tokio",
            Subject::TlsAfxdp => "fairway/afxdp tls",
            Subject::TlsKernel => "fairway/kernel tls",
            Subject::TlsNginx => "nginx tls",
            Subject::ProxyAfxdp => "fairway/afxdp proxy",
            Subject::ProxyKernel => "fairway/kernel proxy",
            Subject::ProxyNginx => "nginx proxy",
        }
    }

    /// Its short name in `--servers`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Subject::FairwayAfxdp => "afxdp",
            Subject::FairwayAfxdp6 => "afxdp6",
            Subject::FairwayKernel => "kernel",
            Subject::Nginx => "nginx",
            Subject::NginxGso => "nginx-gso",
            Subject::BaselineAfxdp => "baseline-afxdp",
            Subject::BaselineKernel => "baseline-kernel",
            Subject::AxumAfxdp => "axum-afxdp",
            Subject::AxumKernel => "axum-kernel",
            Subject::AxumTokio => "axum-tokio",
            Subject::TlsAfxdp => "tls-afxdp",
            Subject::TlsKernel => "tls-kernel",
            Subject::TlsNginx => "tls-nginx",
            Subject::ProxyAfxdp => "proxy-afxdp",
            Subject::ProxyKernel => "proxy-kernel",
            Subject::ProxyNginx => "proxy-nginx",
        }
    }

    /// Its TCP port on 10.77.0.1: 80 for the userspace stack and nginx,
    /// a port of its own for each server on kernel sockets beside nginx.
    #[must_use]
    pub fn port(self) -> u16 {
        match self {
            Subject::FairwayKernel => 8080,
            Subject::AxumKernel => 8081,
            Subject::AxumTokio => 8082,
            Subject::BaselineKernel => 8083,
            Subject::TlsKernel => 8443,
            Subject::TlsAfxdp | Subject::TlsNginx => 443,
            Subject::ProxyKernel => 8084,
            Subject::ProxyNginx => 8090,
            Subject::ProxyAfxdp
            | Subject::FairwayAfxdp
            | Subject::FairwayAfxdp6
            | Subject::Nginx
            | Subject::NginxGso
            | Subject::BaselineAfxdp
            | Subject::AxumAfxdp => 80,
        }
    }

    /// Whether `fw0` needs the kernel's address while it runs (and must not
    /// have it otherwise: the kernel would answer for Fairway).
    #[must_use]
    pub fn needs_kernel_address(self) -> bool {
        !matches!(
            self,
            Subject::FairwayAfxdp
                | Subject::FairwayAfxdp6
                | Subject::BaselineAfxdp
                | Subject::AxumAfxdp
                | Subject::TlsAfxdp
                | Subject::ProxyAfxdp
        )
    }

    /// The servers it is compared with.
    #[must_use]
    pub fn group(self) -> Group {
        match self {
            Subject::FairwayAfxdp
            | Subject::FairwayAfxdp6
            | Subject::FairwayKernel
            | Subject::Nginx
            | Subject::NginxGso
            | Subject::BaselineAfxdp
            | Subject::BaselineKernel => Group::BuiltIn,
            Subject::AxumAfxdp | Subject::AxumKernel | Subject::AxumTokio => Group::Axum,
            Subject::TlsAfxdp | Subject::TlsKernel | Subject::TlsNginx => Group::Tls,
            Subject::ProxyAfxdp | Subject::ProxyKernel | Subject::ProxyNginx => Group::Proxy,
        }
    }

    /// Whether it is nginx, in either of its set-ups.
    #[must_use]
    pub fn is_nginx(self) -> bool {
        matches!(self, Subject::Nginx | Subject::NginxGso | Subject::TlsNginx | Subject::ProxyNginx)
    }

    /// Whether `fw0` has tx checksum, TSO and GSO on while it runs.
    #[must_use]
    pub fn segmentation_offload(self) -> bool {
        self == Subject::NginxGso
    }

    /// Whether it runs the `--baseline` build, and so runs only when one
    /// is given.
    #[must_use]
    pub fn is_baseline_build(self) -> bool {
        matches!(self, Subject::BaselineAfxdp | Subject::BaselineKernel)
    }

    /// Whether it serves [`STATIC_FILE`]: the axum application has no
    /// static files.
    #[must_use]
    pub fn serves_static(self) -> bool {
        self.group() != Group::Axum
    }

    /// Whether `case` applies to it. The axum servers run what an
    /// application framework is about (keep-alive, a connection per
    /// request, latency at a fixed load); pipelining and sendfile are the
    /// built-in server's and nginx's business.
    #[must_use]
    pub fn runs(self, case: Case) -> bool {
        match case {
            Case::StaticFile | Case::Small16k => self.serves_static(),
            Case::Pipelined => self.group() == Group::BuiltIn,
            // The open-loop generator speaks plain HTTP only; the proxies'
            // CPU per request comes from their wrk cases.
            Case::LatencyHalf => !matches!(self.group(), Group::Tls | Group::Proxy),
            Case::KeepAlive64 | Case::KeepAlive256 | Case::Close => true,
            // HTTP/2 by ALPN: the HTTPS servers. Cleartext HTTP/2: the
            // built-in server on its plain port and nginx on its own h2c
            // listener; the other set-ups measure other things (IPv6, a
            // change, nginx's segmentation offload).
            Case::H2 => self.is_tls(),
            Case::H2c => matches!(self, Subject::FairwayAfxdp | Subject::FairwayKernel | Subject::Nginx),
            // Each kind of server once: the built-in ones, nginx, the axum ones.
            Case::Idle => matches!(
                self,
                Subject::FairwayAfxdp
                    | Subject::FairwayKernel
                    | Subject::Nginx
                    | Subject::AxumAfxdp
                    | Subject::AxumKernel
                    | Subject::AxumTokio
            ),
        }
    }

    /// Whether its clients come over IPv6 (the testbed then gives them
    /// IPv6 addresses).
    #[must_use]
    pub fn is_ipv6(self) -> bool {
        self == Subject::FairwayAfxdp6
    }

    /// Whether it serves HTTPS.
    #[must_use]
    pub fn is_tls(self) -> bool {
        self.group() == Group::Tls
    }

    /// `http://10.77.0.1[:port]{path}`, `http://[fd77::1]{path}` over
    /// IPv6, or `https://10.77.0.1[:port]{path}`.
    #[must_use]
    pub fn url(self, path: &str) -> String {
        self.url_at(self.port(), path)
    }

    /// The URL `case` asks for: [`url`](Self::url) of its path, but on
    /// nginx's own listener ([`NGINX_H2C_PORT`]) for cleartext HTTP/2.
    #[must_use]
    pub fn case_url(self, case: Case) -> String {
        let port = if case == Case::H2c && self.is_nginx() { NGINX_H2C_PORT } else { self.port() };
        self.url_at(port, &case.path())
    }

    /// [`url`](Self::url) on `port`.
    fn url_at(self, port: u16, path: &str) -> String {
        if self.is_tls() {
            return match port {
                443 => format!("https://{SERVER_IP}{path}"),
                port => format!("https://{SERVER_IP}:{port}{path}"),
            };
        }
        match (port, self.is_ipv6()) {
            (80, true) => format!("http://[{SERVER_IP6}]{path}"),
            (80, false) => format!("http://{SERVER_IP}{path}"),
            (port, _) => format!("http://{SERVER_IP}:{port}{path}"),
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Servers compared with one another: a ratio, the open-loop rate and a
/// headline are always within a group, against its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// The built-in HTTP server (fairway/*, baseline/*) and nginx.
    BuiltIn,
    /// The axum example on Fairway and the same router on tokio.
    Axum,
    /// HTTPS: the built-in server over TLS (rustls) and nginx (OpenSSL).
    Tls,
    /// Reverse proxies in front of one upstream: Fairway and nginx.
    Proxy,
}

impl Group {
    /// Both groups, in the order their tables come.
    pub const ALL: [Group; 4] = [Group::BuiltIn, Group::Axum, Group::Tls, Group::Proxy];

    /// What the group's ratios are to, and whose keep-alive-256 rate sets
    /// its open-loop rate.
    #[must_use]
    pub fn baseline(self) -> Subject {
        match self {
            Group::BuiltIn => Subject::Nginx,
            Group::Axum => Subject::AxumTokio,
            Group::Tls => Subject::TlsNginx,
            Group::Proxy => Subject::ProxyNginx,
        }
    }

    /// The server the group's closing lines are about.
    #[must_use]
    pub fn lead(self) -> Subject {
        match self {
            Group::BuiltIn => Subject::FairwayAfxdp,
            Group::Axum => Subject::AxumAfxdp,
            Group::Tls => Subject::TlsAfxdp,
            Group::Proxy => Subject::ProxyAfxdp,
        }
    }
}

/// The binaries the servers run (nginx is found on `PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Programs {
    /// The `fairway` binary: fairway/afxdp and fairway/kernel.
    pub fairway: PathBuf,
    /// Another build's `fairway` (`--baseline`): baseline/afxdp and
    /// baseline/kernel, which do not run without it.
    pub baseline: Option<PathBuf>,
    /// The axum example (`examples/axum_app`): axum/afxdp and axum/kernel.
    pub axum: PathBuf,
    /// `axum_tokio`: axum/tokio.
    pub axum_tokio: PathBuf,
}

impl Programs {
    /// The binary `server` runs: `nginx` for nginx, `None` for a baseline
    /// server without `--baseline`.
    #[must_use]
    pub fn of(&self, server: Subject) -> Option<&Path> {
        match server {
            Subject::FairwayAfxdp
            | Subject::FairwayAfxdp6
            | Subject::FairwayKernel
            | Subject::TlsAfxdp
            | Subject::TlsKernel
            | Subject::ProxyAfxdp
            | Subject::ProxyKernel => Some(&self.fairway),
            Subject::BaselineAfxdp | Subject::BaselineKernel => self.baseline.as_deref(),
            Subject::AxumAfxdp | Subject::AxumKernel => Some(&self.axum),
            Subject::AxumTokio => Some(&self.axum_tokio),
            Subject::Nginx | Subject::NginxGso | Subject::TlsNginx | Subject::ProxyNginx => Some(Path::new("nginx")),
        }
    }
}

/// What `/proc/PID/comm` says for a process running `program`: its file
/// name, cut to the kernel's 15 bytes (TASK_COMM_LEN less the NUL).
#[must_use]
pub fn expected_comm(program: &Path) -> String {
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// What generates a case's load and measures it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Generator {
    /// wrk: closed loop over HTTP/1.1, latency percentiles.
    Wrk,
    /// h2load (nghttp2): closed loop over HTTP/2, several streams per
    /// connection; no latency percentiles (it reports a mean and a
    /// spread only).
    H2load,
    /// The open-loop generator (`http openloop`): requests due at a
    /// constant rate.
    OpenLoop,
    /// None: the server is left idle and its CPU time measured.
    Idle,
}

/// One load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Case {
    /// Keep-alive `/plaintext`, 64 connections.
    KeepAlive64,
    /// Keep-alive `/plaintext`, 256 connections.
    KeepAlive256,
    /// `/plaintext` pipelined 16 deep, 256 connections.
    Pipelined,
    /// `/plaintext` with `Connection: close`: a connection per request.
    Close,
    /// The 1 MB static file, keep-alive, 64 connections.
    StaticFile,
    /// The 16 KB file, keep-alive, 64 connections: the ablation's
    /// response case (`lab ablation`; not one of `http`'s cases).
    Small16k,
    /// No load for the case's duration: the server's CPU time over it, as
    /// a share of one core (what an idle server costs: no busy polling
    /// forever).
    Idle,
    /// Keep-alive `/plaintext` from the open-loop generator, 256
    /// connections, at half the rate the group's baseline (nginx, or
    /// axum/tokio) reached on [`Case::KeepAlive256`] in the same run:
    /// latency and server CPU time per request, not throughput.
    LatencyHalf,
    /// `/plaintext` over HTTP/2 by TLS with ALPN `h2`, from h2load: 64
    /// connections of [`H2_STREAMS`] concurrent streams each.
    H2,
    /// The same in clear text, HTTP/2 with prior knowledge (`h2c`).
    H2c,
}

impl Case {
    /// Every case, in the order they run.
    pub const ALL: [Case; 9] = [
        Case::KeepAlive64,
        Case::KeepAlive256,
        Case::Pipelined,
        Case::Close,
        Case::StaticFile,
        Case::H2,
        Case::H2c,
        Case::LatencyHalf,
        Case::Idle,
    ];
    /// The case of the closing line.
    pub const HEADLINE: Case = Case::KeepAlive256;

    /// Its name in `--cases`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Case::KeepAlive64 => "keepalive-64",
            Case::KeepAlive256 => "keepalive-256",
            Case::Pipelined => "pipelined",
            Case::Close => "close",
            Case::StaticFile => "static",
            Case::LatencyHalf => "latency-half",
            Case::Small16k => "16k",
            Case::H2 => "h2",
            Case::H2c => "h2c",
            Case::Idle => "idle",
        }
    }

    /// What it is, in the table.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Case::KeepAlive64 => "keep-alive plaintext, 64 connections",
            Case::KeepAlive256 => "keep-alive plaintext, 256 connections",
            Case::Pipelined => "pipelined plaintext (depth 16), 256 connections",
            Case::Close => "Connection: close plaintext, 64 connections",
            Case::StaticFile => "1 MB static file, 64 connections",
            Case::LatencyHalf => "open-loop plaintext at half nginx's rate, 256 connections",
            Case::Small16k => "16 KB file, keep-alive, 64 connections",
            Case::H2 => "HTTP/2 plaintext over TLS (h2load), 64 connections × 32 streams",
            Case::H2c => "HTTP/2 plaintext in clear text, prior knowledge (h2load), 64 connections × 32 streams",
            Case::Idle => "idle: no load, the server's CPU as a share of one core",
        }
    }

    /// What it is, in the table of `group`: the latency case says whose
    /// rate it runs at.
    #[must_use]
    pub fn describe_for(self, group: Group) -> String {
        match self {
            Case::LatencyHalf => {
                format!("open-loop plaintext at half {}'s rate, 256 connections", group.baseline())
            }
            _ => self.describe().to_owned(),
        }
    }

    /// wrk's or h2load's `-c`.
    #[must_use]
    pub fn connections(self) -> usize {
        match self {
            Case::KeepAlive256 | Case::Pipelined | Case::LatencyHalf => 256,
            Case::KeepAlive64 | Case::Close | Case::StaticFile | Case::Small16k | Case::H2 | Case::H2c => 64,
            Case::Idle => 0,
        }
    }

    /// The URL path it asks for.
    #[must_use]
    pub fn path(self) -> String {
        match self {
            Case::StaticFile => format!("/{STATIC_FILE}"),
            Case::Small16k => format!("/{SMALL_FILE}"),
            _ => "/plaintext".to_owned(),
        }
    }

    /// What generates its load.
    #[must_use]
    pub fn generator(self) -> Generator {
        match self {
            Case::LatencyHalf => Generator::OpenLoop,
            Case::H2 | Case::H2c => Generator::H2load,
            Case::Idle => Generator::Idle,
            Case::KeepAlive64
            | Case::KeepAlive256
            | Case::Pipelined
            | Case::Close
            | Case::StaticFile
            | Case::Small16k => Generator::Wrk,
        }
    }

    /// Whether the open-loop generator measures it (else wrk or h2load
    /// does).
    #[must_use]
    pub fn is_open_loop(self) -> bool {
        self.generator() == Generator::OpenLoop
    }

    /// `taskset -c CPUS PROGRAM openloop ...` against `server`: the
    /// open-loop generator (`program` is the `http` binary) at `rate`
    /// requests per second over this case's connections, measuring
    /// `duration` after `warm_up`.
    #[must_use]
    pub fn openloop_command(
        self,
        server: Subject,
        cores: &Cores,
        program: &Path,
        rate: f64,
        duration: Duration,
        warm_up: Duration,
    ) -> Vec<String> {
        let mut line: Vec<String> = vec!["taskset".into(), "-c".into(), cpu_list(&cores.client)];
        line.extend([program.display().to_string(), "openloop".into()]);
        line.extend([
            "--connect".into(),
            format!("{SERVER_IP}:{}", server.port()),
            "--path".into(),
            self.path(),
            "--rate".into(),
            format!("{rate:.0}"),
            "--connections".into(),
            self.connections().to_string(),
            "--duration".into(),
            duration.as_secs_f64().to_string(),
            "--warm-up".into(),
            warm_up.as_secs_f64().to_string(),
        ]);
        line
    }

    /// `taskset -c CPUS wrk ...` against `server`: `threads` threads on the
    /// client's cores, `--latency` for the percentiles; the pipelined case
    /// runs `script` with the depth as its argument.
    #[must_use]
    pub fn wrk_command(self, server: Subject, cores: &Cores, duration: Duration, script: &Path) -> Vec<String> {
        let mut line = self.load_command("wrk", cores);
        line.extend(["-d".into(), wrk_seconds(duration), "--latency".into()]);
        match self {
            Case::Close => line.extend(["-H".into(), "Connection: close".into()]),
            Case::Pipelined => line.extend(["-s".into(), script.display().to_string()]),
            Case::KeepAlive64
            | Case::KeepAlive256
            | Case::StaticFile
            | Case::LatencyHalf
            | Case::Small16k
            | Case::H2
            | Case::H2c
            | Case::Idle => {}
        }
        line.push(server.url(&self.path()));
        if self == Case::Pipelined {
            line.extend(["--".into(), PIPELINE_DEPTH.to_string()]);
        }
        line
    }

    /// `taskset -c CPUS h2load ...` against `server` for `duration`:
    /// threads on the client's cores as wrk gets them, this case's
    /// connections of [`H2_STREAMS`] streams each, timed (`-D`). The URL's
    /// scheme says how: `https` negotiates `h2` by ALPN, `http` speaks
    /// HTTP/2 with prior knowledge (h2load's default for it).
    #[must_use]
    pub fn h2load_command(self, server: Subject, cores: &Cores, duration: Duration) -> Vec<String> {
        let mut line = self.load_command("h2load", cores);
        line.extend(["-m".into(), H2_STREAMS.to_string(), "-D".into(), whole_seconds(duration).to_string()]);
        line.push(server.case_url(self));
        line
    }

    /// `taskset -c CPUS PROGRAM -t THREADS -c CONNECTIONS`: wrk's and
    /// h2load's common start, a thread per client core (at most one per
    /// connection).
    fn load_command(self, program: &str, cores: &Cores) -> Vec<String> {
        let threads = cores.client.len().min(self.connections());
        let line = ["taskset", "-c", &cpu_list(&cores.client), program, "-t", &threads.to_string(), "-c"];
        let mut line: Vec<String> = line.map(str::to_owned).to_vec();
        line.push(self.connections().to_string());
        line
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// wrk's `-d`: whole seconds, at least 1.
fn wrk_seconds(d: Duration) -> String {
    format!("{}s", whole_seconds(d))
}

/// `d` in whole seconds, at least 1.
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs_f64().round().max(1.0) as u64
}

/// The core budget: the server's cores (the same for every server) and
/// the load generator's, disjoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cores {
    /// The server's cores: shards, or nginx workers, one per core.
    pub server: Vec<usize>,
    /// wrk's cores, one thread each.
    pub client: Vec<usize>,
}

impl Cores {
    /// Splits cores `0..total`: the first `server` (default: half, at
    /// least one) to the server, the rest to wrk. Fairway pins shard `i`
    /// to core `i`, so the server's cores are the first ones.
    ///
    /// # Errors
    ///
    /// When either side would have no core.
    pub fn split(total: usize, server: Option<usize>) -> Result<Cores, String> {
        if total < 2 {
            return Err(format!("needs at least 2 cores (one for the server, one for wrk), this machine has {total}"));
        }
        let server = server.unwrap_or((total / 2).max(1));
        if server == 0 || server >= total {
            return Err(format!("--server-cores {server}: must leave wrk at least one of the {total} cores"));
        }
        Ok(Cores { server: (0..server).collect(), client: (server..total).collect() })
    }
}

/// `0,1,2` for taskset.
#[must_use]
pub fn cpu_list(cores: &[usize]) -> String {
    cores.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// `taskset -c CPUS` and the server's command line, with one shard,
/// worker or thread per server core. `program` is the server's binary
/// ([`Programs::of`]; nginx is `nginx` whatever it is). The built-in
/// servers serve `site_dir/root` (the directory holding [`STATIC_FILE`]);
/// nginx reads the configuration its [`Site`](nginx::Site) wrote in
/// `site_dir`.
#[must_use]
pub fn server_command(
    server: Subject,
    cores: &Cores,
    program: &Path,
    site_dir: &Path,
    upstream: UpstreamAt,
) -> Vec<String> {
    let shards = cores.server.len().to_string();
    let root = site_dir.join("root").display().to_string();
    let program = program.display().to_string();
    let listen = format!("{SERVER_IP}:{}", server.port());
    let ip = format!("{SERVER_IP}/{PREFIX_LEN}");
    let q = shards.as_str();
    // The `fairway` binary's flags, which the axum example takes too.
    let placed = testbed::afxdp_flags(&ip);
    let placed: Vec<&str> = placed.iter().map(String::as_str).collect();
    let afxdp = [placed.as_slice(), &["--queues", q, "--shards", q]].concat();
    let kernel = ["--backend", "kernel", "--listen", &listen, "--shards", q];
    let served = ["--root", root.as_str()];
    let quiet = ["--log", "warn"];
    let (cert, key) = (site_dir.join(TLS_CERT).display().to_string(), site_dir.join(TLS_KEY).display().to_string());
    let tls = ["--tls-only", "--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    let tls_listen = format!("{SERVER_IP}:{}", server.port());
    let upstream = format!("app=http://{}", upstream.addr());
    let words = match server {
        Subject::FairwayAfxdp | Subject::BaselineAfxdp => owned(&[&[&program], &afxdp, &served, &quiet]),
        Subject::FairwayAfxdp6 => {
            let ip6 = format!("{SERVER_IP6}/64");
            owned(&[&[&program], &afxdp, &["--ip", &ip6], &served, &quiet])
        }
        Subject::FairwayKernel | Subject::BaselineKernel => owned(&[&[&program], &kernel, &served, &quiet]),
        Subject::AxumAfxdp => owned(&[&[&program], &afxdp, &quiet]),
        Subject::AxumKernel => owned(&[&[&program], &kernel, &quiet]),
        Subject::AxumTokio => owned(&[&[&program, "--listen", &listen, "--threads", q]]),
        Subject::TlsAfxdp => owned(&[&[&program], &afxdp, &served, &tls, &quiet]),
        Subject::TlsKernel => {
            let kernel = ["--backend", "kernel", "--tls-listen", &tls_listen, "--shards", q];
            owned(&[&[&program], &kernel, &served, &tls, &quiet])
        }
        Subject::ProxyAfxdp => owned(&[&[&program], &afxdp, &["--upstream", &upstream], &quiet]),
        Subject::ProxyKernel => owned(&[&[&program], &kernel, &["--upstream", &upstream], &quiet]),
        Subject::Nginx | Subject::NginxGso | Subject::TlsNginx | Subject::ProxyNginx => nginx::command(site_dir),
    };
    let mut line: Vec<String> = vec!["taskset".into(), "-c".into(), cpu_list(&cores.server)];
    line.extend(words);
    line
}

/// `taskset -c CPUS` and the proxies' upstream: Fairway on kernel sockets
/// at `upstream`, serving `/plaintext` and the site's files, one shard per
/// server core (it shares them with the proxy, whichever that is).
#[must_use]
pub fn upstream_command(cores: &Cores, program: &Path, site_dir: &Path, upstream: UpstreamAt) -> Vec<String> {
    let shards = cores.server.len().to_string();
    let root = site_dir.join("root").display().to_string();
    let program = program.display().to_string();
    let words = [&program, "--backend", "kernel", "--listen", upstream.addr(), "--shards", &shards, "--root", &root];
    let mut line: Vec<String> = vec!["taskset".into(), "-c".into(), cpu_list(&cores.server)];
    line.extend(owned(&[&words, &["--log", "warn"]]));
    line
}

/// The words of `parts`, one after the other, owned.
fn owned(parts: &[&[&str]]) -> Vec<String> {
    parts.iter().flat_map(|part| part.iter()).map(|&word| word.to_owned()).collect()
}

/// Parses a comma-separated list of `keys` into the items they name, in
/// the order of `all` (each once).
///
/// # Errors
///
/// An unknown or empty name, in words.
pub fn select<T: Copy + PartialEq>(list: &str, all: &[T], key: impl Fn(T) -> &'static str) -> Result<Vec<T>, String> {
    let mut chosen = Vec::new();
    for name in list.split(',').map(str::trim) {
        let Some(item) = all.iter().copied().find(|&item| key(item) == name) else {
            let known: Vec<&str> = all.iter().map(|&item| key(item)).collect();
            return Err(format!("unknown name {name:?} (expected some of {})", known.join(",")));
        };
        chosen.push(item);
    }
    Ok(all.iter().copied().filter(|item| chosen.contains(item)).collect())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn two_cores() -> Cores {
        Cores::split(2, None).unwrap()
    }

    #[test]
    fn cores_are_split_between_server_and_wrk() {
        assert_eq!(two_cores(), Cores { server: vec![0], client: vec![1] });
        assert_eq!(Cores::split(8, None).unwrap(), Cores { server: vec![0, 1, 2, 3], client: vec![4, 5, 6, 7] });
        assert_eq!(Cores::split(4, Some(1)).unwrap(), Cores { server: vec![0], client: vec![1, 2, 3] });
        assert!(Cores::split(1, None).unwrap_err().contains("at least 2 cores"));
        assert!(Cores::split(2, Some(2)).unwrap_err().contains("at least one"));
        assert!(Cores::split(2, Some(0)).is_err());
        assert_eq!(cpu_list(&[0, 1, 2]), "0,1,2");
    }

    #[test]
    fn wrk_command_lines() {
        let cores = two_cores();
        let script = PathBuf::from("/dev/shm/s/pipeline.lua");
        let line =
            |case: Case, server: Subject| case.wrk_command(server, &cores, Duration::from_secs(10), &script).join(" ");
        assert_eq!(
            line(Case::KeepAlive256, Subject::FairwayAfxdp),
            "taskset -c 1 wrk -t 1 -c 256 -d 10s --latency http://10.77.0.1/plaintext"
        );
        assert_eq!(
            line(Case::Close, Subject::FairwayKernel),
            "taskset -c 1 wrk -t 1 -c 64 -d 10s --latency -H Connection: close http://10.77.0.1:8080/plaintext"
        );
        assert_eq!(
            line(Case::Pipelined, Subject::Nginx),
            "taskset -c 1 wrk -t 1 -c 256 -d 10s --latency -s /dev/shm/s/pipeline.lua http://10.77.0.1/plaintext -- 16"
        );
        assert_eq!(
            line(Case::StaticFile, Subject::Nginx),
            "taskset -c 1 wrk -t 1 -c 64 -d 10s --latency http://10.77.0.1/1mb.bin"
        );
        // The header is one argument.
        let close = Case::Close.wrk_command(Subject::Nginx, &cores, Duration::from_secs(10), &script);
        assert!(close.contains(&"Connection: close".to_owned()));
        // Short runs still last a second; threads follow the client cores.
        let wide = Cores::split(8, Some(2)).unwrap();
        let short = Case::KeepAlive64.wrk_command(Subject::Nginx, &wide, Duration::from_millis(300), &script).join(" ");
        assert!(short.starts_with("taskset -c 2,3,4,5,6,7 wrk -t 6 -c 64 -d 1s "), "{short}");
    }

    #[test]
    fn every_server_gets_the_same_cores() {
        let cores = Cores::split(4, None).unwrap();
        let (fairway, site) = (Path::new("/t/release/fairway"), Path::new("/dev/shm/site"));
        let line = |server| server_command(server, &cores, fairway, site, UpstreamAt::Loopback).join(" ");
        assert_eq!(
            line(Subject::FairwayAfxdp),
            "taskset -c 0,1 /t/release/fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24 --queues 2 --shards 2 \
             --root /dev/shm/site/root --log warn"
        );
        assert_eq!(
            line(Subject::FairwayKernel),
            "taskset -c 0,1 /t/release/fairway --backend kernel --listen 10.77.0.1:8080 --shards 2 \
             --root /dev/shm/site/root --log warn"
        );
        assert_eq!(
            line(Subject::Nginx),
            "taskset -c 0,1 nginx -p /dev/shm/site/ -e /dev/shm/site/error.log -c /dev/shm/site/nginx.conf"
        );
        assert_eq!(line(Subject::TlsNginx), line(Subject::Nginx), "one nginx serves both");
        assert_eq!(
            line(Subject::TlsKernel),
            "taskset -c 0,1 /t/release/fairway --backend kernel --tls-listen 10.77.0.1:8443 --shards 2 \
             --root /dev/shm/site/root --tls-only --tls-cert /dev/shm/site/tls.crt --tls-key /dev/shm/site/tls.key \
             --log warn"
        );
        assert!(line(Subject::TlsAfxdp).contains("--backend afxdp") && line(Subject::TlsAfxdp).contains("--tls-only"));
    }

    #[test]
    fn the_axum_and_baseline_command_lines() {
        let cores = Cores::split(4, None).unwrap();
        let programs = Programs {
            fairway: "/t/release/fairway".into(),
            baseline: Some("/old/release/fairway".into()),
            axum: "/t/release/examples/axum_app".into(),
            axum_tokio: "/t/release/axum_tokio".into(),
        };
        let site = Path::new("/dev/shm/site");
        let line =
            |server| server_command(server, &cores, programs.of(server).unwrap(), site, UpstreamAt::Loopback).join(" ");
        assert_eq!(
            line(Subject::AxumAfxdp),
            "taskset -c 0,1 /t/release/examples/axum_app --backend afxdp --iface fw0 --ip 10.77.0.1/24 --queues 2 \
             --shards 2 --log warn"
        );
        assert_eq!(
            line(Subject::AxumKernel),
            "taskset -c 0,1 /t/release/examples/axum_app --backend kernel --listen 10.77.0.1:8081 --shards 2 --log warn"
        );
        assert_eq!(
            line(Subject::AxumTokio),
            "taskset -c 0,1 /t/release/axum_tokio --listen 10.77.0.1:8082 --threads 2"
        );
        assert_eq!(
            line(Subject::BaselineAfxdp),
            "taskset -c 0,1 /old/release/fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24 --queues 2 --shards 2 \
             --root /dev/shm/site/root --log warn"
        );
        assert_eq!(
            line(Subject::BaselineKernel),
            "taskset -c 0,1 /old/release/fairway --backend kernel --listen 10.77.0.1:8083 --shards 2 \
             --root /dev/shm/site/root --log warn"
        );
        // The built-in ones run the `fairway` binary, nginx nginx.
        assert!(line(Subject::FairwayKernel).starts_with("taskset -c 0,1 /t/release/fairway --backend kernel"));
        assert!(line(Subject::Nginx).starts_with("taskset -c 0,1 nginx -p /dev/shm/site/"));
        let without = Programs { baseline: None, ..programs.clone() };
        assert_eq!(without.of(Subject::BaselineKernel), None);
        assert_eq!(without.of(Subject::AxumTokio), Some(Path::new("/t/release/axum_tokio")));
    }

    #[test]
    fn groups_and_the_cases_each_server_runs() {
        for server in Subject::ALL {
            let group = server.group();
            assert!(Group::ALL.contains(&group));
            assert_eq!(group.baseline().group(), group, "{server}");
            assert_eq!(group.lead().group(), group, "{server}");
            // Every server on kernel sockets has a port of its own; nginx's
            // two set-ups share its configuration, and so port 80.
            if server.needs_kernel_address() {
                let same_port = Subject::ALL.iter().filter(|s| {
                    s.needs_kernel_address() && s.port() == server.port() && !(s.is_nginx() && server.is_nginx())
                });
                assert_eq!(same_port.count(), usize::from(!server.is_nginx()), "{server}");
            } else {
                let port = if server.is_tls() { 443 } else { 80 };
                assert_eq!(server.port(), port, "{server}");
            }
        }
        // HTTPS: nginx and the AF_XDP server on 443, the kernel one on a
        // port of its own; no open-loop case (it speaks plain HTTP).
        assert_eq!(Group::Tls.baseline(), Subject::TlsNginx);
        assert!(Subject::TlsNginx.is_nginx() && Subject::TlsNginx.needs_kernel_address());
        assert_eq!(Subject::TlsKernel.url("/plaintext"), "https://10.77.0.1:8443/plaintext");
        assert_eq!(Subject::TlsAfxdp.url("/1mb.bin"), "https://10.77.0.1/1mb.bin");
        let tls_cases: Vec<Case> = Case::ALL.into_iter().filter(|&c| Subject::TlsAfxdp.runs(c)).collect();
        assert_eq!(tls_cases, [Case::KeepAlive64, Case::KeepAlive256, Case::Close, Case::StaticFile, Case::H2]);
        assert_eq!((Group::BuiltIn.baseline(), Group::Axum.baseline()), (Subject::Nginx, Subject::AxumTokio));
        assert_eq!(Subject::BaselineAfxdp.group(), Group::BuiltIn);
        assert!(!Subject::AxumAfxdp.needs_kernel_address() && !Subject::BaselineAfxdp.needs_kernel_address());
        assert!(Subject::AxumKernel.needs_kernel_address() && Subject::AxumTokio.needs_kernel_address());
        let axum_cases: Vec<Case> = Case::ALL.into_iter().filter(|&c| Subject::AxumTokio.runs(c)).collect();
        assert_eq!(axum_cases, [Case::KeepAlive64, Case::KeepAlive256, Case::Close, Case::LatencyHalf, Case::Idle]);
        let loads = |c: &Case| !matches!(c.generator(), Generator::H2load | Generator::Idle);
        let http1: Vec<Case> = Case::ALL.into_iter().filter(loads).collect();
        assert_eq!(http1.len(), 6);
        for server in [Subject::FairwayAfxdp, Subject::Nginx, Subject::BaselineKernel] {
            assert!(http1.iter().all(|&c| server.runs(c)), "{server}");
            assert!(server.serves_static());
        }
        // HTTP/2: by ALPN on the HTTPS servers; with prior knowledge on the
        // built-in server's plain ports and nginx's h2c listener.
        let running = |case| Subject::ALL.into_iter().filter(|s| s.runs(case)).collect::<Vec<_>>();
        assert_eq!(running(Case::H2), [Subject::TlsAfxdp, Subject::TlsKernel, Subject::TlsNginx]);
        assert_eq!(running(Case::H2c), [Subject::FairwayAfxdp, Subject::FairwayKernel, Subject::Nginx]);
        // Idle: each kind of server once.
        let idle = [
            Subject::FairwayAfxdp,
            Subject::FairwayKernel,
            Subject::Nginx,
            Subject::AxumAfxdp,
            Subject::AxumKernel,
            Subject::AxumTokio,
        ];
        assert_eq!(running(Case::Idle), idle);
        assert_eq!((Case::Idle.generator(), Case::Idle.key()), (Generator::Idle, "idle"));
        // nginx's h2c listener is a port of its own, beside every server's
        // and the proxies' upstream.
        assert!(Subject::ALL.iter().all(|s| s.port() != NGINX_H2C_PORT));
        assert!(!UPSTREAM.ends_with(&format!(":{NGINX_H2C_PORT}")));
        assert!(!Subject::AxumKernel.serves_static());
        let baselines: Vec<Subject> = Subject::ALL.into_iter().filter(|s| s.is_baseline_build()).collect();
        assert_eq!(baselines, [Subject::BaselineAfxdp, Subject::BaselineKernel]);
        assert_eq!(Subject::AxumTokio.url("/plaintext"), "http://10.77.0.1:8082/plaintext");
    }

    #[test]
    fn h2load_command_lines() {
        let cores = two_cores();
        let line = |case: Case, server: Subject| case.h2load_command(server, &cores, Duration::from_secs(10)).join(" ");
        for (case, server, url) in [
            (Case::H2, Subject::TlsAfxdp, "https://10.77.0.1/plaintext"),
            (Case::H2, Subject::TlsKernel, "https://10.77.0.1:8443/plaintext"),
            (Case::H2, Subject::TlsNginx, "https://10.77.0.1/plaintext"),
            (Case::H2c, Subject::FairwayAfxdp, "http://10.77.0.1/plaintext"),
            (Case::H2c, Subject::FairwayKernel, "http://10.77.0.1:8080/plaintext"),
            // nginx's cleartext HTTP/2 has a listener of its own.
            (Case::H2c, Subject::Nginx, "http://10.77.0.1:8085/plaintext"),
        ] {
            assert_eq!(line(case, server), format!("taskset -c 1 h2load -t 1 -c 64 -m 32 -D 10 {url}"), "{server}");
        }
        // Short runs still last a second; threads follow the client cores.
        let wide = Cores::split(8, Some(2)).unwrap();
        let short = Case::H2.h2load_command(Subject::TlsNginx, &wide, Duration::from_millis(300)).join(" ");
        assert_eq!(short, "taskset -c 2,3,4,5,6,7 h2load -t 6 -c 64 -m 32 -D 1 https://10.77.0.1/plaintext");
        // Every other case asks where wrk does.
        for server in Subject::ALL {
            for case in Case::ALL.into_iter().filter(|&c| c != Case::H2c) {
                assert_eq!(server.case_url(case), server.url(&case.path()), "{server}, {case}");
            }
        }
        assert_eq!(Subject::FairwayKernel.case_url(Case::H2c), Subject::FairwayKernel.url("/plaintext"));
    }

    #[test]
    fn what_measures_each_case() {
        let by = |generator| Case::ALL.into_iter().filter(|c| c.generator() == generator).collect::<Vec<_>>();
        assert_eq!(
            by(Generator::Wrk),
            [Case::KeepAlive64, Case::KeepAlive256, Case::Pipelined, Case::Close, Case::StaticFile]
        );
        assert_eq!(by(Generator::H2load), [Case::H2, Case::H2c]);
        assert_eq!(by(Generator::OpenLoop), [Case::LatencyHalf]);
        assert_eq!(Case::Small16k.generator(), Generator::Wrk);
        assert!(!Case::H2.is_open_loop() && !Case::H2c.is_open_loop());
        assert_eq!((Case::H2.key(), Case::H2c.key()), ("h2", "h2c"));
        assert_eq!((Case::H2.connections(), Case::H2c.connections(), H2_STREAMS), (64, 64, 32));
        assert_eq!(Case::H2.describe(), "HTTP/2 plaintext over TLS (h2load), 64 connections × 32 streams");
        assert_eq!(
            Case::H2c.describe_for(Group::BuiltIn),
            "HTTP/2 plaintext in clear text, prior knowledge (h2load), 64 connections × 32 streams"
        );
        assert_eq!(Case::H2c.path(), "/plaintext");
    }

    #[test]
    fn the_latency_case_says_whose_rate_it_runs_at() {
        assert_eq!(Case::LatencyHalf.describe_for(Group::BuiltIn), Case::LatencyHalf.describe());
        assert_eq!(
            Case::LatencyHalf.describe_for(Group::Axum),
            "open-loop plaintext at half axum/tokio's rate, 256 connections"
        );
        assert_eq!(Case::Close.describe_for(Group::Axum), Case::Close.describe());
    }

    #[test]
    fn what_proc_says_a_server_is_called() {
        assert_eq!(expected_comm(Path::new("/t/release/fairway")), "fairway");
        assert_eq!(expected_comm(Path::new("/t/release/examples/axum_app")), "axum_app");
        assert_eq!(expected_comm(Path::new("nginx")), "nginx");
        // The kernel keeps 15 bytes of the name.
        assert_eq!(expected_comm(Path::new("/x/a-very-long-server-name")), "a-very-long-ser");
    }

    #[test]
    fn the_ipv6_server_is_the_afxdp_one_reached_over_ipv6() {
        let cores = Cores::split(4, None).unwrap();
        let (fairway, site) = (Path::new("/t/release/fairway"), Path::new("/dev/shm/site"));
        assert_eq!(
            server_command(Subject::FairwayAfxdp6, &cores, fairway, site, UpstreamAt::Loopback).join(" "),
            "taskset -c 0,1 /t/release/fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24 --queues 2 --shards 2 \
             --ip fd77::1/64 --root /dev/shm/site/root --log warn"
        );
        assert_eq!(Subject::FairwayAfxdp6.url("/plaintext"), "http://[fd77::1]/plaintext");
        assert!(Subject::FairwayAfxdp6.is_ipv6() && !Subject::FairwayAfxdp.is_ipv6());
        assert!(!Subject::FairwayAfxdp6.needs_kernel_address());
        assert_eq!(Subject::FairwayAfxdp6.group(), Group::BuiltIn);
    }

    #[test]
    fn servers_and_cases() {
        assert_eq!(Subject::FairwayAfxdp.url("/plaintext"), "http://10.77.0.1/plaintext");
        assert_eq!(Subject::FairwayKernel.url("/1mb.bin"), "http://10.77.0.1:8080/1mb.bin");
        assert!(!Subject::FairwayAfxdp.needs_kernel_address());
        assert!(Subject::FairwayKernel.needs_kernel_address() && Subject::Nginx.needs_kernel_address());
        assert_eq!(Case::HEADLINE.describe(), "keep-alive plaintext, 256 connections");
        assert_eq!(Case::StaticFile.path(), "/1mb.bin");
        assert!(Case::LatencyHalf.is_open_loop() && !Case::KeepAlive256.is_open_loop());
    }

    #[test]
    fn the_open_loop_command_line() {
        let line = Case::LatencyHalf
            .openloop_command(
                Subject::FairwayKernel,
                &two_cores(),
                Path::new("/t/release/http"),
                88_123.4,
                Duration::from_secs(8),
                Duration::from_secs(1),
            )
            .join(" ");
        assert_eq!(
            line,
            "taskset -c 1 /t/release/http openloop --connect 10.77.0.1:8080 --path /plaintext --rate 88123 \
             --connections 256 --duration 8 --warm-up 1"
        );
    }

    #[test]
    fn lists_select_in_the_canonical_order() {
        assert_eq!(select("nginx,afxdp", &Subject::ALL, Subject::key), Ok(vec![Subject::FairwayAfxdp, Subject::Nginx]));
        assert_eq!(select("close,close", &Case::ALL, Case::key), Ok(vec![Case::Close]));
        assert!(select("apache", &Subject::ALL, Subject::key).unwrap_err().contains("afxdp,kernel,nginx"));
        assert!(select("", &Case::ALL, Case::key).is_err());
    }
}
