//! The receive-path techniques that can be switched off, for the ablation
//! (`cargo xtask lab ablation`): recycling (`--recycle`, `--no-recycle`) and
//! flow steering (`--steering`). Interrupt moderation has its own knobs
//! (`--busy-poll-us`, `--itr-us`, `--batch`, `--no-adaptive-batch`).
//!
//! Every switch is on by default and costs nothing on: the pools, the
//! device's own buffers and the steering fabric are what runs. Off, each
//! part does what a conventional stack does instead:
//!
//! - `frames`: every received frame is copied into a buffer allocated for
//!   it alone (an `sk_buff`) and freed once handled, every sent frame is
//!   written into one and copied to the device's buffer
//!   ([`fairway_nic::fresh_frames`]), instead of the AF_XDP UMEM (or TAP
//!   buffer) being lent in place;
//! - `buffers`: each connection's receive and send rings, reassembly and
//!   sent-queue storage, and the shard's control frames are allocated when
//!   needed and freed when let go, not taken from the shard's pools;
//! - `handles`: each connection's state (behind its generational handle,
//!   the stack's file descriptor) is boxed on an allocation of its own when
//!   it opens and freed when it closes, not kept in the reused slab slot;
//! - `events`: each event the stack queues for the application (its
//!   `epoll_event`) is boxed, and freed when polled.
//!
//! These apply to the userspace backends; the kernel backend's sockets,
//! buffers and epoll are the kernel's. Steering applies to both (on the
//! kernel backend: `SO_REUSEPORT` listeners, one per shard, or one shared).

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;
use serde::Deserialize;

/// How frames reach the shard that owns their flow (userspace backends),
/// or new connections a shard of their own (kernel backend).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Steering {
    /// Each shard classifies the frames of its queue by Fairway's symmetric
    /// hash of the 4-tuple and passes those of other shards' flows to them
    /// over lock-free queues; ARP goes to every shard. On the kernel
    /// backend, each shard has its own `SO_REUSEPORT` listener, and the
    /// kernel picks a new connection's shard by the hash of its 4-tuple.
    #[default]
    Software,
    /// Each shard handles whatever its own queue receives, as with a NIC's
    /// RSS alone: nothing is classified or passed on. A passive connection
    /// lives on the shard whose queue brought its SYN (a NIC or veth puts
    /// every frame of a flow on one queue), which need not be its owner by
    /// Fairway's hash; only ARP still reaches every shard, as one
    /// neighbour table would. With several queues, outbound connections
    /// (--upstream) need software steering. On the kernel backend, the
    /// shards share one listener (one accept queue, every shard's epoll
    /// woken by each new connection), as threads around one socket do.
    Off,
}

impl fmt::Display for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Steering::Software => "software",
            Steering::Off => "off",
        })
    }
}

/// What the userspace stack recycles: each part on is taken from a pool
/// and given back; off, allocated and freed per use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recycling {
    /// Frame buffers: the device's own (the AF_XDP UMEM), lent in place.
    pub frames: bool,
    /// Per-connection buffers and the shard's control frames.
    pub buffers: bool,
    /// Connection slots and handles (the study's `fd`).
    pub handles: bool,
    /// Event records (the study's `epoll_event`).
    pub events: bool,
}

impl Recycling {
    /// The parts' names, in `--recycle` lists.
    pub const NAMES: [&'static str; 4] = ["frames", "buffers", "handles", "events"];
    /// Everything recycled: the default.
    pub const ALL: Recycling = Recycling { frames: true, buffers: true, handles: true, events: true };
    /// Nothing recycled.
    pub const NONE: Recycling = Recycling { frames: false, buffers: false, handles: false, events: false };

    /// The parts as flags, in [`Recycling::NAMES`]' order.
    fn parts(self) -> [bool; 4] {
        [self.frames, self.buffers, self.handles, self.events]
    }

    fn from_parts([frames, buffers, handles, events]: [bool; 4]) -> Recycling {
        Recycling { frames, buffers, handles, events }
    }

    /// Everything but what `self` holds (`--no-recycle LIST`).
    #[must_use]
    pub fn complement(self) -> Recycling {
        Recycling::from_parts(self.parts().map(|on| !on))
    }

    /// The stack's share of it: everything but the frame buffers, which
    /// are the device's.
    #[must_use]
    pub fn stack(self) -> fairway_stack::Recycle {
        fairway_stack::Recycle { buffers: self.buffers, handles: self.handles, events: self.events }
    }
}

impl Default for Recycling {
    fn default() -> Recycling {
        Recycling::ALL
    }
}

/// `all`, `none`, or the parts that are on, comma-separated.
impl fmt::Display for Recycling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Recycling::ALL => f.write_str("all"),
            Recycling::NONE => f.write_str("none"),
            _ => {
                let on: Vec<&str> =
                    Recycling::NAMES.iter().zip(self.parts()).filter(|(_, on)| *on).map(|(n, _)| *n).collect();
                f.write_str(&on.join(","))
            }
        }
    }
}

/// A list of parts, as `--recycle` and `--no-recycle` take it: `all`,
/// `none`, or some of frames, buffers, handles and events, comma-separated.
/// The parts named are set; the others are not.
impl FromStr for Recycling {
    type Err = String;
    fn from_str(s: &str) -> Result<Recycling, String> {
        match s.trim() {
            "all" => return Ok(Recycling::ALL),
            "none" => return Ok(Recycling::NONE),
            _ => {}
        }
        let mut parts = [false; 4];
        for name in s.split(',').map(str::trim) {
            let Some(at) = Recycling::NAMES.iter().position(|&n| n == name) else {
                return Err(format!(
                    "unknown part '{name}' in '{s}' (all, none, or some of {})",
                    Recycling::NAMES.join(",")
                ));
            };
            parts[at] = true;
        }
        Ok(Recycling::from_parts(parts))
    }
}

impl<'de> Deserialize<'de> for Recycling {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Recycling, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Every receive-path switch off, as server flags, each group with the
/// flags that set the same thing: nothing recycled, no steering, and no
/// interrupt moderation (no busy polling, no coalescing, a frame or event
/// per loop turn). The ablation's conventional baseline.
const ALL_OFF: [(&[&str], &[&str]); 6] = [
    (&["--recycle", "none"], &["--recycle", "--no-recycle"]),
    (&["--steering", "off"], &["--steering"]),
    (&["--busy-poll-us", "0"], &["--busy-poll-us"]),
    (&["--itr-us", "0"], &["--itr-us"]),
    (&["--no-adaptive-batch"], &["--no-adaptive-batch"]),
    (&["--batch", "1"], &["--batch"]),
];

/// The environment variable under which the project's end-to-end test
/// harnesses start every server with [`all_off`] (`cargo xtask test` runs
/// the server tests a second time with it set). The server never reads it.
pub const ALL_OFF_ENV: &str = "FAIRWAY_TEST_ALL_OFF";

/// `flags` (a command line without the program) followed by the flags that
/// switch off every receive-path technique they do not set themselves.
///
/// Steering stays on with several queues and with `--upstream`: there,
/// off is for measurement only, since a shard keeps what its own queue
/// brings and a flow the sender moves to another queue (a kernel rehashes
/// a flow after a retransmission timeout, a SYN's included) reaches a shard
/// that does not know it.
#[must_use]
pub fn all_off(flags: &[&str]) -> Vec<String> {
    let sets = |name: &str| flags.iter().any(|f| *f == name || f.starts_with(&format!("{name}=")));
    let queues = flags.iter().enumerate().find_map(|(i, f)| match f.strip_prefix("--queues") {
        Some("") => flags.get(i + 1).and_then(|n| n.parse::<u32>().ok()),
        Some(rest) => rest.strip_prefix('=').and_then(|n| n.parse().ok()),
        None => None,
    });
    let needs_steering = sets("--upstream") || queues.is_some_and(|q| q > 1);
    let mut out: Vec<String> = flags.iter().map(|&f| f.to_owned()).collect();
    for (off, overridden_by) in ALL_OFF {
        let kept = off[0] == "--steering" && needs_steering;
        if !kept && !overridden_by.iter().any(|name| sets(name)) {
            out.extend(off.iter().map(|&f| f.to_owned()));
        }
    }
    out
}

/// [`all_off`] when [`ALL_OFF_ENV`] is set (to anything but empty or `0`),
/// else `flags` as they are.
#[must_use]
pub fn all_off_if_asked(flags: &[&str]) -> Vec<String> {
    match std::env::var(ALL_OFF_ENV) {
        Ok(v) if !v.is_empty() && v != "0" => all_off(flags),
        _ => flags.iter().map(|&f| f.to_owned()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print() {
        assert_eq!("all".parse(), Ok(Recycling::ALL));
        assert_eq!("none".parse(), Ok(Recycling::NONE));
        let some: Recycling = "handles, events".parse().unwrap();
        assert_eq!(some, Recycling { frames: false, buffers: false, handles: true, events: true });
        assert_eq!(some.to_string(), "handles,events");
        assert_eq!(some.complement(), Recycling { frames: true, buffers: true, handles: false, events: false });
        assert_eq!(Recycling::NONE.complement(), Recycling::ALL);
        for text in ["all", "none", "frames", "buffers,handles"] {
            assert_eq!(text.parse::<Recycling>().unwrap().to_string(), text);
        }
        let err = "handles,sockets".parse::<Recycling>().unwrap_err();
        assert_eq!(
            err,
            "unknown part 'sockets' in 'handles,sockets' (all, none, or some of frames,buffers,handles,events)"
        );
        assert!("".parse::<Recycling>().is_err());
    }

    fn load(args: &[&str]) -> Result<super::super::Config, String> {
        super::super::Config::load(std::iter::once("fairway").chain(args.iter().copied()), None)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn flags_and_the_config_file() {
        let defaults = load(&[]).unwrap();
        assert_eq!((defaults.recycle, defaults.steering), (Recycling::ALL, Steering::Software));
        let off = load(&["--no-recycle", "handles,events", "--steering", "off"]).unwrap();
        assert_eq!(off.recycle, Recycling { frames: true, buffers: true, handles: false, events: false });
        assert_eq!(off.steering, Steering::Off);
        assert_eq!(load(&["--recycle", "none"]).unwrap().recycle, Recycling::NONE);
        assert_eq!(load(&["--recycle", "frames"]).unwrap().recycle.to_string(), "frames");
        let both = load(&["--recycle", "all", "--no-recycle", "events"]).unwrap_err();
        assert!(both.contains("cannot be used with"), "{both}");
        let bad = load(&["--recycle", "sockets"]).unwrap_err();
        assert!(bad.contains("unknown part 'sockets'"), "{bad}");
        let file = |text: &str| {
            super::super::parse_file(std::path::Path::new("f.toml"), text)
                .and_then(|o| o.resolve(None))
                .map_err(|e| e.to_string())
        };
        let from_file = file("recycle = \"buffers,events\"\nsteering = \"off\"").unwrap();
        assert_eq!(from_file.recycle, Recycling { frames: false, buffers: true, handles: false, events: true });
        assert_eq!(from_file.steering, Steering::Off);
        assert_eq!(file("no-recycle = \"frames\"").unwrap().recycle, "buffers,handles,events".parse().unwrap());
        let in_file = file("recycle = \"none\"\nno-recycle = \"events\"").unwrap_err();
        assert_eq!(in_file, "--recycle and --no-recycle: give one of them");
        let line = file("recycle = \"fds\"").unwrap_err();
        assert!(line.starts_with("f.toml:1: unknown part 'fds'") && !line.contains('\n'), "{line}");
        let proxied =
            load(&["--steering", "off", "--queues", "2", "--shards", "2", "--upstream", "a=http://127.0.0.1:1"]);
        assert!(proxied.unwrap_err().contains("--steering off with several --queues"));
    }

    #[test]
    fn the_stack_gets_all_but_the_frames() {
        let r = Recycling { frames: false, buffers: true, handles: false, events: true };
        assert_eq!(r.stack(), fairway_stack::Recycle { buffers: true, handles: false, events: true });
        assert_eq!(Recycling::ALL.stack(), fairway_stack::Recycle::ALL);
        assert_eq!(Recycling::NONE.stack(), fairway_stack::Recycle::NONE);
    }

    #[test]
    fn all_off_switches_off_what_the_flags_leave_alone_and_parses() {
        let flags = all_off(&["--backend", "tap", "--batch=8", "--no-recycle", "events"]);
        let words: Vec<&str> = flags.iter().map(String::as_str).collect();
        assert_eq!(
            words,
            [
                "--backend",
                "tap",
                "--batch=8",
                "--no-recycle",
                "events",
                "--steering",
                "off",
                "--busy-poll-us",
                "0",
                "--itr-us",
                "0",
                "--no-adaptive-batch",
            ]
        );
        let all = all_off(&[]);
        let c = load(&all.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!((c.recycle, c.steering), (Recycling::NONE, Steering::Off));
        assert_eq!(c.runtime.busy_poll, std::time::Duration::ZERO);
        assert_eq!(c.runtime.itr, std::time::Duration::ZERO);
        assert!(!c.runtime.adaptive_batch);
        assert_eq!(c.runtime.batch, 1);
        // Steering is left alone in front of upstreams and with several
        // queues, but not with one.
        assert!(!all_off(&["--upstream", "a=http://127.0.0.1:1"]).contains(&"off".to_owned()));
        assert!(!all_off(&["--queues", "2"]).contains(&"off".to_owned()));
        assert!(!all_off(&["--queues=2"]).contains(&"off".to_owned()));
        assert!(all_off(&["--queues", "1"]).contains(&"off".to_owned()));
    }
}
