//! [`TxSlots`]: the transmit side's UMEM frames, grouped into slots of
//! neighbouring frames that each hold the largest frame the socket sends.
//!
//! Without multi-buffer a slot is one UMEM frame. With it, a frame longer
//! than a UMEM frame is written across a slot's frames as one contiguous
//! buffer and goes on the TX ring as one descriptor per UMEM frame it
//! touches, all but the last flagged `XDP_PKT_CONTD`; each descriptor stays
//! inside its UMEM frame, as an aligned UMEM requires. In an unaligned UMEM
//! ([`Cut::Every`]) descriptors may start anywhere, so the frame is cut
//! every so many bytes instead (each descriptor, with the transmit metadata
//! room the kernel counts before it, at most a UMEM frame long). The kernel
//! completes descriptors one by one, so a slot is free again once all of
//! its descriptors have come back on the completion ring.
//!
//! Pure bookkeeping over UMEM offsets: the tests check it without a kernel.

/// `XDP_PKT_CONTD`: more descriptors of this frame follow.
const CONTINUED: u32 = libc::XDP_PKT_CONTD;

/// One descriptor's worth of a frame: UMEM offset, length, options.
pub(super) type Part = (u64, u32, u32);

/// Where a frame longer than one descriptor is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// At every UMEM frame boundary (an aligned UMEM).
    AtFrames,
    /// Every this many bytes, wherever they fall (an unaligned UMEM).
    Every(u64),
}

/// The transmit slots and where each one is.
#[derive(Debug)]
pub(super) struct TxSlots {
    /// UMEM offset of the first transmit frame.
    first: u64,
    /// Bytes per UMEM frame.
    frame_size: u64,
    /// UMEM frames per slot.
    frames_per_slot: u32,
    /// Bytes at the start of a slot before the frame (room for transmit
    /// metadata), less than a UMEM frame.
    headroom: u64,
    /// How a frame is cut into descriptors.
    cut: Cut,
    /// Free slots; its capacity is every slot.
    free: Vec<u32>,
    /// Per slot, its descriptors on the TX ring or in the kernel, not yet
    /// completed (0: free or lent out).
    outstanding: Vec<u8>,
    /// The sum of `outstanding`.
    in_flight: usize,
}

impl TxSlots {
    /// Slots over the UMEM frames `first_frame .. first_frame + frames`, of
    /// `frame_size` bytes each, grouped `frames_per_slot` at a time (the
    /// frames that do not fill a last slot are not used); each slot's frame
    /// starts `headroom` bytes into it and is cut as `cut` says.
    pub(super) fn new(
        first_frame: usize,
        frames: usize,
        frame_size: usize,
        frames_per_slot: u32,
        (headroom, cut): (usize, Cut),
    ) -> TxSlots {
        assert!((1..=u32::from(u8::MAX)).contains(&frames_per_slot), "frames_per_slot {frames_per_slot}");
        assert!(headroom < frame_size, "headroom {headroom} of a {frame_size}-byte frame");
        assert!(cut != Cut::Every(0), "descriptors of no bytes");
        let count = frames / frames_per_slot as usize;
        TxSlots {
            first: (first_frame * frame_size) as u64,
            frame_size: frame_size as u64,
            frames_per_slot,
            headroom: headroom as u64,
            cut,
            // Taken from the end: slot 0 first.
            free: (0..count as u32).rev().collect(),
            outstanding: vec![0; count],
            in_flight: 0,
        }
    }

    /// How many slots there are.
    #[cfg(test)]
    pub(super) fn count(&self) -> usize {
        self.outstanding.len()
    }

    /// UMEM frames per slot: the most descriptors one frame takes.
    pub(super) fn frames_per_slot(&self) -> u32 {
        self.frames_per_slot
    }

    /// Bytes one slot spans.
    fn slot_len(&self) -> usize {
        (self.frame_size * u64::from(self.frames_per_slot)) as usize
    }

    /// The longest frame a slot holds (after its headroom).
    pub(super) fn frame_room(&self) -> usize {
        self.slot_len() - self.headroom as usize
    }

    /// Lends a free slot, if any.
    pub(super) fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Takes back a lent slot that was not sent.
    pub(super) fn put_back(&mut self, slot: u32) {
        debug_assert_eq!(self.outstanding[slot as usize], 0);
        self.free.push(slot);
    }

    /// The UMEM offset where `slot`'s frame starts (after the headroom).
    pub(super) fn addr(&self, slot: u32) -> u64 {
        self.first + u64::from(slot) * self.slot_len() as u64 + self.headroom
    }

    /// The descriptors of a `len`-byte frame written at [`TxSlots::addr`]
    /// (`len` at most [`TxSlots::frame_room`] and above zero), and records
    /// them as outstanding.
    pub(super) fn send(&mut self, slot: u32, len: usize) -> Parts {
        debug_assert!(len > 0 && len <= self.frame_room(), "a {len}-byte frame in {} bytes", self.frame_room());
        let parts = Parts { at: self.addr(slot), left: len as u64, frame_size: self.frame_size, cut: self.cut };
        self.outstanding[slot as usize] = parts.len() as u8;
        self.in_flight += parts.len();
        parts
    }

    /// The kernel completed the descriptor at UMEM offset `addr`. Returns
    /// `false` for an offset that is no outstanding descriptor of ours.
    pub(super) fn complete(&mut self, addr: u64) -> bool {
        let Some(offset) = addr.checked_sub(self.first) else { return false };
        let slot = offset / self.slot_len() as u64;
        let Some(outstanding) = self.outstanding.get_mut(slot as usize) else { return false };
        if *outstanding == 0 {
            return false;
        }
        *outstanding -= 1;
        self.in_flight -= 1;
        if *outstanding == 0 {
            self.free.push(slot as u32);
        }
        true
    }

    /// Descriptors handed to the kernel and not completed yet.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// The descriptors of one frame, in order.
#[derive(Clone, Debug)]
pub(super) struct Parts {
    at: u64,
    left: u64,
    frame_size: u64,
    cut: Cut,
}

impl Parts {
    /// The length of the next descriptor's room from `at`.
    fn room(&self, at: u64) -> u64 {
        match self.cut {
            Cut::AtFrames => self.frame_size - at % self.frame_size,
            Cut::Every(bytes) => bytes,
        }
    }
}

impl Iterator for Parts {
    type Item = Part;

    fn next(&mut self) -> Option<Part> {
        if self.left == 0 {
            return None;
        }
        let len = self.left.min(self.room(self.at));
        self.left -= len;
        let part = (self.at, len as u32, if self.left > 0 { CONTINUED } else { 0 });
        self.at += len;
        Some(part)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let first = self.room(self.at);
        let n = match self.left {
            0 => 0,
            left if left <= first => 1,
            left => {
                1 + match self.cut {
                    Cut::AtFrames => (left - first).div_ceil(self.frame_size),
                    Cut::Every(bytes) => (left - first).div_ceil(bytes),
                } as usize
            }
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Parts {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_that_fits_one_umem_frame_is_one_descriptor() {
        let mut slots = TxSlots::new(2048, 2048, 2048, 1, (0, Cut::AtFrames));
        assert_eq!(slots.count(), 2048);
        let slot = slots.take().expect("a free slot");
        assert_eq!(slot, 0);
        let parts: Vec<Part> = slots.send(slot, 1514).collect();
        assert_eq!(parts, vec![(2048 * 2048, 1514, 0)]);
        assert_eq!(slots.in_flight(), 1);
        assert!(slots.complete(2048 * 2048));
        assert_eq!(slots.in_flight(), 0);
        assert_eq!(slots.take(), Some(0), "back on the free list");
    }

    #[test]
    fn a_jumbo_frame_spans_the_slot_with_every_descriptor_inside_its_umem_frame() {
        // 9014 bytes in 4096-byte frames: three descriptors.
        let mut slots = TxSlots::new(4, 12, 4096, 3, (0, Cut::AtFrames));
        assert_eq!((slots.count(), slots.slot_len()), (4, 12288));
        let first = slots.take().expect("slot 0");
        let second = slots.take().expect("slot 1");
        let base = slots.addr(second);
        assert_eq!(base, 4 * 4096 + 12288);
        let parts: Vec<Part> = slots.send(second, 9014).collect();
        assert_eq!(parts, vec![(base, 4096, CONTINUED), (base + 4096, 4096, CONTINUED), (base + 8192, 822, 0)]);
        for (addr, len, _) in &parts {
            assert_eq!(addr / 4096, (addr + u64::from(*len) - 1) / 4096, "{addr} + {len} stays in one frame");
        }
        // Exactly one UMEM frame's worth, and one byte more.
        slots.put_back(first);
        let first = slots.take().expect("slot 0 again");
        let parts: Vec<Part> = slots.send(first, 4096).collect();
        assert_eq!(parts, vec![(slots.addr(first), 4096, 0)]);
        assert!(slots.complete(parts[0].0));
        let first = slots.take().expect("slot 0 once more");
        let parts: Vec<Part> = slots.send(first, 4097).collect();
        assert_eq!(parts, vec![(slots.addr(first), 4096, CONTINUED), (slots.addr(first) + 4096, 1, 0)]);
    }

    #[test]
    fn a_slot_comes_back_only_when_all_its_descriptors_completed_in_any_order() {
        let mut slots = TxSlots::new(0, 6, 2048, 3, (0, Cut::AtFrames));
        let slot = slots.take().expect("slot 0");
        let parts: Vec<Part> = slots.send(slot, 5000).collect();
        assert_eq!(parts.len(), 3);
        let other = slots.take().expect("slot 1");
        assert_eq!(slots.take(), None, "two slots of three frames in six frames");
        assert!(slots.complete(parts[2].0));
        assert!(slots.complete(parts[0].0));
        assert_eq!(slots.take(), None, "one descriptor still out");
        assert!(slots.complete(parts[1].0));
        assert_eq!(slots.take(), Some(slot));
        slots.put_back(other);
    }

    #[test]
    fn completions_that_are_not_ours_are_refused() {
        let mut slots = TxSlots::new(2, 4, 2048, 2, (0, Cut::AtFrames));
        assert!(!slots.complete(0), "a receive frame's offset");
        assert!(!slots.complete(2 * 2048), "a slot with nothing outstanding");
        assert!(!slots.complete(100 * 2048), "past the last slot");
        let slot = slots.take().expect("slot 0");
        slots.send(slot, 100).for_each(drop);
        assert!(slots.complete(2 * 2048));
        assert!(!slots.complete(2 * 2048), "completed twice");
    }

    #[test]
    fn a_headroom_moves_every_frame_and_its_first_descriptor_but_not_the_slots() {
        // 24 bytes of transmit metadata before each frame.
        let mut slots = TxSlots::new(2, 6, 4096, 3, (24, Cut::AtFrames));
        assert_eq!(slots.frame_room(), 3 * 4096 - 24);
        let slot = slots.take().expect("slot 0");
        let start = 2 * 4096;
        assert_eq!(slots.addr(slot), start + 24);
        let parts: Vec<Part> = slots.send(slot, 9014).collect();
        assert_eq!(
            parts,
            vec![(start + 24, 4096 - 24, CONTINUED), (start + 4096, 4096, CONTINUED), (start + 8192, 846, 0)],
            "the first part ends where its UMEM frame does; the others start at a frame's first byte"
        );
        for (addr, _, _) in &parts {
            assert!(slots.complete(*addr));
        }
        assert_eq!(slots.take(), Some(slot), "completed by the addresses it was sent from");
        let next = slots.take().expect("slot 1");
        assert_eq!(slots.addr(next), start + 3 * 4096 + 24);
    }

    #[test]
    fn in_an_unaligned_umem_a_frame_is_cut_every_so_many_bytes_and_counted_right() {
        // Each descriptor with its 24 bytes of metadata room fits 4096.
        let mut slots = TxSlots::new(2, 6, 4096, 3, (24, Cut::Every(4096 - 24)));
        let slot = slots.take().expect("slot 0");
        let start = 2 * 4096 + 24;
        let parts: Vec<Part> = slots.send(slot, 9014).collect();
        assert_eq!(parts, vec![(start, 4072, CONTINUED), (start + 4072, 4072, CONTINUED), (start + 8144, 870, 0)]);
        assert_eq!(slots.in_flight(), 3, "the count the slot waits for is the descriptors sent");
        for (addr, _, _) in &parts {
            assert!(slots.complete(*addr));
        }
        // Lengths at the cuts: one descriptor, exactly; one byte more, two.
        for (len, count) in [(1, 1), (4072, 1), (4073, 2), (8144, 2), (8145, 3)] {
            assert_eq!(slots.take(), Some(slot), "freed by its completions");
            let parts = slots.send(slot, len);
            assert_eq!(parts.len(), count, "{len} bytes");
            assert_eq!(parts.clone().count(), count, "{len} bytes: the count matches the parts");
            for (addr, _, _) in parts {
                assert!(slots.complete(addr));
            }
        }
    }

    #[test]
    fn the_count_of_parts_matches_the_parts_for_any_length_and_headroom() {
        for (headroom, cut) in [(0, Cut::AtFrames), (24, Cut::AtFrames), (24, Cut::Every(2048 - 24))] {
            let mut slots = TxSlots::new(0, 8, 2048, 8, (headroom, cut));
            for len in (1..=slots.frame_room()).step_by(97).chain([slots.frame_room()]) {
                let slot = slots.take().expect("the one slot, freed by its completions");
                let parts = slots.send(slot, len);
                let (hinted, listed) = (parts.len(), parts.clone().collect::<Vec<_>>());
                assert_eq!(hinted, listed.len(), "{len} bytes, {cut:?}");
                assert_eq!(listed.iter().map(|p| p.1 as usize).sum::<usize>(), len);
                for (addr, _, _) in listed {
                    assert!(slots.complete(addr));
                }
            }
        }
    }
}
