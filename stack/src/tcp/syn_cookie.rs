//! SYN cookies (RFC 4987 §3.6): answering a SYN without keeping state, when
//! a listener's SYN queue is full.
//!
//! The ISN of the SYN-ACK carries what the connection needs later, under a
//! keyed MAC: a 5-bit time counter (64-second steps), a 3-bit index into a
//! table of common MSS values, and 24 bits of SipHash over the 4-tuple, the
//! peer's ISN and the full time counter. The ACK that completes the
//! handshake returns it as SEG.ACK − 1. When the SYN carried timestamps, the
//! low bits of our TSval also carry the window scale and SACK-permitted
//! option, which the ACK's echo (TSecr) gives back, so cookie connections
//! keep those options (as Linux does).

use core::hash::Hasher;

use siphasher::sip::SipHasher13;

use crate::flow_table::FourTuple;
use crate::tcp::seq::SeqNumber;
use crate::time::Instant;

/// MSS values a cookie can encode: a SYN's MSS is rounded down to one.
pub const MSS_TABLE: [u16; 8] = [536, 1220, 1300, 1400, 1440, 1460, 4312, 8960];

/// Seconds per step of the cookie clock.
const TICK_SECS: u64 = 64;
/// A cookie is accepted up to this many steps old (2–3 minutes), as Linux.
const MAX_AGE_TICKS: u64 = 2;
/// Bits of the TSval that carry options.
const TS_OPTION_BITS: u32 = 5;
const TS_OPTION_MASK: u32 = (1 << TS_OPTION_BITS) - 1;
/// The window-scale field value for "no window scaling".
const NO_WSCALE: u32 = 0xf;

/// What a cookie brings back of the SYN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieOptions {
    /// The MSS to send with (the SYN's, rounded down to [`MSS_TABLE`]).
    pub mss: u16,
    /// The peer's window scale, if it offered one and timestamps carried it.
    pub wscale: Option<u8>,
    /// Whether the peer offered SACK and timestamps carried it.
    pub sack: bool,
}

/// Makes and checks SYN cookies with a secret key.
#[derive(Clone, Debug)]
pub struct SynCookies {
    k0: u64,
    k1: u64,
}

impl SynCookies {
    /// Cookies keyed by `secret` (distinct from the ISN key by construction).
    pub fn new(secret: u128) -> SynCookies {
        let k = secret ^ 0x5c00_c1e5_5c00_c1e5_5c00_c1e5_5c00_c1e5;
        SynCookies { k0: k as u64, k1: (k >> 64) as u64 }
    }

    fn counter(now: Instant) -> u64 {
        now.total_micros() / 1_000_000 / TICK_SECS
    }

    fn mac(&self, tuple: &FourTuple, irs: SeqNumber, counter: u64) -> u32 {
        let mut h = SipHasher13::new_with_keys(self.k0, self.k1);
        h.write(&tuple.local_ip.octets());
        h.write_u16(tuple.local_port);
        h.write(&tuple.remote_ip.octets());
        h.write_u16(tuple.remote_port);
        h.write_u32(irs.get());
        h.write_u64(counter);
        (h.finish() as u32) & 0x00ff_ffff
    }

    /// Our ISN for a stateless SYN-ACK to `tuple`'s SYN (ISN `irs`,
    /// announcing `mss`). Returns the ISN and the MSS it encodes.
    pub fn isn(&self, now: Instant, tuple: &FourTuple, irs: SeqNumber, mss: u16) -> (SeqNumber, u16) {
        let index = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0);
        let counter = Self::counter(now);
        let isn = ((counter as u32 & 0x1f) << 27) | ((index as u32) << 24) | self.mac(tuple, irs, counter);
        (SeqNumber::new(isn), MSS_TABLE[index])
    }

    /// Checks the ACK completing a cookie handshake: `irs` is SEG.SEQ − 1
    /// and `iss` is SEG.ACK − 1. Returns the encoded MSS if the cookie is
    /// ours, for this tuple and peer ISN, and at most about two minutes old.
    pub fn check(&self, now: Instant, tuple: &FourTuple, irs: SeqNumber, iss: SeqNumber) -> Option<u16> {
        let raw = iss.get();
        let low = (raw >> 27) as u64;
        let index = ((raw >> 24) & 0x7) as usize;
        let now_counter = Self::counter(now);
        (0..=MAX_AGE_TICKS)
            .filter_map(|age| now_counter.checked_sub(age))
            .find(|&c| c & 0x1f == low && self.mac(tuple, irs, c) == raw & 0x00ff_ffff)
            .map(|_| MSS_TABLE[index])
    }

    /// Our TSval for a cookie SYN-ACK: `ts_now` with its low bits replaced by
    /// the options, never later than `ts_now` (RFC 7323 wants a clock that
    /// does not run ahead).
    pub fn encode_ts(ts_now: u32, wscale: Option<u8>, sack: bool) -> u32 {
        let options = (wscale.map_or(NO_WSCALE, |s| s.min(14) as u32) << 1) | sack as u32;
        let tsval = (ts_now & !TS_OPTION_MASK) | options;
        if tsval.wrapping_sub(ts_now) as i32 > 0 { tsval.wrapping_sub(1 << TS_OPTION_BITS) } else { tsval }
    }

    /// The options an echoed cookie TSval (the ACK's TSecr) carries.
    pub fn decode_ts(tsecr: u32) -> (Option<u8>, bool) {
        let wscale = (tsecr >> 1) & 0xf;
        ((wscale != NO_WSCALE).then_some(wscale as u8), tsecr & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn tuple(port: u16) -> FourTuple {
        FourTuple::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 80, port)
    }

    #[test]
    fn a_cookie_round_trips_its_mss_rounded_down() {
        let c = SynCookies::new(42);
        let now = Instant::from_secs(10_000);
        let irs = SeqNumber::new(77);
        for (offered, expected) in [(1460, 1460), (1448, 1440), (9000, 8960), (100, 536), (1300, 1300)] {
            let (isn, mss) = c.isn(now, &tuple(1), irs, offered);
            assert_eq!(mss, expected);
            assert_eq!(c.check(now + crate::time::Duration::from_secs(5), &tuple(1), irs, isn), Some(expected));
        }
    }

    #[test]
    fn a_cookie_is_bound_to_tuple_peer_isn_key_and_time() {
        let c = SynCookies::new(42);
        let now = Instant::from_secs(10_000);
        let irs = SeqNumber::new(77);
        let (isn, _) = c.isn(now, &tuple(1), irs, 1460);
        assert_eq!(c.check(now, &tuple(2), irs, isn), None, "another tuple");
        assert_eq!(c.check(now, &tuple(1), irs + 1u32, isn), None, "another peer ISN");
        assert_eq!(SynCookies::new(43).check(now, &tuple(1), irs, isn), None, "another key");
        assert_eq!(c.check(now, &tuple(1), irs, isn + 1u32), None, "a neighbouring guess");
        let late = now + crate::time::Duration::from_secs(TICK_SECS * (MAX_AGE_TICKS + 1));
        assert_eq!(c.check(late, &tuple(1), irs, isn), None, "too old");
        assert!(c.check(now + crate::time::Duration::from_secs(TICK_SECS), &tuple(1), irs, isn).is_some());
    }

    #[test]
    fn options_ride_in_the_timestamp_without_running_ahead() {
        for (wscale, sack) in [(Some(7), true), (None, false), (Some(0), false), (Some(14), true)] {
            for now in [0u32, 31, 32, 1000, u32::MAX] {
                let tsval = SynCookies::encode_ts(now, wscale, sack);
                assert!(now.wrapping_sub(tsval) < 64, "{now} -> {tsval}");
                assert_eq!(SynCookies::decode_ts(tsval), (wscale, sack));
            }
        }
    }

    #[test]
    fn blind_guesses_are_rejected() {
        // 100,000 guesses at a fixed seed: each passes with a chance of
        // 3 in 2^24 (three acceptable clock steps, 24 bits of MAC).
        let c = SynCookies::new(0xfeed);
        let now = Instant::from_secs(5_000);
        let irs = SeqNumber::new(1234);
        let (isn, _) = c.isn(now, &tuple(9), irs, 1460);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut accepted = 0;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let guess = SeqNumber::new(x as u32);
            if guess != isn && c.check(now, &tuple(9), irs, guess).is_some() {
                accepted += 1;
            }
        }
        assert_eq!(accepted, 0);
    }
}
