//! A shard and a scripted peer: feed one segment at a time, assert exactly
//! the segments that come back.
//!
//! The peer is 10.0.0.2:49500 (MAC 02:..:02); the shard is 10.0.0.1
//! (MAC 02:..:01) and, unless a test says otherwise, listens on port 80. The
//! neighbour entry is set up front, so no ARP traffic interferes.

use core::net::{Ipv4Addr, SocketAddrV4};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, TcpControl, TcpOption, TcpPacket, TcpRepr, TcpSeqNumber,
    TcpTimestampRepr,
};

use crate::Shard;
use crate::api::{Event, Handle, Listener};
use crate::config::Config;
use crate::flow_table::FourTuple;
use crate::tcp::isn::IsnGenerator;
use crate::time::{Duration, Instant};
use crate::wire::{self, TCP_OFFSET};

pub const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
pub const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const REMOTE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const LOCAL_PORT: u16 = 80;
pub const REMOTE_PORT: u16 = 49500;
/// The receive buffer in test configurations: the window we advertise.
pub const RX_BUFFER: usize = 4096;
/// The peer's initial sequence number.
pub const IRS: u32 = 1_000_000;
/// The MSS the peer announces unless a test says otherwise.
pub const PEER_MSS: u16 = 1000;

/// A TCP segment as the tests write and read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seg {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    pub window: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamp: Option<(u32, u32)>,
    pub sack: Vec<(u32, u32)>,
    pub payload: Vec<u8>,
}

impl Seg {
    pub fn seq(mut self, seq: u32) -> Seg {
        self.seq = seq;
        self
    }
    pub fn ack(mut self, ack: u32) -> Seg {
        self.ack = Some(ack);
        self
    }
    pub fn no_ack(mut self) -> Seg {
        self.ack = None;
        self
    }
    pub fn syn(mut self) -> Seg {
        self.syn = true;
        self
    }
    pub fn fin(mut self) -> Seg {
        self.fin = true;
        self
    }
    pub fn rst(mut self) -> Seg {
        self.rst = true;
        self
    }
    pub fn psh(mut self) -> Seg {
        self.psh = true;
        self
    }
    pub fn window(mut self, window: u16) -> Seg {
        self.window = window;
        self
    }
    pub fn mss(mut self, mss: u16) -> Seg {
        self.mss = Some(mss);
        self
    }
    pub fn wscale(mut self, shift: u8) -> Seg {
        self.wscale = Some(shift);
        self
    }
    pub fn sack_permitted(mut self) -> Seg {
        self.sack_permitted = true;
        self
    }
    pub fn ts(mut self, tsval: u32, tsecr: u32) -> Seg {
        self.timestamp = Some((tsval, tsecr));
        self
    }
    pub fn sack(mut self, blocks: &[(u32, u32)]) -> Seg {
        self.sack = blocks.to_vec();
        self
    }
    pub fn data(mut self, data: &[u8]) -> Seg {
        self.payload = data.to_vec();
        self
    }
    pub fn src_port(mut self, port: u16) -> Seg {
        self.src_port = port;
        self
    }
    pub fn dst_port(mut self, port: u16) -> Seg {
        self.dst_port = port;
        self
    }
}

/// The test bench.
pub struct T {
    pub shard: Shard,
    pub now: Instant,
    pub listener: Option<Listener>,
    pub handle: Option<Handle>,
    /// Our ISS for the connection under test.
    pub iss: u32,
    secret: u128,
    /// Frames sent while `advance` ran timers, oldest first.
    sent_meanwhile: Vec<Vec<u8>>,
}

pub fn config() -> Config {
    let mut c = Config::new(LOCAL_MAC, LOCAL_IP, 24);
    c.tcp.rx_buffer = RX_BUFFER;
    c.tcp.tx_buffer = 4 * RX_BUFFER;
    // The basic segment tests speak plain RFC 9293: no quick-ACK, and the
    // peer offers no options; tests of the extensions turn them on.
    c.tcp.quick_acks = 0;
    c.tcp.window_scaling = false;
    c.tcp.timestamps = false;
    c.tcp.sack = false;
    c.secret = 0x1234;
    c
}

impl T {
    /// A shard listening on port 80, with the peer's MAC known.
    pub fn listening() -> T {
        T::listening_with(config())
    }

    pub fn listening_with(config: Config) -> T {
        let mut t = T::bare(config);
        t.listener = Some(t.shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, LOCAL_PORT)).unwrap());
        t
    }

    /// A shard with no listener.
    pub fn bare(config: Config) -> T {
        let secret = config.secret;
        let mut shard = Shard::new(config);
        shard.add_neighbor(REMOTE_IP, REMOTE_MAC);
        let mut t = T {
            shard,
            now: Instant::from_secs(100),
            listener: None,
            handle: None,
            iss: 0,
            secret,
            sent_meanwhile: Vec::new(),
        };
        // The gratuitous ARP.
        let frames = t.frames();
        assert_eq!(frames.len(), 1);
        assert_eq!(EthernetFrame::new_checked(&frames[0][..]).unwrap().ethertype(), EthernetProtocol::Arp);
        t
    }

    /// An established passive connection: SYN, SYN-ACK, ACK, accept.
    pub fn established() -> T {
        T::established_with(config())
    }

    pub fn established_with(config: Config) -> T {
        let mut t = T::listening_with(config);
        t.handshake();
        t
    }

    /// Runs the three-way handshake against the listener and accepts.
    pub fn handshake(&mut self) {
        self.handshake_from(REMOTE_PORT);
    }

    /// The handshake from another peer port; `to_us`/`from_us` keep using
    /// REMOTE_PORT, so tests for it set the port themselves.
    pub fn handshake_from(&mut self, port: u16) {
        self.send(self.seg_in().src_port(port).seq(IRS).no_ack().syn().mss(PEER_MSS).window(8192));
        self.iss = self.expected_iss(port);
        self.recv(&[self.seg_out().dst_port(port).seq(self.iss).ack(IRS + 1).syn().mss(1460)]);
        self.send(self.seg_in().src_port(port).window(8192));
        assert_eq!(self.event(), Some(Event::Acceptable(self.listener.unwrap())));
        self.handle = self.shard.accept(self.listener.unwrap());
        assert!(self.handle.is_some());
        assert_eq!(self.event(), None);
    }

    /// Our ISS for a connection from the peer's `port`, at the current time.
    pub fn expected_iss(&self, remote_port: u16) -> u32 {
        let tuple = FourTuple::v4(LOCAL_IP, REMOTE_IP, LOCAL_PORT, remote_port);
        IsnGenerator::new(self.secret).isn(self.now, &tuple).get()
    }

    /// A segment from the peer in sequence: SEQ = IRS+1, ACK = ISS+1.
    pub fn seg_in(&self) -> Seg {
        Seg {
            src_port: REMOTE_PORT,
            dst_port: LOCAL_PORT,
            seq: IRS + 1,
            ack: Some(self.iss.wrapping_add(1)),
            syn: false,
            fin: false,
            rst: false,
            psh: false,
            window: 8192,
            mss: None,
            wscale: None,
            sack_permitted: false,
            timestamp: None,
            sack: Vec::new(),
            payload: Vec::new(),
        }
    }

    /// A segment from us in sequence: SEQ = ISS+1, ACK = IRS+1, full window.
    pub fn seg_out(&self) -> Seg {
        Seg {
            src_port: LOCAL_PORT,
            dst_port: REMOTE_PORT,
            seq: self.iss.wrapping_add(1),
            ack: Some(IRS + 1),
            syn: false,
            fin: false,
            rst: false,
            psh: false,
            window: RX_BUFFER as u16,
            mss: None,
            wscale: None,
            sack_permitted: false,
            timestamp: None,
            sack: Vec::new(),
            payload: Vec::new(),
        }
    }

    pub fn h(&self) -> Handle {
        self.handle.expect("no connection under test")
    }

    /// Feeds one segment from the peer, as a receive batch of its own.
    #[track_caller]
    pub fn send(&mut self, seg: Seg) {
        let frame = build_frame(&seg, REMOTE_IP, LOCAL_IP);
        self.shard.handle_frame(self.now, &frame);
        self.shard.end_batch();
    }

    /// Feeds segments from the peer as one receive batch (the shard may
    /// coalesce a connection's pure ACKs in it).
    #[track_caller]
    pub fn send_batch(&mut self, segs: impl IntoIterator<Item = Seg>) {
        for seg in segs {
            let frame = build_frame(&seg, REMOTE_IP, LOCAL_IP);
            self.shard.handle_frame(self.now, &frame);
        }
        self.shard.end_batch();
    }

    /// Feeds raw bytes as a frame, a receive batch of its own.
    pub fn send_frame(&mut self, frame: &[u8]) {
        self.shard.handle_frame(self.now, frame);
        self.shard.end_batch();
    }

    /// Everything the shard sent since the last look, as raw frames: what
    /// timers sent during `advance`, then what it wants to send now.
    pub fn frames(&mut self) -> Vec<Vec<u8>> {
        let mut out = core::mem::take(&mut self.sent_meanwhile);
        out.extend(self.drain());
        out
    }

    fn drain(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; self.shard.config().max_frame_len()];
        for _ in 0..10_000 {
            match self.shard.poll_transmit(self.now, &mut buf) {
                Some(n) => out.push(buf[..n].to_vec()),
                None => return out,
            }
        }
        panic!("poll_transmit never ran dry");
    }

    /// Everything the shard wants to send now, parsed as TCP segments.
    #[track_caller]
    pub fn segments(&mut self) -> Vec<Seg> {
        self.frames().iter().map(|f| parse_frame(f)).collect()
    }

    /// Asserts that the shard sends exactly `expected`, in order.
    #[track_caller]
    pub fn recv(&mut self, expected: &[Seg]) {
        let got = self.segments();
        assert_eq!(got, expected, "\n got: {got:#?}\nwant: {expected:#?}");
    }

    /// Asserts that the shard sends exactly `expected`.
    #[track_caller]
    pub fn recv_one(&mut self, expected: &Seg) {
        self.recv(core::slice::from_ref(expected));
    }

    /// Asserts that the shard sends nothing.
    #[track_caller]
    pub fn recv_nothing(&mut self) {
        self.recv(&[]);
    }

    /// Moves time forward by `d`, firing every timer on the way and
    /// collecting what they send, as a driver would.
    pub fn advance(&mut self, d: Duration) {
        let target = self.now + d;
        while let Some(at) = self.shard.poll_timeout() {
            if at > target {
                break;
            }
            self.now = self.now.max(at);
            self.shard.handle_timeout(self.now);
            let sent = self.drain();
            self.sent_meanwhile.extend(sent);
        }
        self.now = target;
        self.shard.handle_timeout(self.now);
        let sent = self.drain();
        self.sent_meanwhile.extend(sent);
    }

    pub fn event(&mut self) -> Option<Event> {
        self.shard.poll_event()
    }

    /// All pending events.
    pub fn events(&mut self) -> Vec<Event> {
        core::iter::from_fn(|| self.shard.poll_event()).collect()
    }

    pub fn read_all(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = self.shard.recv(self.h(), &mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }
}

/// Builds an Ethernet/IPv4/TCP frame from `seg`, with correct checksums.
pub fn build_frame(seg: &Seg, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let control = if seg.syn {
        TcpControl::Syn
    } else if seg.rst {
        TcpControl::Rst
    } else if seg.fin {
        TcpControl::Fin
    } else if seg.psh {
        TcpControl::Psh
    } else {
        TcpControl::None
    };
    let repr = TcpRepr {
        src_port: seg.src_port,
        dst_port: seg.dst_port,
        control,
        seq_number: TcpSeqNumber(seg.seq as i32),
        ack_number: seg.ack.map(|a| TcpSeqNumber(a as i32)),
        window_len: seg.window,
        window_scale: seg.wscale,
        max_seg_size: seg.mss,
        sack_permitted: seg.sack_permitted,
        sack_ranges: core::array::from_fn(|i| seg.sack.get(i).copied()),
        timestamp: seg.timestamp.map(|(v, e)| TcpTimestampRepr::new(v, e)),
        payload: &seg.payload,
    };
    let tcp_len = repr.buffer_len();
    let mut frame = vec![0u8; TCP_OFFSET + tcp_len];
    wire::emit_ethernet(&mut frame, REMOTE_MAC, LOCAL_MAC, EthernetProtocol::Ipv4);
    let mut packet = TcpPacket::new_unchecked(&mut frame[TCP_OFFSET..]);
    repr.emit(&mut packet, &src.into(), &dst.into(), &ChecksumCapabilities::default());
    if seg.psh && control != TcpControl::Psh {
        packet.set_psh(true);
        packet.fill_checksum(&src.into(), &dst.into());
    }
    wire::emit_ipv4(&mut frame[14..], src, dst, IpProtocol::Tcp, tcp_len);
    frame
}

/// Parses a frame the shard sent, checking both checksums.
#[track_caller]
pub fn parse_frame(frame: &[u8]) -> Seg {
    let eth = EthernetFrame::new_checked(frame).expect("ethernet");
    assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4, "not an IPv4 frame: {frame:02x?}");
    assert_eq!(eth.src_addr().0, LOCAL_MAC);
    let ip = Ipv4Packet::new_checked(eth.payload()).expect("ipv4");
    assert!(ip.verify_checksum(), "bad IPv4 checksum");
    assert_eq!(ip.next_header(), IpProtocol::Tcp);
    let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    assert!(tcp.verify_checksum(&src.into(), &dst.into()), "bad TCP checksum");
    let repr = TcpRepr::parse(&tcp, &src.into(), &dst.into(), &ChecksumCapabilities::default()).expect("tcp repr");
    Seg {
        src_port: repr.src_port,
        dst_port: repr.dst_port,
        seq: repr.seq_number.0 as u32,
        ack: repr.ack_number.map(|a| a.0 as u32),
        syn: repr.control == TcpControl::Syn,
        fin: repr.control == TcpControl::Fin,
        rst: repr.control == TcpControl::Rst,
        psh: tcp.psh(),
        window: repr.window_len,
        mss: repr.max_seg_size,
        wscale: repr.window_scale,
        sack_permitted: repr.sack_permitted,
        timestamp: repr.timestamp.map(|t| (t.tsval, t.tsecr)),
        sack: sack_blocks(tcp.options()),
        payload: repr.payload.to_vec(),
    }
}

/// Every SACK block of a segment's options, all four (smoltcp's parser keeps
/// three; the test reads the option bytes itself to see a fourth).
pub fn sack_blocks(mut options: &[u8]) -> Vec<(u32, u32)> {
    let mut blocks = Vec::new();
    while let Ok((rest, option)) = TcpOption::parse(options) {
        if let TcpOption::SackRange(_) = option {
            let raw = &options[2..options.len() - rest.len()];
            for b in raw.chunks_exact(8) {
                blocks.push((
                    u32::from_be_bytes(b[..4].try_into().unwrap()),
                    u32::from_be_bytes(b[4..].try_into().unwrap()),
                ));
            }
        }
        if rest.is_empty() || option == TcpOption::EndOfList {
            break;
        }
        options = rest;
    }
    blocks
}
