//! The AF_XDP backend against the kernel's own stack, over veth pairs
//! between network namespaces that each test creates and removes (see
//! `afxdp_support`). Needs root. Without a BPF filesystem here (libxdp
//! attaches its program without the dispatcher); `afxdp_bpffs.rs` runs the
//! dispatcher path.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

mod afxdp_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use afxdp_support::*;
use fairway_nic::afxdp::{
    AfXdp, AfXdpConfig, AfXdpError, AfXdpStats, AfXdpWarning, BindMode, KernelBusyPoll, XdpMode, detach_all,
};
use fairway_nic::{Device, Wait};

#[test]
fn arp_and_ping_from_the_kernel_are_answered_through_the_socket() {
    require_root();
    let pair = VethPair::new(1);
    let (seen, stats, bind_mode, xdp_mode, warnings) = drive(
        &pair.driven,
        Bpffs::Absent,
        |flags| {
            let mut socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open AF_XDP on the veth");
            assert_eq!(socket.max_frame_len(), 1514, "a 1500-byte MTU caps 2048-byte frames");
            flags.set_ready();
            let seen = respond(&mut socket, || flags.is_done());
            (seen, socket.stats(), socket.bind_mode(), socket.xdp_mode(), socket.warnings().to_vec())
        },
        || {
            assert!(pair.driven.has_xdp(DRIVEN_IF), "the socket attached an XDP program");
            let ping =
                pair.kernel.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "-w", "10", &DRIVEN_IP.to_string()]);
            assert!(ping.status.success(), "ping failed: {}", String::from_utf8_lossy(&ping.stdout));
            let neigh = pair.kernel.ip(&["neigh", "show", &DRIVEN_IP.to_string(), "dev", KERNEL_IF]);
            assert!(neigh.contains("02:fa:1b:00:00:02"), "the kernel learned our ARP reply: {neigh}");
        },
    );
    assert!(seen.arp_requests >= 1, "{seen:?}");
    assert!(seen.echo_requests >= 3, "{seen:?}");
    assert!(stats.rx_frames >= seen.arp_requests + seen.echo_requests, "{stats:?}");
    assert!(stats.tx_frames >= 4, "{stats:?}");
    assert!(stats.tx_wakeups >= 1, "copy mode sends only when kicked: {stats:?}");
    assert_eq!(stats.tx_runts + stats.rx_invalid_descs, 0, "{stats:?}");
    let kernel = stats.kernel.expect("XDP_STATISTICS");
    assert_eq!(kernel.rx_invalid_descs + kernel.tx_invalid_descs, 0, "{kernel:?}");
    // veth: native XDP, no zero-copy.
    assert_eq!((bind_mode, xdp_mode), (BindMode::Copy, XdpMode::Native));
    assert!(warnings.iter().any(|w| matches!(w, AfXdpWarning::NoBpffs { .. })), "{warnings:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF), "dropping the socket removed the XDP program");
}

#[test]
fn sockets_on_two_queues_of_one_veth_receive_at_once() {
    require_root();
    let pair = VethPair::new(2);
    // UDP straight to our MAC: no ARP needed.
    pair.kernel.ip(&["neigh", "add", &DRIVEN_IP.to_string(), "lladdr", "02:fa:1b:00:00:02", "dev", KERNEL_IF]);
    let per_queue = [AtomicU64::new(0), AtomicU64::new(0)];
    let (other_queue_modes, stats) = drive(
        &pair.driven,
        Bpffs::Absent,
        |flags| {
            let mut sockets =
                [0, 1].map(|queue| AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, queue)).expect("open a queue"));
            flags.set_ready();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !flags.is_done() && Instant::now() < deadline {
                for (socket, count) in sockets.iter_mut().zip(&per_queue) {
                    socket.receive(64, |frame| {
                        if matches!(classify(frame), Request::Udp) {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
                sockets[0].wait(Some(Duration::from_millis(5))).expect("wait");
            }
            let modes = (sockets[1].bind_mode(), sockets[1].xdp_mode());
            (modes, sockets.map(|s| s.stats()))
        },
        || {
            // Each redirection is a new socket with its own source port and
            // hash, so the kernel spreads them over the two transmit queues,
            // which a veth maps to the peer's receive queues.
            let script = format!("for p in $(seq 9000 9063); do echo fairway > /dev/udp/{DRIVEN_IP}/$p; done");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let sent = pair.kernel.exec(&["bash", "-c", &script]);
                assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
                std::thread::sleep(Duration::from_millis(100));
                let [q0, q1] = [0, 1].map(|q| per_queue[q].load(Ordering::Relaxed));
                if (q0 > 0 && q1 > 0) || Instant::now() > deadline {
                    break;
                }
            }
        },
    );
    let [q0, q1] = [0, 1].map(|q| per_queue[q].load(Ordering::Relaxed));
    assert!(q0 + q1 >= 64, "every datagram reached one of the queues: {q0} + {q1}");
    assert!(q0 > 0 && q1 > 0, "flows spread over both queues: {q0} and {q1}");
    assert_eq!(other_queue_modes, (BindMode::Copy, XdpMode::Native), "the second socket joined the program");
    assert!(stats.iter().all(|s| s.rx_frames > 0), "{stats:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn a_missing_interface_is_named_in_the_error() {
    require_root();
    let error = AfXdp::open(&AfXdpConfig::new("fwx-missing0", 0)).unwrap_err();
    assert!(matches!(error, AfXdpError::NoSuchInterface { .. }), "{error:?}");
    assert!(error.to_string().contains("\"fwx-missing0\""), "{error}");
    let error = detach_all("fwx-missing0").unwrap_err();
    assert!(matches!(error, AfXdpError::NoSuchInterface { .. }), "{error:?}");
}

#[test]
fn a_queue_beyond_the_interface_is_refused_with_the_queue_count() {
    require_root();
    let pair = VethPair::new(2);
    let error = pair.driven.enter(Bpffs::Absent, || AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 2)).unwrap_err());
    match &error {
        AfXdpError::QueueOutOfRange { queue_id: 2, queue_count: 2, .. } => {}
        other => panic!("expected QueueOutOfRange, got {other:?}"),
    }
    assert!(error.to_string().contains("has 2 queue(s)"), "{error}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn forced_zero_copy_on_a_veth_is_refused_and_leaves_no_program() {
    require_root();
    let pair = VethPair::new(1);
    let error = pair.driven.enter(Bpffs::Absent, || {
        let config = AfXdpConfig { bind_mode: BindMode::ZeroCopy, ..AfXdpConfig::new(DRIVEN_IF, 0) };
        AfXdp::open(&config).unwrap_err()
    });
    assert!(matches!(error, AfXdpError::ZeroCopyUnsupported { .. }), "{error:?}");
    assert!(error.to_string().contains("BindMode::Auto"), "{error}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
    // Forced copy mode is what Auto falls back to.
    let mode = pair.driven.enter(Bpffs::Absent, || {
        let config = AfXdpConfig { bind_mode: BindMode::Copy, ..AfXdpConfig::new(DRIVEN_IF, 0) };
        AfXdp::open(&config).expect("copy mode").bind_mode()
    });
    assert_eq!(mode, BindMode::Copy);
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn native_xdp_on_loopback_is_refused_and_auto_falls_back_to_generic() {
    require_root();
    let ns = Netns::new("lo");
    let (forced, auto) = ns.enter(Bpffs::Absent, || {
        let native = AfXdpConfig { xdp_mode: XdpMode::Native, ..AfXdpConfig::new("lo", 0) };
        let forced = AfXdp::open(&native).unwrap_err();
        let socket = AfXdp::open(&AfXdpConfig::new("lo", 0)).expect("generic XDP works everywhere");
        (forced, (socket.xdp_mode(), socket.bind_mode(), socket.warnings().to_vec()))
    });
    assert!(matches!(forced, AfXdpError::XdpAttachRefused { mode: XdpMode::Native, .. }), "{forced:?}");
    assert!(forced.to_string().contains("XdpMode::Generic"), "{forced}");
    let (xdp_mode, bind_mode, warnings) = auto;
    assert_eq!((xdp_mode, bind_mode), (XdpMode::Generic, BindMode::Copy));
    assert!(warnings.iter().any(|w| matches!(w, AfXdpWarning::GenericXdpFallback { .. })), "{warnings:?}");
    assert!(!ns.has_xdp("lo"));
}

#[test]
fn a_forced_mode_that_differs_from_the_attached_program_is_a_conflict() {
    require_root();
    let pair = VethPair::new(2);
    let error = pair.driven.enter(Bpffs::Absent, || {
        let generic = AfXdpConfig { xdp_mode: XdpMode::Generic, ..AfXdpConfig::new(DRIVEN_IF, 0) };
        let first = AfXdp::open(&generic).expect("generic XDP on queue 0");
        assert_eq!(first.xdp_mode(), XdpMode::Generic);
        let native = AfXdpConfig { xdp_mode: XdpMode::Native, ..AfXdpConfig::new(DRIVEN_IF, 1) };
        let error = AfXdp::open(&native).unwrap_err();
        // Auto joins the program in its mode.
        let joined = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 1)).expect("auto on queue 1");
        assert_eq!(joined.xdp_mode(), XdpMode::Generic);
        error
    });
    match &error {
        AfXdpError::XdpModeConflict { attached: XdpMode::Generic, requested: XdpMode::Native, .. } => {}
        other => panic!("expected XdpModeConflict, got {other:?}"),
    }
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn invalid_configurations_are_refused_before_touching_the_kernel() {
    let error = AfXdp::open(&AfXdpConfig { frame_size: 3000, ..AfXdpConfig::new("lo", 0) }).unwrap_err();
    assert!(matches!(error, AfXdpError::InvalidConfig(_)), "{error:?}");
    assert!(error.to_string().contains("frame_size"), "{error}");
}

#[test]
fn a_socket_dropped_outside_its_namespace_still_removes_the_program() {
    require_root();
    let pair = VethPair::new(1);
    let socket = pair.driven.enter(Bpffs::Absent, || AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open"));
    assert!(pair.driven.has_xdp(DRIVEN_IF));
    // This thread is in the test process's namespace, not the socket's.
    drop(socket);
    assert!(!pair.driven.has_xdp(DRIVEN_IF), "drop went back to the socket's namespace to detach");
}

#[test]
fn detach_all_removes_the_program_under_a_live_socket() {
    require_root();
    let pair = VethPair::new(1);
    pair.driven.enter(Bpffs::Absent, || {
        let socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open");
        assert_eq!(detach_all(DRIVEN_IF).expect("detach"), 1);
        assert!(!pair.driven.has_xdp(DRIVEN_IF));
        drop(socket);
        assert_eq!(detach_all(DRIVEN_IF).expect("nothing left to detach"), 0);
    });
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
#[ignore = "a child process of the killed-process tests, not a test"]
fn victim_holds_a_socket_until_killed() {
    victim();
}

#[test]
fn the_program_a_killed_process_left_goes_with_our_last_socket() {
    require_root();
    let pair = VethPair::new(1);
    kill_a_process_with_an_open_socket(&pair.driven);
    assert!(pair.driven.has_xdp(DRIVEN_IF), "SIGKILL leaves the program, its libxdp count one too high");
    pair.driven.enter(Bpffs::Absent, || {
        let socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open joins the program");
        assert_eq!(socket.xdp_mode(), XdpMode::Native);
        drop(socket);
    });
    assert!(!pair.driven.has_xdp(DRIVEN_IF), "our last socket removed it whatever the count said");
}

#[test]
fn detach_all_clears_what_a_killed_process_left() {
    require_root();
    let pair = VethPair::new(1);
    kill_a_process_with_an_open_socket(&pair.driven);
    assert!(pair.driven.has_xdp(DRIVEN_IF));
    let removed = pair.driven.enter(Bpffs::Absent, || detach_all(DRIVEN_IF).expect("detach"));
    assert_eq!(removed, 1);
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
#[ignore = "a child process of the permission and memlock tests, not a test"]
fn opener_prints_what_open_says() {
    opener();
}

#[test]
fn without_privileges_the_error_says_to_run_as_root() {
    require_root();
    // It fails at the first AF_XDP socket, before anything touches `lo`.
    let line = open_lo_behind(&["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]);
    assert!(line.contains("PermissionDenied"), "{line}");
    assert!(line.contains("run as root"), "{line}");
}

#[test]
fn a_umem_over_the_memlock_limit_says_to_raise_it() {
    require_root();
    // Root with CAP_IPC_LOCK is exempt from RLIMIT_MEMLOCK: take it away,
    // and leave 64 KiB for the 8 MiB UMEM. In a namespace of its own, in
    // case the open got further than it should.
    let ns = Netns::new("memlock");
    let line = open_lo_behind(&[
        "ip",
        "netns",
        "exec",
        &ns.name,
        "setpriv",
        "--bounding-set=-ipc_lock",
        "--inh-caps=-ipc_lock",
        "--",
        "prlimit",
        "--memlock=65536:65536",
    ]);
    assert!(line.contains("UmemRegistration"), "{line}");
    assert!(line.contains("RLIMIT_MEMLOCK"), "{line}");
    assert!(!ns.has_xdp("lo"));
}

#[test]
fn a_queue_that_already_has_a_socket_is_busy() {
    require_root();
    let pair = VethPair::new(1);
    let error = pair.driven.enter(Bpffs::Absent, || {
        let first = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open");
        let error = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).unwrap_err();
        assert!(pair.driven.has_xdp(DRIVEN_IF), "the failed open left the first socket's program alone");
        drop(first);
        error
    });
    assert!(matches!(error, AfXdpError::QueueBusy { queue_id: 0, .. }), "{error:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

/// Whether an echo request's data is what `ping` fills it with: byte `i`
/// is `i` (mod 256) after the 16-byte timestamp.
fn is_ping_pattern(data: &[u8]) -> bool {
    data.iter().enumerate().skip(16).all(|(i, &byte)| byte == i as u8)
}

/// Answers ARP and echo requests like [`respond`], and also returns the
/// echo requests' data lengths and whether each carried ping's pattern.
fn respond_checking(socket: &mut AfXdp, done: impl Fn() -> bool) -> Vec<(usize, bool)> {
    let mut echoes = Vec::new();
    respond_with(socket, done, |data| echoes.push((data.len(), is_ping_pattern(data))));
    echoes
}

/// What a socket on queue 0 of a veth at MTU 9000, opened with `config`,
/// saw while `kernel_side` ran: the echo requests (see
/// [`respond_checking`]), its counters, whether it is multi-buffer, its
/// largest frame and its warnings.
fn at_mtu_9000(
    pair: &VethPair,
    config: AfXdpConfig,
    kernel_side: impl FnOnce(),
) -> (Vec<(usize, bool)>, AfXdpStats, bool, usize, Vec<AfXdpWarning>) {
    drive(
        &pair.driven,
        Bpffs::Absent,
        |flags| {
            let mut socket = AfXdp::open(&config).expect("open AF_XDP at MTU 9000");
            flags.set_ready();
            let echoes = respond_checking(&mut socket, || flags.is_done());
            (echoes, socket.stats(), socket.multi_buffer(), socket.max_frame_len(), socket.warnings().to_vec())
        },
        kernel_side,
    )
}

/// `ping` from the kernel side with `size` bytes of data, not fragmented.
fn ping(pair: &VethPair, count: u32, size: u32) -> std::process::Output {
    pair.kernel.exec(&[
        "ping",
        "-c",
        &count.to_string(),
        "-s",
        &size.to_string(),
        "-M",
        "do",
        "-i",
        "0.2",
        "-W",
        "2",
        "-w",
        "10",
        &DRIVEN_IP.to_string(),
    ])
}

#[test]
fn jumbo_pings_cross_the_socket_in_several_umem_frames_each_way_intact() {
    require_root();
    // 8972 bytes of data: a 9000-byte IP packet, a 9014-byte frame, in
    // 2048-byte UMEM frames (1792 bytes each on receive after the headroom):
    // six parts in, five out.
    let pair = VethPair::with_mtu(1, 9000);
    let (echoes, stats, multi_buffer, max_frame_len, warnings) =
        at_mtu_9000(&pair, AfXdpConfig::new(DRIVEN_IF, 0), || {
            let out = ping(&pair, 3, 8972);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "jumbo ping failed: {text}");
            assert!(text.contains("3 received"), "{text}");
            // ping compares each reply's data with what it sent.
            assert!(!text.contains("wrong data"), "a reply came back altered: {text}");
        });
    assert!(multi_buffer, "MTU 9000 in 2048-byte frames asks for XDP_USE_SG");
    assert_eq!(max_frame_len, 9014);
    assert!(!warnings.iter().any(|w| matches!(w, AfXdpWarning::FramesLimited { .. })), "{warnings:?}");
    let jumbo: Vec<&(usize, bool)> = echoes.iter().filter(|(len, _)| *len == 8972).collect();
    assert!(jumbo.len() >= 3, "{echoes:?}");
    assert!(jumbo.iter().all(|(_, intact)| *intact), "every request arrived with ping's pattern: {echoes:?}");
    assert!(stats.rx_chained >= 3 && stats.tx_chained >= 3, "{stats:?}");
    assert_eq!(stats.rx_malformed_chains + stats.rx_invalid_descs + stats.tx_foreign_completions, 0, "{stats:?}");
    let kernel = stats.kernel.expect("XDP_STATISTICS");
    assert_eq!(kernel.rx_dropped + kernel.rx_invalid_descs + kernel.tx_invalid_descs, 0, "{kernel:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn jumbo_frames_in_4096_byte_umem_frames_take_three_parts() {
    require_root();
    let pair = VethPair::with_mtu(1, 9000);
    let config = AfXdpConfig { frame_size: 4096, ..AfXdpConfig::new(DRIVEN_IF, 0) };
    let (echoes, stats, multi_buffer, _, _) = at_mtu_9000(&pair, config, || {
        let out = ping(&pair, 2, 8972);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && !text.contains("wrong data"), "{text}");
    });
    assert!(multi_buffer);
    assert!(echoes.iter().filter(|(len, intact)| *len == 8972 && *intact).count() >= 2, "{echoes:?}");
    assert!(stats.rx_chained >= 2 && stats.tx_chained >= 2, "{stats:?}");
    assert_eq!(stats.rx_malformed_chains, 0, "{stats:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn without_multi_buffer_frames_are_limited_to_one_umem_frame_and_longer_ones_dropped() {
    require_root();
    // What a kernel or driver that refuses XDP_USE_SG leaves: the socket
    // opens at MTU 9000, says so, carries frames that fit one UMEM frame,
    // and the kernel drops longer ones.
    let pair = VethPair::with_mtu(1, 9000);
    let config = AfXdpConfig { multi_buffer: false, ..AfXdpConfig::new(DRIVEN_IF, 0) };
    let (echoes, stats, multi_buffer, max_frame_len, warnings) = at_mtu_9000(&pair, config, || {
        let small = ping(&pair, 2, 1000);
        assert!(small.status.success(), "{}", String::from_utf8_lossy(&small.stdout));
        let jumbo = ping(&pair, 2, 8972);
        let text = String::from_utf8_lossy(&jumbo.stdout);
        assert!(text.contains(" 0 received"), "a jumbo frame got through without multi-buffer: {text}");
    });
    assert!(!multi_buffer);
    assert_eq!(max_frame_len, 2048 - 256, "one UMEM frame less the XDP headroom");
    let limited = warnings.iter().find_map(|w| match w {
        AfXdpWarning::FramesLimited { mtu, max_frame_len, reason } => Some((*mtu, *max_frame_len, reason.clone())),
        _ => None,
    });
    let (mtu, limit, reason) = limited.unwrap_or_else(|| panic!("no FramesLimited warning: {warnings:?}"));
    assert_eq!((mtu, limit), (9000, 1792));
    assert!(reason.contains("off"), "{reason}");
    assert!(echoes.iter().all(|(len, _)| *len == 1000), "only the small pings arrived: {echoes:?}");
    assert!(echoes.len() >= 2, "{echoes:?}");
    let kernel = stats.kernel.expect("XDP_STATISTICS");
    assert!(kernel.rx_dropped >= 2, "the kernel dropped the jumbo frames: {kernel:?}");
    assert_eq!(stats.rx_chained + stats.tx_chained, 0, "{stats:?}");
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}

#[test]
fn with_kernel_busy_poll_an_empty_receive_polls_the_driver_and_pings_are_answered() {
    require_root();
    let pair = VethPair::new(1);
    let (seen, stats, warnings) = drive(
        &pair.driven,
        Bpffs::Absent,
        |flags| {
            let busy = KernelBusyPoll { timeout: Duration::from_micros(50), budget: 64 };
            let config = AfXdpConfig { kernel_busy_poll: Some(busy), ..AfXdpConfig::new(DRIVEN_IF, 0) };
            let mut socket = AfXdp::open(&config).expect("open AF_XDP with busy polling");
            flags.set_ready();
            let seen = respond(&mut socket, || flags.is_done());
            (seen, socket.stats(), socket.warnings().to_vec())
        },
        || {
            let out = ping(&pair, 3, 56);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        },
    );
    assert!(seen.echo_requests >= 3, "{seen:?}");
    assert!(!warnings.iter().any(|w| matches!(w, AfXdpWarning::KernelBusyPollRefused { .. })), "{warnings:?}");
    assert!(stats.rx_busy_polls > 0, "{stats:?}");
    assert_eq!(stats.rx_wakeups, 0, "busy polls replace the fill-ring wakeups: {stats:?}");
}

#[test]
fn copy_mode_sends_a_burst_in_one_wakeup_where_the_kernel_allows() {
    require_root();
    let pair = VethPair::new(1);
    let burst = 512;
    // What the kernel's end has received: it counts a frame when our
    // sendto hands it over.
    let received = || -> u64 {
        let out = pair.kernel.exec(&["cat", &format!("/sys/class/net/{KERNEL_IF}/statistics/rx_packets")]);
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("rx_packets")
    };
    let (sent, arrived, stats, tx_batch, warnings) = drive(
        &pair.driven,
        Bpffs::Absent,
        |flags| {
            let mut socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open AF_XDP on the veth");
            flags.set_ready();
            let frame = arp_reply(pair.kernel_mac(), KERNEL_IP);
            let before = received();
            let sent = socket.transmit(burst, |buf| {
                buf[..frame.len()].copy_from_slice(&frame);
                Some(frame.len())
            });
            // No wait or transmit after it: what the one call's kicks sent.
            let arrived = received() - before;
            (sent, arrived, socket.stats(), socket.tx_batch(), socket.warnings().to_vec())
        },
        || {},
    );
    assert_eq!(sent, burst, "{stats:?}");
    assert!(arrived >= burst as u64, "the call sent the whole burst: {arrived} of {burst} arrived; {stats:?}");
    let limited = warnings.iter().any(|w| matches!(w, AfXdpWarning::TxBatchLimited { frames: 32, .. }));
    if tx_batch == 32 {
        // A kernel before 6.17: a sendto per 32 frames, and a warning.
        assert!(limited, "{warnings:?}");
        assert!(stats.tx_wakeups >= (burst / 32) as u64, "{stats:?}");
    } else {
        assert!(!limited, "{warnings:?}");
        assert_eq!(tx_batch, AfXdpConfig::new(DRIVEN_IF, 0).tx_ring_size, "the whole TX ring per wake-up");
        assert!(stats.tx_wakeups <= 2, "one sendto for the burst, not one per 32 frames: {stats:?}");
    }
    let kernel = stats.kernel.expect("XDP_STATISTICS");
    assert_eq!(kernel.tx_invalid_descs, 0, "{kernel:?}");
}

/// A TCP segment from the driven end to the kernel's, `payload` after a
/// 20-byte header, in an IPv4 frame: with its checksum complete (by
/// smoltcp), and the same frame with the field holding only the
/// pseudo-header sum, as a shard that leaves checksums to the device
/// writes it.
fn tcp_frames(kernel_mac: smoltcp::wire::EthernetAddress, payload: &[u8]) -> (Vec<u8>, Vec<u8>) {
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, TcpPacket,
    };
    let tcp_len = 20 + payload.len();
    let eth = EthernetRepr { src_addr: DRIVEN_MAC, dst_addr: kernel_mac, ethertype: EthernetProtocol::Ipv4 };
    let ip = Ipv4Repr {
        src_addr: DRIVEN_IP,
        dst_addr: KERNEL_IP,
        next_header: IpProtocol::Tcp,
        payload_len: tcp_len,
        hop_limit: 64,
    };
    let mut frame = vec![0; 14 + 20 + tcp_len];
    let mut view = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.emit(&mut view);
    let mut packet = Ipv4Packet::new_unchecked(view.payload_mut());
    ip.emit(&mut packet, &ChecksumCapabilities::default());
    let mut tcp = TcpPacket::new_unchecked(packet.payload_mut());
    tcp.set_src_port(80);
    tcp.set_dst_port(40_000);
    tcp.set_seq_number(smoltcp::wire::TcpSeqNumber(1));
    tcp.set_ack_number(smoltcp::wire::TcpSeqNumber(1));
    tcp.set_header_len(20);
    tcp.set_ack(true);
    tcp.set_psh(true);
    tcp.set_window_len(1000);
    tcp.payload_mut().copy_from_slice(payload);
    tcp.fill_checksum(&IpAddress::Ipv4(DRIVEN_IP), &IpAddress::Ipv4(KERNEL_IP));
    let complete = frame.clone();
    // The pseudo-header sum: addresses, protocol, TCP length.
    let addresses = [DRIVEN_IP.octets(), KERNEL_IP.octets()];
    let words = addresses
        .iter()
        .flat_map(|o| [u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]])])
        .chain([6, tcp_len as u16]);
    let mut sum: u32 = words.map(u32::from).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut partial = complete.clone();
    partial[34 + 16..34 + 18].copy_from_slice(&(sum as u16).to_be_bytes());
    (complete, partial)
}

/// What a packet socket with `PACKET_VNET_HDR` on the kernel's end saw of
/// one frame: the `virtio_net_hdr` flags, checksum start and offset, and the
/// frame.
struct Arrived {
    needs_checksum: bool,
    csum_start: u16,
    csum_offset: u16,
    frame: Vec<u8>,
}

/// A packet socket on `KERNEL_IF` (opened in the kernel's namespace) that
/// puts the kernel's `virtio_net_hdr` in front of each frame: it says
/// whether the frame's skb carries a checksum still to be finished
/// (`CHECKSUM_PARTIAL`) and where.
fn vnet_receiver(pair: &VethPair) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    pair.kernel.enter(Bpffs::Absent, || {
        let name = std::ffi::CString::new(KERNEL_IF).expect("no NUL");
        // SAFETY: a NUL-terminated name that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex > 0, "the kernel's end: {}", std::io::Error::last_os_error());
        // SAFETY: plain socket(2); the descriptor is ours alone.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from((libc::ETH_P_ALL as u16).to_be())) };
        assert!(fd >= 0, "packet socket: {}", std::io::Error::last_os_error());
        // SAFETY: just returned by socket(2), owned by no one else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let set = |level, option, value: &[u8]| {
            // SAFETY: setsockopt reads `value`, which lives for the call.
            let rc = unsafe { libc::setsockopt(fd_raw(&fd), level, option, value.as_ptr().cast(), value.len() as u32) };
            assert_eq!(rc, 0, "setsockopt {option}: {}", std::io::Error::last_os_error());
        };
        set(libc::SOL_PACKET, libc::PACKET_VNET_HDR, &1i32.to_ne_bytes());
        let timeout = libc::timeval { tv_sec: 2, tv_usec: 0 };
        // SAFETY: a timeval is plain data; viewed as its bytes for the call.
        let bytes = unsafe {
            std::slice::from_raw_parts(std::ptr::from_ref(&timeout).cast::<u8>(), size_of::<libc::timeval>())
        };
        set(libc::SOL_SOCKET, libc::SO_RCVTIMEO, bytes);
        // SAFETY: sockaddr_ll is plain data; all-zero is valid.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        address.sll_ifindex = ifindex as i32;
        // SAFETY: bind reads the sockaddr_ll, which lives for the call.
        let rc = unsafe {
            libc::bind(fd_raw(&fd), std::ptr::from_ref(&address).cast(), size_of::<libc::sockaddr_ll>() as u32)
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        fd
    })
}

fn fd_raw(fd: &std::os::fd::OwnedFd) -> i32 {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

/// The next IPv4 TCP frame the receiver sees (other frames, the kernel's
/// own IPv6 chatter say, are passed over), or `None` after its timeout.
fn next_tcp_frame(fd: &std::os::fd::OwnedFd) -> Option<Arrived> {
    let mut buf = vec![0u8; 10 + 16_384];
    loop {
        // SAFETY: recv writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::recv(fd_raw(fd), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return None;
        }
        let (header, frame) = buf[..n as usize].split_at(10);
        if frame.len() > 34 && frame[12..14] == [0x08, 0x00] && frame[23] == 6 {
            let word = |i: usize| u16::from_ne_bytes([header[i], header[i + 1]]);
            return Some(Arrived {
                needs_checksum: header[0] & 1 != 0,
                csum_start: word(6),
                csum_offset: word(8),
                frame: frame.to_vec(),
            });
        }
    }
}

#[test]
fn tcp_checksums_left_partial_are_finished_by_the_kernel_once_asked() {
    require_root();
    let pair = VethPair::new(1);
    let receiver = vnet_receiver(&pair);
    let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
    let (complete, partial) = tcp_frames(pair.kernel_mac(), &payload);
    assert_ne!(complete, partial);
    let send = |socket: &mut AfXdp, frame: &[u8]| {
        let sent = socket.transmit(1, |buf| {
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        });
        assert_eq!(sent, 1);
        let _ = socket.wait(Some(Duration::ZERO));
    };
    let (offloaded, stats, warnings) = pair.driven.enter(Bpffs::Absent, || {
        let mut socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open AF_XDP on the veth");
        // Until asked, a frame leaves as written: a complete one.
        send(&mut socket, &complete);
        let offloaded = socket.offload_tx_checksums();
        if offloaded {
            send(&mut socket, &partial);
        }
        (offloaded, socket.stats(), socket.warnings().to_vec())
    });
    let as_written = next_tcp_frame(&receiver).expect("the complete frame arrived");
    assert!(!as_written.needs_checksum, "not asked: no checksum request");
    assert_eq!(as_written.frame, complete);
    // Transmit metadata (XDP_UMEM_TX_METADATA_LEN) came with Linux 6.11.
    let release = run("uname", &["-r"]);
    let mut version = release.trim().split(['.', '-']).map(|part| part.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    if (major, minor) < (6, 11) {
        assert!(!offloaded);
        assert!(warnings.iter().any(|w| matches!(w, AfXdpWarning::ChecksumOffloadUnavailable { .. })), "{warnings:?}");
        return;
    }
    assert!(offloaded, "copy mode on Linux {major}.{minor} takes checksum requests: {warnings:?}");
    assert_eq!(stats.tx_checksum_offloaded, 1, "{stats:?}");
    assert_eq!(stats.kernel.expect("XDP_STATISTICS").tx_invalid_descs, 0, "{stats:?}");
    let arrived = next_tcp_frame(&receiver).expect("the partial frame arrived");
    // The kernel took the request: the skb carries a partial checksum at
    // the TCP header, for the next device to finish (or a local stack to
    // trust), and the frame is as written.
    assert!(arrived.needs_checksum, "the frame left with a checksum request");
    assert_eq!((arrived.csum_start, arrived.csum_offset), (34, 16));
    assert_eq!(arrived.frame, partial);
    // Finished where the kernel says, it is the complete frame.
    let mut finished = arrived.frame;
    assert!(fairway_stack::finish_partial_checksum(&mut finished));
    assert_eq!(finished, complete);
}

/// An interface with its transmit checksumming off would have the kernel
/// compute each requested checksum in a pass of its own: the socket does
/// not offer the offload there, and says why.
#[test]
fn without_the_interfaces_transmit_checksumming_the_offload_is_declined() {
    require_root();
    let pair = VethPair::new(1);
    let out = pair.driven.exec(&["ethtool", "-K", DRIVEN_IF, "tx", "off"]);
    assert!(out.status.success(), "ethtool: {}", String::from_utf8_lossy(&out.stderr));
    let (offloaded, warnings) = pair.driven.enter(Bpffs::Absent, || {
        let mut socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("open AF_XDP on the veth");
        (socket.offload_tx_checksums(), socket.warnings().to_vec())
    });
    assert!(!offloaded);
    let reason = warnings.iter().find_map(|w| match w {
        AfXdpWarning::ChecksumOffloadUnavailable { reason } => Some(reason.clone()),
        _ => None,
    });
    assert!(reason.is_some_and(|r| r.contains("transmit checksumming off")), "{warnings:?}");
}

/// At MTU 9000 a frame spans three UMEM frames: in copy mode the socket
/// moves to an unaligned UMEM, where each of its descriptors has the room
/// for metadata the kernel counts, and the checksum request still goes out
/// with the first.
#[test]
fn a_jumbo_tcp_frame_in_several_descriptors_still_carries_its_checksum_request() {
    require_root();
    let pair = VethPair::with_mtu(1, 9000);
    let receiver = vnet_receiver(&pair);
    let payload: Vec<u8> = (0..8960u32).map(|i| (i * 13 + 5) as u8).collect();
    let (complete, partial) = tcp_frames(pair.kernel_mac(), &payload);
    assert_eq!(complete.len(), 9014);
    let (offloaded, stats, warnings) = pair.driven.enter(Bpffs::Absent, || {
        let mut socket = AfXdp::open(&AfXdpConfig { frame_size: 4096, ..AfXdpConfig::new(DRIVEN_IF, 0) })
            .expect("open AF_XDP on the veth");
        assert!(socket.multi_buffer(), "{:?}", socket.warnings());
        let offloaded = socket.offload_tx_checksums();
        let frame = if offloaded { &partial } else { &complete };
        let sent = socket.transmit(1, |buf| {
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        });
        assert_eq!(sent, 1);
        let _ = socket.wait(Some(Duration::ZERO));
        (offloaded, socket.stats(), socket.warnings().to_vec())
    });
    assert!(offloaded, "copy mode takes the request with multi-buffer frames too: {warnings:?}");
    assert_eq!((stats.tx_chained, stats.tx_checksum_offloaded), (1, 1), "{stats:?}");
    assert_eq!(stats.kernel.expect("XDP_STATISTICS").tx_invalid_descs, 0, "{stats:?}");
    let arrived = next_tcp_frame(&receiver).expect("the jumbo frame arrived");
    assert!(arrived.needs_checksum, "the frame left with a checksum request");
    assert_eq!((arrived.csum_start, arrived.csum_offset), (34, 16));
    assert_eq!(arrived.frame.len(), 9014);
    let mut finished = arrived.frame;
    assert!(fairway_stack::finish_partial_checksum(&mut finished));
    assert!(finished == complete, "the finished jumbo frame is the complete one");
}
