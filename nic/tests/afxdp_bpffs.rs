//! The AF_XDP backend with a BPF filesystem mounted, where libxdp attaches
//! its program through its multi-program dispatcher if the kernel permits
//! the dispatcher's extension (freplace) programs, and alone otherwise (as
//! on a kernel whose lockdown or sandbox refuses them); `afxdp.rs` covers
//! the case without a BPF filesystem. libxdp remembers where it found the
//! filesystem, so everything here runs on one thread of its own mount
//! namespace, in one test. Needs root.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

mod afxdp_support;

use std::time::{Duration, Instant};

use afxdp_support::*;
use fairway_nic::afxdp::{AfXdp, AfXdpConfig, AfXdpWarning, BindMode, XdpMode, detach_all};
use fairway_nic::{Device, Wait};

/// The dispatcher's pinned state on the thread's BPF filesystem.
fn dispatcher_pins() -> Vec<String> {
    std::fs::read_dir("/sys/fs/bpf/xdp")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("dispatch-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn with_a_bpf_filesystem_two_queues_are_served_and_the_program_leaves() {
    require_root();
    let pair = VethPair::new(2);
    let attached_program = std::sync::Mutex::new(String::new());
    let outcome = drive(
        &pair.driven,
        Bpffs::Mounted,
        |flags| {
            let mut sockets =
                [0, 1].map(|queue| AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, queue)).expect("open a queue"));
            flags.set_ready();
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut seen = Seen::default();
            while !flags.is_done() && Instant::now() < deadline {
                for socket in &mut sockets {
                    let mut replies = Vec::new();
                    socket.receive(64, |frame| match classify(frame) {
                        Request::Arp(mac, ip) => {
                            seen.arp_requests += 1;
                            replies.push(arp_reply(mac, ip));
                        }
                        Request::Echo { mac, ip, ident, seq_no, data } => {
                            seen.echo_requests += 1;
                            replies.push(echo_reply(mac, ip, ident, seq_no, &data));
                        }
                        _ => {}
                    });
                    send_all(socket, &replies);
                }
                sockets[0].wait(Some(Duration::from_millis(5))).expect("wait");
            }
            let modes = sockets.each_ref().map(|s| (s.bind_mode(), s.xdp_mode()));
            let warnings: Vec<AfXdpWarning> = sockets.iter().flat_map(|s| s.warnings().to_vec()).collect();
            let pins_while_open = dispatcher_pins();
            drop(sockets);
            let left_after_drop = (pair.driven.has_xdp(DRIVEN_IF), dispatcher_pins());

            // detach_all takes the program out of the dispatcher too.
            let socket = AfXdp::open(&AfXdpConfig::new(DRIVEN_IF, 0)).expect("reopen");
            let removed = detach_all(DRIVEN_IF).expect("detach_all");
            let left_after_detach = (pair.driven.has_xdp(DRIVEN_IF), dispatcher_pins());
            drop(socket);
            (seen, modes, warnings, pins_while_open, left_after_drop, removed, left_after_detach)
        },
        || {
            let details = pair.driven.ip(&["-d", "link", "show", "dev", DRIVEN_IF]);
            *attached_program.lock().unwrap() = details;
            let ping =
                pair.kernel.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", "-w", "10", &DRIVEN_IP.to_string()]);
            assert!(ping.status.success(), "ping failed: {}", String::from_utf8_lossy(&ping.stdout));
        },
    );
    let (seen, modes, warnings, pins_while_open, left_after_drop, removed, left_after_detach) = outcome;
    assert!(seen.arp_requests >= 1 && seen.echo_requests >= 3, "{seen:?}");
    assert_eq!(modes, [(BindMode::Copy, XdpMode::Native); 2]);
    assert!(!warnings.iter().any(|w| matches!(w, AfXdpWarning::NoBpffs { .. })), "{warnings:?}");
    let details = attached_program.into_inner().unwrap();
    if details.contains("xdp_dispatcher") {
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(pins_while_open.len(), 1, "one dispatcher pinned: {pins_while_open:?}");
    } else {
        // The kernel refused the dispatcher; libxdp fell back, and said so.
        assert!(details.contains("xsk_def_prog"), "{details}");
        assert_eq!(warnings, [AfXdpWarning::NoDispatcher, AfXdpWarning::NoDispatcher]);
        assert!(pins_while_open.is_empty(), "{pins_while_open:?}");
    }
    assert_eq!(left_after_drop, (false, Vec::new()), "dropping both sockets removed the dispatcher and its pins");
    assert_eq!(removed, 1);
    assert_eq!(left_after_detach, (false, Vec::new()));
    assert!(!pair.driven.has_xdp(DRIVEN_IF));
}
