//! Initial sequence numbers (RFC 6528): a 4 µs clock plus a keyed hash of the
//! connection's 4-tuple, so each tuple gets its own unpredictable sequence
//! space while successive incarnations of one tuple still move forward.

use core::hash::Hasher;

use siphasher::sip::SipHasher24;

use crate::flow_table::FourTuple;
use crate::tcp::seq::SeqNumber;
use crate::time::Instant;

/// Generates ISNs from a secret key.
#[derive(Clone, Debug)]
pub struct IsnGenerator {
    k0: u64,
    k1: u64,
}

impl IsnGenerator {
    /// A generator keyed by `secret`.
    pub fn new(secret: u128) -> IsnGenerator {
        IsnGenerator { k0: secret as u64, k1: (secret >> 64) as u64 }
    }

    /// ISN = M + F(localip, localport, remoteip, remoteport, secretkey).
    pub fn isn(&self, now: Instant, tuple: &FourTuple) -> SeqNumber {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        h.write(&tuple.local_ip.octets());
        h.write_u16(tuple.local_port);
        h.write(&tuple.remote_ip.octets());
        h.write_u16(tuple.remote_port);
        let f = h.finish() as u32;
        let m = (now.total_micros() / 4) as u32;
        SeqNumber::new(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn tuple(remote_port: u16) -> FourTuple {
        FourTuple::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 80, remote_port)
    }

    #[test]
    fn isn_depends_on_tuple_and_key_and_advances_with_time() {
        let g = IsnGenerator::new(1);
        let t = Instant::from_secs(1);
        assert_ne!(g.isn(t, &tuple(1000)), g.isn(t, &tuple(1001)));
        assert_ne!(g.isn(t, &tuple(1000)), IsnGenerator::new(2).isn(t, &tuple(1000)));
        let later = g.isn(t + crate::time::Duration::from_micros(400), &tuple(1000));
        assert_eq!(later.distance(g.isn(t, &tuple(1000))), 100);
    }
}
