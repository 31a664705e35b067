//! Tests of the pcap wrapper: every frame both ways, in order, byte for
//! byte, read back by a small reader here and by tcpdump; a failing writer
//! never stops the traffic.

use std::collections::VecDeque;
use std::process::Command;
use std::sync::{Arc, Mutex};

use fairway_stack::time::Instant;
use smoltcp::wire::{EthernetAddress, Icmpv4Repr, Ipv4Address};

use super::*;
use crate::sim::{LinkConfig, Network, Side};
use crate::test_frames;

// ---------------------------------------------------------------------------
// A reader for what we write
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct PcapFile {
    snaplen: u32,
    linktype: u32,
    records: Vec<Record>,
    /// Bytes after the last whole record (a capture cut short).
    trailing: usize,
}

#[derive(Debug)]
struct Record {
    /// Since the Unix epoch.
    time: Duration,
    orig_len: u32,
    data: Vec<u8>,
}

#[track_caller]
fn parse(bytes: &[u8]) -> PcapFile {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"));
    assert!(bytes.len() >= 24, "no file header in {} bytes", bytes.len());
    assert_eq!(u32_at(0), 0xa1b2_3c4d, "not a little-endian nanosecond pcap file");
    assert_eq!((u16_at(4), u16_at(6)), (2, 4), "version");
    assert_eq!((u32_at(8), u32_at(12)), (0, 0), "time zone and accuracy");
    let (snaplen, linktype) = (u32_at(16), u32_at(20));
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let (secs, nanos, incl, orig) = (u32_at(at), u32_at(at + 4), u32_at(at + 8), u32_at(at + 12));
        assert!(nanos < 1_000_000_000, "record at {at}: {nanos} ns is not a fraction of a second");
        assert!(incl <= snaplen && incl <= orig, "record at {at}: {incl} bytes captured of {orig}, snaplen {snaplen}");
        let end = at + 16 + incl as usize;
        if end > bytes.len() {
            break;
        }
        records.push(Record {
            time: Duration::new(u64::from(secs), nanos),
            orig_len: orig,
            data: bytes[at + 16..end].to_vec(),
        });
        at = end;
    }
    PcapFile { snaplen, linktype, records, trailing: bytes.len() - at }
}

fn wall_clock() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970")
}

// ---------------------------------------------------------------------------
// A device and writers made for the tests
// ---------------------------------------------------------------------------

/// A device whose received frames are queued by the test and whose
/// transmitted frames are kept; it lends both through its one buffer.
#[derive(Debug)]
struct Fake {
    rx: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    buf: Box<[u8]>,
    /// How many more frames `transmit` accepts.
    tx_room: usize,
    waits: u32,
}

impl Fake {
    fn new(max_frame_len: usize) -> Fake {
        Fake {
            rx: VecDeque::new(),
            sent: Vec::new(),
            buf: vec![0; max_frame_len].into(),
            tx_room: usize::MAX,
            waits: 0,
        }
    }
}

impl Device for Fake {
    fn max_frame_len(&self) -> usize {
        self.buf.len()
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let mut n = 0;
        while n < budget {
            let Some(frame) = self.rx.pop_front() else { break };
            self.buf[..frame.len()].copy_from_slice(&frame);
            on_frame(&self.buf[..frame.len()]);
            n += 1;
        }
        n
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let mut n = 0;
        while n < budget && self.tx_room > 0 {
            let Some(len) = fill(&mut self.buf) else { break };
            self.sent.push(self.buf[..len].to_vec());
            self.tx_room -= 1;
            n += 1;
        }
        n
    }
}

impl Wait for Fake {
    fn wait(&mut self, _: Option<Duration>) -> io::Result<()> {
        self.waits += 1;
        Ok(())
    }
}

/// A writer that takes `limit` bytes, then fails every call.
struct FailAfter {
    accepted: Vec<u8>,
    limit: usize,
    failures: u32,
}

impl Write for FailAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.limit - self.accepted.len();
        if room == 0 {
            self.failures += 1;
            return Err(io::Error::other("disk full"));
        }
        let n = room.min(buf.len());
        self.accepted.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer whose bytes the test can look at while the wrapper holds it.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().expect("lock").clone()
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const US: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

/// A frame from `src` to the other of `PEER` and `US`, `len` bytes, its
/// payload all `tag`.
fn frame(src: [u8; 6], tag: u8, len: usize) -> Vec<u8> {
    let dst = if src == PEER { US } else { PEER };
    let mut f = vec![tag; len];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
    f
}

fn send(dev: &mut impl Device, frames: &[Vec<u8>]) -> usize {
    let mut queue: VecDeque<&Vec<u8>> = frames.iter().collect();
    dev.transmit(frames.len(), |buf| {
        let f = queue.pop_front()?;
        buf[..f.len()].copy_from_slice(f);
        Some(f.len())
    })
}

fn collect(dev: &mut impl Device, budget: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    dev.receive(budget, |f| got.push(f.to_vec()));
    got
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn every_frame_both_ways_is_recorded_in_order_with_its_bytes() {
    let start = wall_clock();
    let mut fake = Fake::new(1514);
    let rx: Vec<Vec<u8>> = (1..=4).map(|i| frame(PEER, i, 60 + 300 * usize::from(i))).collect();
    fake.rx.extend(rx.iter().cloned());
    let mut pcap = Pcap::new(fake, Vec::new());
    assert_eq!(pcap.max_frame_len(), 1514);

    let tx: Vec<Vec<u8>> = (1..=3).map(|i| frame(US, 0x80 + i, 14 + 500 * usize::from(i))).collect();
    let mut expected = Vec::new();
    // Interleaved: two in, one out, one in, two out, the last in.
    assert_eq!(collect(&mut pcap, 2), rx[..2]);
    expected.extend_from_slice(&rx[..2]);
    assert_eq!(send(&mut pcap, &tx[..1]), 1);
    expected.push(tx[0].clone());
    assert_eq!(collect(&mut pcap, 1), rx[2..3]);
    expected.push(rx[2].clone());
    assert_eq!(send(&mut pcap, &tx[1..]), 2);
    expected.extend_from_slice(&tx[1..]);
    assert_eq!(collect(&mut pcap, 16), rx[3..]);
    expected.push(rx[3].clone());

    let stats = pcap.stats();
    assert_eq!((stats.frames_received, stats.frames_transmitted), (4, 3));
    assert_eq!(stats.bytes, expected.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!((stats.frames_missed, stats.write_errors), (0, 0));
    assert!(pcap.is_capturing() && pcap.error().is_none());

    let (fake, bytes) = pcap.into_parts();
    assert_eq!(fake.sent, tx, "the device got every transmitted frame unchanged");
    let end = wall_clock();

    let file = parse(&bytes);
    assert_eq!((file.snaplen, file.linktype, file.trailing), (1514, 1, 0));
    let got: Vec<&Vec<u8>> = file.records.iter().map(|r| &r.data).collect();
    let want: Vec<&Vec<u8>> = expected.iter().collect();
    let lens = |frames: &[&Vec<u8>]| frames.iter().map(|f| f.len()).collect::<Vec<_>>();
    assert!(
        got == want,
        "records differ from the frames, or their order: lengths {:?}, want {:?}",
        lens(&got),
        lens(&want)
    );
    // Direction, as a reader tells it: by the source address.
    let sources: Vec<&[u8]> = file.records.iter().map(|r| &r.data[6..12]).collect();
    assert_eq!(sources, [&PEER[..], &PEER, &US, &PEER, &US, &US, &PEER]);
    for (r, f) in file.records.iter().zip(&expected) {
        assert_eq!(r.orig_len as usize, f.len());
        assert!(start <= r.time && r.time <= end, "timestamp {:?} outside [{start:?}, {end:?}]", r.time);
    }
    assert!(file.records.windows(2).all(|w| w[0].time <= w[1].time), "timestamps go backwards");
}

#[test]
fn only_frames_the_device_accepts_are_recorded() {
    let mut fake = Fake::new(1514);
    fake.tx_room = 2;
    let mut pcap = Pcap::new(fake, Vec::new());
    // `fill` returns None at once: nothing recorded.
    assert_eq!(pcap.transmit(8, |_| None), 0);
    // Budget 0 and an empty receive queue: nothing.
    assert_eq!(pcap.transmit(0, |_| panic!("budget 0")), 0);
    assert_eq!(pcap.receive(8, |_| panic!("nothing to receive")), 0);
    // The device takes two, then has no room: fill is not called again.
    let frames = [frame(US, 1, 100), frame(US, 2, 200), frame(US, 3, 300)];
    assert_eq!(send(&mut pcap, &frames), 2);
    assert_eq!(pcap.transmit(8, |_| panic!("the device is full")), 0);

    assert_eq!(pcap.stats().frames_transmitted, 2);
    let (_, bytes) = pcap.into_parts();
    let file = parse(&bytes);
    let got: Vec<Vec<u8>> = file.records.into_iter().map(|r| r.data).collect();
    assert_eq!(got, frames[..2]);
}

#[test]
fn a_failing_writer_stops_the_capture_not_the_traffic() {
    let mut fake = Fake::new(1514);
    let rx: Vec<Vec<u8>> = (0..200).map(|i| frame(PEER, i as u8, 1000)).collect();
    fake.rx.extend(rx.iter().cloned());
    let writer = FailAfter { accepted: Vec::new(), limit: 4096, failures: 0 };
    let mut pcap = Pcap::new(fake, writer);

    // Far more than the 64 KiB buffer, so the failure shows mid-traffic.
    let tx: Vec<Vec<u8>> = (0..200).map(|i| frame(US, i as u8, 1000)).collect();
    let mut received = Vec::new();
    for chunk in tx.chunks(10) {
        assert_eq!(send(&mut pcap, chunk), chunk.len(), "a transmit lost frames");
        received.extend(collect(&mut pcap, 10));
    }
    assert!(received == rx, "a receive lost or changed frames: {} of {}", received.len(), rx.len());

    assert!(!pcap.is_capturing());
    let stats = pcap.stats();
    assert_eq!(stats.write_errors, 1);
    assert!(stats.frames_missed > 0);
    assert_eq!(stats.frames_received + stats.frames_transmitted + stats.frames_missed, 400, "{stats:?}");
    let error = pcap.error().expect("the error is kept").to_string();
    assert!(error.contains("disk full"), "{error}");
    let flushed = pcap.flush().expect_err("flush reports the stopped capture");
    assert!(flushed.to_string().contains("disk full"), "{flushed}");

    let (fake, writer) = pcap.into_parts();
    assert!(fake.sent == tx, "a transmit lost or changed frames: {} of {}", fake.sent.len(), tx.len());
    // The writer was not touched again after it failed.
    assert_eq!(writer.failures, 1);
    // What it took is a valid capture cut short: the header and whole
    // records of the first frames, then part of one.
    assert_eq!(writer.accepted.len(), 4096);
    let file = parse(&writer.accepted);
    assert!(
        !file.records.is_empty() && file.trailing > 0,
        "{} records, {} trailing",
        file.records.len(),
        file.trailing
    );
    for (r, f) in file.records.iter().zip(tx.iter().take(10)) {
        assert_eq!(&r.data, f);
    }
}

#[test]
fn records_are_buffered_then_flushed_explicitly_and_on_drop() {
    let out = Shared::default();
    let mut pcap = Pcap::new(Fake::new(1514), out.clone());
    send(&mut pcap, &[frame(US, 1, 64)]);
    assert!(out.bytes().is_empty(), "the first record should still be in the buffer");
    pcap.flush().expect("flush");
    assert_eq!(parse(&out.bytes()).records.len(), 1);

    send(&mut pcap, &[frame(US, 2, 64), frame(US, 3, 64)]);
    assert_eq!(parse(&out.bytes()).records.len(), 1);
    drop(pcap);
    let file = parse(&out.bytes());
    let tags: Vec<u8> = file.records.iter().map(|r| r.data[20]).collect();
    assert_eq!(tags, [1, 2, 3]);
}

#[test]
fn the_wrapper_passes_wait_and_hands_the_device_back() {
    let mut pcap = Pcap::new(Fake::new(1514), io::sink());
    pcap.wait(Some(Duration::from_millis(1))).expect("wait");
    pcap.wait(None).expect("wait");
    assert_eq!(pcap.get_ref().waits, 2);
    pcap.get_mut().rx.push_back(frame(PEER, 9, 64));
    assert_eq!(pcap.receive(1, |_| {}), 1);
    let fake = pcap.into_inner();
    assert_eq!((fake.waits, fake.rx.len()), (2, 0));
}

#[test]
fn frames_longer_than_the_snapshot_length_are_recorded_truncated() {
    // A device with frames longer than readers accept in a record.
    let mut pcap = Pcap::new(Fake::new(300_000), Vec::new());
    let big = frame(US, 7, 300_000);
    assert_eq!(send(&mut pcap, std::slice::from_ref(&big)), 1);
    let (_, bytes) = pcap.into_parts();
    let file = parse(&bytes);
    assert_eq!(file.snaplen, 262_144);
    assert_eq!(file.records[0].orig_len, 300_000);
    assert_eq!(file.records[0].data, big[..262_144]);
}

// ---------------------------------------------------------------------------
// A simulated network's traffic, read back by tcpdump
// ---------------------------------------------------------------------------

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn echo_request(seq_no: u16) -> Vec<u8> {
    let from = (EthernetAddress(MAC_A), Ipv4Address::new(10, 0, 0, 1));
    let to = (EthernetAddress(MAC_B), Ipv4Address::new(10, 0, 0, 2));
    test_frames::icmp(from, to, &Icmpv4Repr::EchoRequest { ident: 7, seq_no, data: &[0x5a; 32] })
}

/// `tcpdump -r FILE -nn -e -tt`, one line per packet.
#[track_caller]
fn tcpdump(path: &Path) -> Vec<String> {
    let out = Command::new("tcpdump")
        .args(["-r"])
        .arg(path)
        .args(["-nn", "-e", "-tt"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run tcpdump ({e}): install it (apt-get install tcpdump)"));
    assert!(out.status.success(), "tcpdump -r {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn tcpdump_reads_both_ends_of_a_simulated_exchange() {
    let dir = TempDir::new();
    let (path_a, path_b) = (dir.0.join("a.pcap"), dir.0.join("b.pcap"));

    let access = LinkConfig::ideal().with_delay(fairway_stack::time::Duration::from_micros(50));
    let mut net = Network::new(1, 1514, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, MAC_A, access);
    let b = net.add_host(Side::Right, MAC_B, access);
    let frames: Vec<Vec<u8>> = (1..=3).map(echo_request).collect();

    let start = wall_clock();
    let mut pcap_a = Pcap::create(net.port(a), &path_a).expect("create a.pcap");
    assert_eq!(send(&mut pcap_a, &frames), 3);
    drop(pcap_a); // flushed on drop
    while let Some(t) = net.next_event() {
        net.advance(t);
    }
    assert_eq!(net.now(), Instant::from_micros(100));
    let mut pcap_b = Pcap::create(net.port(b), &path_b).expect("create b.pcap");
    assert_eq!(collect(&mut pcap_b, 16), frames);
    pcap_b.flush().expect("flush");
    drop(pcap_b);
    let end = wall_clock();

    for path in [&path_a, &path_b] {
        let file = parse(&std::fs::read(path).expect("read capture"));
        let got: Vec<Vec<u8>> = file.records.into_iter().map(|r| r.data).collect();
        assert_eq!(got, frames, "{}", path.display());

        let lines = tcpdump(path);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        for (seq, line) in (1..).zip(&lines) {
            assert!(line.contains("02:00:00:00:00:01 > 02:00:00:00:00:02"), "{line}");
            assert!(line.contains("10.0.0.1 > 10.0.0.2: ICMP echo request, id 7, seq"), "{line}");
            assert!(line.contains(&format!("seq {seq}, length 40")), "{line}");
            // `-tt`: seconds.microseconds since the epoch, as tcpdump read
            // them from our nanosecond records.
            let stamp: f64 = line.split(' ').next().and_then(|s| s.parse().ok()).expect("a timestamp first");
            let stamp = Duration::from_secs_f64(stamp);
            assert!(
                start.saturating_sub(Duration::from_millis(1)) <= stamp && stamp <= end + Duration::from_millis(1),
                "tcpdump read time {stamp:?}, written in [{start:?}, {end:?}]"
            );
        }
    }
}

/// A directory of this test's own, removed on drop (also when it fails).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let path = std::env::temp_dir().join(format!("fairway-pcap-test-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn create_names_the_path_it_could_not_create() {
    let err = Pcap::create(Fake::new(1514), "/nonexistent-dir/x.pcap").expect_err("no such directory");
    assert!(err.to_string().contains("/nonexistent-dir/x.pcap"), "{err}");
}
