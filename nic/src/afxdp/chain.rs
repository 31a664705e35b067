//! [`Chain`]: multi-buffer receive. With `XDP_USE_SG` the kernel writes a
//! frame longer than one UMEM frame into several, and puts one RX
//! descriptor per part on the ring, every part but the last flagged
//! `XDP_PKT_CONTD`. The parts land in frames the fill ring happened to
//! hold, not side by side, so a chained frame is copied into one buffer
//! before the stack sees it; a frame that fits one part is handed over in
//! place, as without multi-buffer.
//!
//! The logic is free of the kernel and the UMEM (it sees each part as a
//! slice, or as `None` for a descriptor that does not lie in the UMEM), so
//! its tests feed it chains by hand, malformed ones included.

/// What the caller does with one received part, as [`Chain::push`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// A whole frame in one part: hand that part itself to the stack.
    Whole,
    /// The part belongs to a frame that has more to come.
    Pending,
    /// The last part of a chained frame arrived: hand
    /// [`Chain::frame`] to the stack.
    Assembled,
    /// The part ended a frame that cannot be delivered (a part outside the
    /// UMEM, or longer than the largest frame): dropped, and counted once.
    Malformed,
    /// A lone descriptor outside the UMEM: dropped.
    Invalid,
}

/// The frame being put together from its parts, across receive batches.
#[derive(Debug)]
pub(super) struct Chain {
    /// The parts so far; allocated once, for the largest frame.
    frame: Vec<u8>,
    /// The largest frame, in bytes.
    max_frame_len: usize,
    /// Whether a chained frame is under way (its last part not yet seen).
    open: bool,
    /// Whether a part of the frame under way could not be used: the rest
    /// of its parts are passed over and the frame is dropped at its end.
    broken: bool,
}

impl Chain {
    /// A chain for frames of at most `max_frame_len` bytes.
    pub(super) fn new(max_frame_len: usize) -> Chain {
        Chain { frame: Vec::with_capacity(max_frame_len), max_frame_len, open: false, broken: false }
    }

    /// Takes the next part off the RX ring: its bytes (`None` when its
    /// descriptor does not lie in the UMEM) and whether more parts follow
    /// (`XDP_PKT_CONTD`).
    ///
    /// A part that cannot be used (outside the UMEM, or taking the frame
    /// past its largest length) breaks the frame it belongs to: the parts
    /// after it are passed over up to the frame's last, which reports
    /// [`Step::Malformed`]. A continuation whose head was unusable is such
    /// a part's successor, and goes the same way.
    pub(super) fn push(&mut self, part: Option<&[u8]>, more: bool) -> Step {
        if !self.open && !more {
            return match part {
                Some(_) => Step::Whole,
                None => Step::Invalid,
            };
        }
        if !self.open {
            self.open = true;
            self.broken = false;
            self.frame.clear();
        }
        match part {
            Some(bytes) if !self.broken && bytes.len() <= self.max_frame_len - self.frame.len() => {
                self.frame.extend_from_slice(bytes);
            }
            _ => self.broken = true,
        }
        if more {
            return Step::Pending;
        }
        self.open = false;
        if self.broken { Step::Malformed } else { Step::Assembled }
    }

    /// The frame the last [`Step::Assembled`] completed.
    pub(super) fn frame(&self) -> &[u8] {
        &self.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `parts` (bytes or `None`, and the `XDP_PKT_CONTD` flag) and
    /// returns each step, with the frame after every `Assembled`.
    fn feed(chain: &mut Chain, parts: &[(Option<&[u8]>, bool)]) -> Vec<(Step, Option<Vec<u8>>)> {
        parts
            .iter()
            .map(|&(part, more)| {
                let step = chain.push(part, more);
                let frame = (step == Step::Assembled).then(|| chain.frame().to_vec());
                (step, frame)
            })
            .collect()
    }

    #[test]
    fn a_frame_in_one_part_is_handed_over_in_place() {
        let mut chain = Chain::new(64);
        assert_eq!(chain.push(Some(b"whole"), false), Step::Whole);
        assert_eq!(chain.push(None, false), Step::Invalid);
    }

    #[test]
    fn parts_are_joined_in_order_across_batches() {
        let mut chain = Chain::new(64);
        let steps = feed(&mut chain, &[(Some(b"abc"), true), (Some(b"def"), true)]);
        assert_eq!(steps, vec![(Step::Pending, None), (Step::Pending, None)]);
        // The next receive batch goes on with the same frame.
        let steps = feed(&mut chain, &[(Some(b"gh"), false), (Some(b"next"), false)]);
        assert_eq!(steps, vec![(Step::Assembled, Some(b"abcdefgh".to_vec())), (Step::Whole, None)]);
    }

    #[test]
    fn a_continuation_without_its_head_is_dropped_with_the_rest_of_its_frame() {
        // The head's descriptor lay outside the UMEM: what follows it up to
        // the frame's end has no head to join.
        let mut chain = Chain::new(64);
        let steps = feed(&mut chain, &[(None, true), (Some(b"tail"), true), (Some(b"end"), false)]);
        assert_eq!(steps, vec![(Step::Pending, None), (Step::Pending, None), (Step::Malformed, None)]);
        // The frames after it are whole again.
        let steps = feed(&mut chain, &[(Some(b"ab"), true), (Some(b"cd"), false)]);
        assert_eq!(steps[1], (Step::Assembled, Some(b"abcd".to_vec())));
    }

    #[test]
    fn an_unusable_part_in_the_middle_breaks_only_its_frame() {
        let mut chain = Chain::new(64);
        let steps = feed(&mut chain, &[(Some(b"ab"), true), (None, true), (Some(b"ef"), false), (Some(b"ok"), false)]);
        let kinds: Vec<Step> = steps.iter().map(|(s, _)| *s).collect();
        assert_eq!(kinds, [Step::Pending, Step::Pending, Step::Malformed, Step::Whole]);
    }

    #[test]
    fn a_chain_longer_than_the_largest_frame_is_dropped_and_allocates_nothing() {
        let mut chain = Chain::new(8);
        let capacity = chain.frame.capacity();
        let steps = feed(&mut chain, &[(Some(b"12345"), true), (Some(b"6789"), true), (Some(b"0"), false)]);
        let kinds: Vec<Step> = steps.iter().map(|(s, _)| *s).collect();
        assert_eq!(kinds, [Step::Pending, Step::Pending, Step::Malformed]);
        assert_eq!(chain.frame.capacity(), capacity, "the buffer never grows");
        // Exactly the largest frame fits.
        let steps = feed(&mut chain, &[(Some(b"1234"), true), (Some(b"5678"), false)]);
        assert_eq!(steps[1], (Step::Assembled, Some(b"12345678".to_vec())));
    }
}
