//! [`AfXdpConfig`]: what to bind, how much UMEM to map, and which kernel
//! modes to ask for.

use core::fmt;
use std::time::Duration;

/// How the socket moves frames between the driver and the UMEM (the bind
/// flags `XDP_COPY` / `XDP_ZEROCOPY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BindMode {
    /// Zero-copy if the driver supports it, copy otherwise (the kernel's
    /// own fallback). [`AfXdp::bind_mode`](super::AfXdp::bind_mode) says
    /// which one the socket got.
    #[default]
    Auto,
    /// Copy mode: works on every interface; the kernel copies each frame
    /// between its buffers and the UMEM.
    Copy,
    /// Zero-copy: the driver DMAs straight into the UMEM. Opening fails with
    /// [`AfXdpError::ZeroCopyUnsupported`](super::AfXdpError::ZeroCopyUnsupported)
    /// when the driver cannot (veth, for one).
    ZeroCopy,
}

/// Where the XDP program that steers frames to the socket runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// Native if the driver supports it, generic otherwise.
    /// [`AfXdp::xdp_mode`](super::AfXdp::xdp_mode) says which one the
    /// program got.
    #[default]
    Auto,
    /// Native (driver) mode: the program runs in the driver's receive path.
    Native,
    /// Generic (SKB) mode: the program runs after the kernel has built an
    /// skb. Slower, but every interface has it.
    Generic,
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::Auto => "auto",
            BindMode::Copy => "copy",
            BindMode::ZeroCopy => "zero-copy",
        })
    }
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpMode::Auto => "auto",
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        })
    }
}

/// Everything [`AfXdp::open`](super::AfXdp::open) needs. Start from
/// [`AfXdpConfig::new`] and change what you need.
///
/// # Frames
///
/// The UMEM holds `frame_count` frames of `frame_size` bytes. The first
/// `fill_ring_size` of them circulate on the receive side (fill ring → RX
/// ring → the receive callback → fill ring); the rest circulate on the
/// transmit side (free list → the transmit callback → TX ring → completion
/// ring → free list). Neither side allocates or steals from the other, so
/// the receive side can always give a frame back to the fill ring.
///
/// Each frame starts with the kernel's 256-byte XDP headroom, so a frame
/// carries at most `frame_size - 256` bytes of Ethernet frame; the
/// interface's MTU may lower that further
/// ([`Device::max_frame_len`](crate::Device::max_frame_len)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// The interface, as `ip link` names it, in the network namespace of
    /// the thread that opens the socket.
    pub interface: String,
    /// The interface queue to bind to (0-based).
    pub queue_id: u32,
    /// Frames in the UMEM. Default 4096.
    pub frame_count: u32,
    /// Bytes per frame: 2048 or 4096 (the kernel wants a power of two for
    /// an aligned UMEM, and at least 2048). Default 2048.
    pub frame_size: u32,
    /// Fill ring entries (a power of two): also how many frames serve the
    /// receive side. Default 2048.
    pub fill_ring_size: u32,
    /// Completion ring entries (a power of two). Default 2048.
    pub completion_ring_size: u32,
    /// RX ring entries (a power of two). Default 2048.
    pub rx_ring_size: u32,
    /// TX ring entries (a power of two). Default 2048.
    pub tx_ring_size: u32,
    /// Copy or zero-copy. Default [`BindMode::Auto`].
    pub bind_mode: BindMode,
    /// Native or generic XDP. Default [`XdpMode::Auto`].
    pub xdp_mode: XdpMode,
    /// Bind with `XDP_USE_NEED_WAKEUP`: the kernel says when it needs a
    /// syscall to go on, and the socket makes one only then. Default `true`.
    pub need_wakeup: bool,
    /// Use multi-buffer AF_XDP (`XDP_USE_SG`) when the interface's MTU
    /// allows frames longer than one UMEM frame holds (`frame_size` less
    /// the 256-byte headroom): a frame is then received in several UMEM
    /// frames and sent from several neighbouring ones. When off, or when
    /// the kernel refuses it, frames are limited to one UMEM frame
    /// ([`AfXdpWarning::FramesLimited`](super::AfXdpWarning::FramesLimited)).
    /// Default `true`.
    pub multi_buffer: bool,
    /// Drive the interface's receive processing (its NAPI context) from
    /// this socket's thread while it busy-polls, instead of leaving it to
    /// softirqs: `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and
    /// `SO_BUSY_POLL_BUDGET`, and a non-blocking `recvfrom` whenever
    /// [`Device::receive`](crate::Device::receive) finds the RX ring empty.
    /// Default `None` (off).
    pub kernel_busy_poll: Option<KernelBusyPoll>,
    /// Have the kernel finish the TCP checksum of every frame sent: the
    /// UMEM is registered with room for transmit metadata
    /// (`XDP_UMEM_TX_METADATA_LEN`, Linux 6.11) and each TCP frame asks for
    /// its checksum there, so the stack only writes the pseudo-header sum
    /// ([`Device::offload_tx_checksums`](crate::Device::offload_tx_checksums)).
    /// Taken in copy mode (with multi-buffer frames, over an unaligned
    /// UMEM), on an interface whose own transmit checksumming is on
    /// (`ethtool -k`: a veth's and almost every NIC's; off, the kernel would
    /// compute each checksum in a pass of its own). Otherwise (an older
    /// kernel, zero-copy mode, `tx-checksumming: off`) the stack computes
    /// checksums itself
    /// ([`AfXdpWarning::ChecksumOffloadUnavailable`](super::AfXdpWarning::ChecksumOffloadUnavailable)).
    /// Default `true`.
    pub tx_checksum_offload: bool,
}

/// How [`AfXdpConfig::kernel_busy_poll`] busy-polls the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelBusyPoll {
    /// How long a blocking `poll` busy-polls the driver before it sleeps
    /// (`SO_BUSY_POLL`, rounded to microseconds).
    pub timeout: Duration,
    /// Packets the driver processes per busy-poll round
    /// (`SO_BUSY_POLL_BUDGET`).
    pub budget: u16,
}

impl AfXdpConfig {
    /// The defaults for queue `queue_id` of `interface`: 4096 frames of
    /// 2048 bytes (8 MiB of UMEM), 2048-entry rings, automatic bind and XDP
    /// modes, need_wakeup, multi-buffer and checksum offload on.
    pub fn new(interface: impl Into<String>, queue_id: u32) -> AfXdpConfig {
        AfXdpConfig {
            interface: interface.into(),
            queue_id,
            frame_count: 4096,
            frame_size: 2048,
            fill_ring_size: 2048,
            completion_ring_size: 2048,
            rx_ring_size: 2048,
            tx_ring_size: 2048,
            bind_mode: BindMode::Auto,
            xdp_mode: XdpMode::Auto,
            need_wakeup: true,
            multi_buffer: true,
            kernel_busy_poll: None,
            tx_checksum_offload: true,
        }
    }

    /// Frames that serve the receive side.
    pub(super) fn rx_frames(&self) -> u32 {
        self.fill_ring_size
    }

    /// Checks what the kernel would otherwise reject with a bare `EINVAL`.
    /// Returns what is wrong, in words.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.interface.is_empty() || self.interface.len() >= libc::IFNAMSIZ || self.interface.contains(['\0', '/']) {
            return Err(format!(
                "interface name {:?} is not a valid name (1 to {} bytes, no '/' or NUL)",
                self.interface,
                libc::IFNAMSIZ - 1
            ));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!("frame_size is {}; use 2048 or 4096", self.frame_size));
        }
        let rings = [
            ("fill_ring_size", self.fill_ring_size),
            ("completion_ring_size", self.completion_ring_size),
            ("rx_ring_size", self.rx_ring_size),
            ("tx_ring_size", self.tx_ring_size),
        ];
        for (name, size) in rings {
            if !size.is_power_of_two() {
                return Err(format!("{name} is {size}; ring sizes must be powers of two"));
            }
        }
        if self.frame_count <= self.fill_ring_size {
            return Err(format!(
                "frame_count ({}) must exceed fill_ring_size ({}): the frames beyond the fill ring are the transmit frames",
                self.frame_count, self.fill_ring_size
            ));
        }
        if u64::from(self.frame_count) * u64::from(self.frame_size) > isize::MAX as u64 {
            return Err(format!("{} frames of {} bytes do not fit in memory", self.frame_count, self.frame_size));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_the_check() {
        let config = AfXdpConfig::new("eth0", 0);
        assert_eq!(config.check(), Ok(()));
        assert_eq!(config.rx_frames(), 2048, "half the frames receive, half transmit");
    }

    #[test]
    fn the_check_names_what_is_wrong() {
        let bad = |edit: fn(&mut AfXdpConfig)| {
            let mut config = AfXdpConfig::new("eth0", 0);
            edit(&mut config);
            config.check().unwrap_err()
        };
        assert!(bad(|c| c.frame_size = 3000).contains("frame_size"));
        assert!(bad(|c| c.tx_ring_size = 1000).contains("tx_ring_size"));
        assert!(bad(|c| c.frame_count = 2048).contains("frame_count"));
        assert!(bad(|c| c.interface = String::new()).contains("interface name"));
        assert!(bad(|c| c.interface = "a-name-far-too-long".into()).contains("interface name"));
    }
}
