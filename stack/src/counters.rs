//! What the shard counts: every frame it drops, by reason, and the traffic it
//! handles. Nothing a peer sends is dropped without a count.

use core::fmt;

macro_rules! reasons {
    ($($(#[doc = $doc:literal])* $name:ident => $label:literal,)*) => {
        /// Why a frame or segment was dropped (or answered instead of accepted).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason {
            $($(#[doc = $doc])* $name,)*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$name,)*];

            /// A stable snake_case label, for logs and metrics.
            pub const fn label(self) -> &'static str {
                match self {
                    $(DropReason::$name => $label,)*
                }
            }
        }
    };
}

reasons! {
    /// Shorter than an Ethernet header.
    EthernetTruncated => "ethernet_truncated",
    /// Unicast to another MAC address.
    EthernetNotForUs => "ethernet_not_for_us",
    /// An EtherType other than IPv4 or ARP (or IPv6, when it is on).
    EthernetUnknownType => "ethernet_unknown_type",
    /// Malformed or not Ethernet/IPv4 ARP.
    ArpMalformed => "arp_malformed",
    /// ARP neither for us nor about a neighbour we know.
    ArpNotForUs => "arp_not_for_us",
    /// A frame waiting for address resolution was dropped (queue full or no answer).
    ArpUnresolved => "arp_unresolved",
    /// A destination with no route (off-link and no gateway).
    NoRoute => "no_route",
    /// Shorter than its header, or a total length beyond the frame.
    Ipv4Truncated => "ipv4_truncated",
    /// Version is not 4.
    Ipv4BadVersion => "ipv4_bad_version",
    /// Header checksum mismatch.
    Ipv4BadChecksum => "ipv4_bad_checksum",
    /// IP options, which we do not handle.
    Ipv4Options => "ipv4_options",
    /// A fragment; we do not reassemble.
    Ipv4Fragment => "ipv4_fragment",
    /// Addressed to another host.
    Ipv4NotForUs => "ipv4_not_for_us",
    /// Source is broadcast, multicast, unspecified or ourselves.
    Ipv4BadSource => "ipv4_bad_source",
    /// A protocol we do not handle (answered with ICMP protocol unreachable).
    Ipv4UnknownProtocol => "ipv4_unknown_protocol",
    /// UDP: no port is open (answered with ICMP port unreachable).
    UdpNoPort => "udp_no_port",
    /// Malformed ICMP or bad ICMP checksum.
    IcmpMalformed => "icmp_malformed",
    /// ICMP we do not act on (not an echo request).
    IcmpIgnored => "icmp_ignored",
    /// An ICMP error we chose not to send (rate limit or forbidden by RFC 1122).
    IcmpSuppressed => "icmp_suppressed",
    /// Shorter than its header or a bad data offset.
    TcpTruncated => "tcp_truncated",
    /// TCP checksum mismatch.
    TcpBadChecksum => "tcp_bad_checksum",
    /// Invalid ports, flag combination or options.
    TcpMalformed => "tcp_malformed",
    /// No connection and no listener (answered with RST unless it was one).
    TcpNoConnection => "tcp_no_connection",
    /// A SYN refused because the listener's SYN queue is full.
    TcpSynQueueFull => "tcp_syn_queue_full",
    /// A handshake completion refused because the accept queue is full.
    TcpAcceptQueueFull => "tcp_accept_queue_full",
    /// A SYN refused because the shard holds its maximum of connections.
    TcpConnectionLimit => "tcp_connection_limit",
    /// A timestamp older than TS.Recent: an old duplicate (PAWS, RFC 7323; answered with an ACK).
    TcpPaws => "tcp_paws",
    /// Sequence number outside the receive window (answered with an ACK).
    TcpOutOfWindow => "tcp_out_of_window",
    /// An ACK for data never sent (answered with an ACK).
    TcpAckUnsent => "tcp_ack_unsent",
    /// An unacceptable segment in SYN-SENT or SYN-RECEIVED (answered with RST).
    TcpBadHandshake => "tcp_bad_handshake",
    /// A segment without ACK in a synchronized state.
    TcpNoAck => "tcp_no_ack",
    /// A SYN in a synchronized state (answered with a challenge ACK).
    TcpUnexpectedSyn => "tcp_unexpected_syn",
    /// An RST in the window but not at RCV.NXT (answered with a challenge ACK, RFC 5961).
    TcpRstNotExact => "tcp_rst_not_exact",
    /// An ACK below SND.UNA - MAX.SND.WND (answered with a challenge ACK, RFC 5961).
    TcpAckTooOld => "tcp_ack_too_old",
    /// A challenge ACK not sent: the per-second budget was spent.
    TcpChallengeAckLimit => "tcp_challenge_ack_limit",
    /// An ACK in reply to an unacceptable segment without data, not sent:
    /// the connection answered one within `invalid_ack_interval`.
    TcpInvalidAckLimit => "tcp_invalid_ack_limit",
    /// Out-of-order data beyond what reassembly can track.
    TcpReassemblyFull => "tcp_reassembly_full",
    /// Data for a connection whose application has closed it (answered with RST).
    TcpDataAfterClose => "tcp_data_after_close",
    /// A frame the shard wanted to send itself, dropped because its queue was full.
    ControlQueueFull => "control_queue_full",
    /// Shorter than its header, or a payload length beyond the frame.
    Ipv6Truncated => "ipv6_truncated",
    /// Version is not 6.
    Ipv6BadVersion => "ipv6_bad_version",
    /// Addressed to another host or a multicast group we are not in.
    Ipv6NotForUs => "ipv6_not_for_us",
    /// Source is multicast, one of ours, or unspecified where RFC 4861 does
    /// not allow it.
    Ipv6BadSource => "ipv6_bad_source",
    /// A fragment; we do not reassemble.
    Ipv6Fragment => "ipv6_fragment",
    /// A malformed extension header, a Hop-by-Hop header not first, an
    /// unknown option that asks for discarding, or a type 0 routing
    /// header (RFC 5095) with segments left (answered with a parameter
    /// problem where RFC 8200 §4 asks for one).
    Ipv6BadExtension => "ipv6_bad_extension",
    /// A next header we do not handle (answered with a parameter problem,
    /// RFC 8200 §4).
    Ipv6UnknownProtocol => "ipv6_unknown_protocol",
    /// "No next header": nothing to deliver (RFC 8200 §4.7).
    Ipv6NoNextHeader => "ipv6_no_next_header",
    /// Malformed ICMPv6 or bad ICMPv6 checksum.
    Icmpv6Malformed => "icmpv6_malformed",
    /// ICMPv6 we do not act on.
    Icmpv6Ignored => "icmpv6_ignored",
    /// Neighbor Discovery failing RFC 4861's validation (hop limit, code,
    /// target, source), or a duplicate address detected (RFC 4862 §5.4).
    NdpInvalid => "ndp_invalid",
    /// Neighbor Discovery about an address that is not ours or a
    /// neighbour we know.
    NdpNotForUs => "ndp_not_for_us",
}

/// The shard's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    drops: [u64; DropReason::ALL.len()],
    /// Frames handed to `handle_frame`.
    pub frames_in: u64,
    /// Frames produced by `poll_transmit`.
    pub frames_out: u64,
    /// TCP segments accepted by a connection or listener.
    pub segments_in: u64,
    /// TCP segments sent.
    pub segments_out: u64,
    /// TCP segments sent again (timeout, fast retransmit, probe).
    pub retransmits: u64,
    /// TCP segments sent with their checksum left for the device to finish
    /// ([`Config::tx_checksum_offload`](crate::Config::tx_checksum_offload)).
    pub checksums_offloaded: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Loss recoveries entered (SACK, RACK or three duplicate ACKs).
    pub fast_recoveries: u64,
    /// Peers found to have discarded data they had SACKed (RFC 2018 §8):
    /// the SACKs were forgotten and the data sent again.
    pub sack_reneging: u64,
    /// RSTs sent.
    pub resets_sent: u64,
    /// Connections that reached ESTABLISHED.
    pub established: u64,
    /// Of them, those over IPv6.
    pub established_ipv6: u64,
    /// ICMP echo replies sent (ICMPv6 ones too).
    pub echo_replies: u64,
    /// ICMP destination-unreachable messages sent (ICMPv6 ones too).
    pub unreachables_sent: u64,
    /// ICMPv6 parameter problems sent (RFC 8200 §4, RFC 4443 §3.4).
    pub param_problems_sent: u64,
    /// Neighbor Solicitations sent (duplicate address detection's too).
    pub neighbor_solicits: u64,
    /// Neighbor Advertisements sent.
    pub neighbor_adverts: u64,
    /// Addresses of ours found in use by another node (RFC 4862 §5.4.5):
    /// never used.
    pub duplicate_addresses: u64,
    /// Connections whose segments shrank to a path MTU a Packet Too Big
    /// told (RFC 8201).
    pub path_mtu_updates: u64,
    /// ARP requests sent (gratuitous ones included).
    pub arp_requests: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// SYN-ACKs sent as SYN cookies (the SYN queue was full).
    pub syn_cookies_sent: u64,
    /// Connections restored from a valid SYN cookie.
    pub syn_cookies_accepted: u64,
    /// SYNs whose MSS was below the floor (48 bytes), raised to it.
    pub mss_raised: u64,
    /// Closed connections given up after the user timeout in persist: the
    /// peer kept its window shut on the data left to send.
    pub orphans_given_up: u64,
    /// Active opens that took over a four-tuple in TIME-WAIT (see
    /// `Connection::reusable_time_wait`).
    pub time_wait_reused: u64,
    /// Bytes of pooled buffers freed because a whole trim interval did not
    /// need them (see `BufferPool::trim`): memory handed back after a burst.
    pub pool_bytes_trimmed: u64,
    /// Pure ACKs that a later pure ACK of the same connection, in the same
    /// receive batch, superseded: processed as one with it
    /// ([`TcpConfig::coalesce_acks`](crate::TcpConfig::coalesce_acks)).
    pub acks_coalesced: u64,
    /// Connections that started from a remembered path (RFC 9040):
    /// its RTT estimates and ssthresh.
    pub path_memory_used: u64,
    /// Paths written to the path cache by connections that ended.
    pub path_memory_updates: u64,
    /// Careful resume's jumps (RFC 9959 §3.3).
    pub fast_start_jumps: u64,
    /// Careful resume's safe retreats (RFC 9959 §3.5).
    pub fast_start_retreats: u64,
    /// TCP segments of a flow that another shard owns by the steering hash
    /// ([`Steering`](crate::steering::Steering)); processed all the same.
    /// None while a steering fabric moves every frame to its owner; with
    /// steering off, what the hardware's queues placed elsewhere.
    pub segments_not_owned: u64,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            drops: [0; DropReason::ALL.len()],
            frames_in: 0,
            frames_out: 0,
            segments_in: 0,
            segments_out: 0,
            retransmits: 0,
            checksums_offloaded: 0,
            timeouts: 0,
            fast_recoveries: 0,
            sack_reneging: 0,
            pool_bytes_trimmed: 0,
            acks_coalesced: 0,
            path_memory_used: 0,
            path_memory_updates: 0,
            fast_start_jumps: 0,
            fast_start_retreats: 0,
            segments_not_owned: 0,
            resets_sent: 0,
            established: 0,
            established_ipv6: 0,
            echo_replies: 0,
            unreachables_sent: 0,
            param_problems_sent: 0,
            neighbor_solicits: 0,
            neighbor_adverts: 0,
            duplicate_addresses: 0,
            path_mtu_updates: 0,
            arp_requests: 0,
            arp_replies: 0,
            syn_cookies_sent: 0,
            syn_cookies_accepted: 0,
            mss_raised: 0,
            orphans_given_up: 0,
            time_wait_reused: 0,
        }
    }
}

impl Counters {
    /// Counts one drop.
    pub(crate) fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    /// How many frames were dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason as usize]
    }

    /// Every drop reason with its count.
    pub fn drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.drops[r as usize]))
    }

    /// All drops, whatever the reason.
    pub fn total_dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frames in {} out {}, segments in {} out {}, retransmits {}, timeouts {}, resets {}",
            self.frames_in,
            self.frames_out,
            self.segments_in,
            self.segments_out,
            self.retransmits,
            self.timeouts,
            self.resets_sent
        )?;
        for (reason, n) in self.drops().filter(|&(_, n)| n > 0) {
            write!(f, ", {} {}", reason.label(), n)?;
        }
        Ok(())
    }
}
