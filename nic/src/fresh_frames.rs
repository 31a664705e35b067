//! [`FreshFrames`]: a device wrapper that can stop recycling frame buffers,
//! for the receive-path ablation (`--recycle` without `frames`).
//!
//! A [`Device`] lends its own buffers (the AF_XDP UMEM, a TAP's or the
//! simulator's pool), so Fairway allocates nothing per frame. A conventional
//! kernel allocates an `sk_buff` and its data for every received frame and
//! frees them once the frame is consumed; the study behind the ablation
//! counts recycling those as a technique of its own. With copying on, this
//! wrapper does the same: each received frame is copied into a buffer
//! allocated for it alone, handed up, and freed; each transmitted frame is
//! written into a buffer allocated for it and copied into the device's.
//! With copying off (recycling on, the default) it calls the device
//! directly: one branch per batch, nothing per frame.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::{Device, Wait};

/// `device`, its frames recycled (the default) or copied through a fresh
/// allocation each.
#[derive(Debug)]
pub struct FreshFrames<D> {
    device: D,
    /// Allocate a buffer per frame instead of using the device's own.
    copy: bool,
}

impl<D> FreshFrames<D> {
    /// `device` with its buffers recycled (`recycle`, the default) or with
    /// a buffer allocated and freed per frame.
    pub fn new(device: D, recycle: bool) -> FreshFrames<D> {
        FreshFrames { device, copy: !recycle }
    }

    /// Whether the device's buffers are used in place.
    #[must_use]
    pub fn recycles(&self) -> bool {
        !self.copy
    }

    /// The wrapped device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The wrapped device, mutably.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }
}

impl<D: Device> Device for FreshFrames<D> {
    fn max_frame_len(&self) -> usize {
        self.device.max_frame_len()
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        if !self.copy {
            return self.device.receive(budget, on_frame);
        }
        self.device.receive(budget, |frame| {
            // The allocation an skb would be: sized to the frame, freed when
            // the stack is done with it.
            let fresh: Box<[u8]> = frame.into();
            on_frame(&fresh);
        })
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        if !self.copy {
            return self.device.transmit(budget, fill);
        }
        self.device.transmit(budget, |buf| {
            let mut fresh = vec![0u8; buf.len()].into_boxed_slice();
            let len = fill(&mut fresh)?;
            let len = len.min(buf.len());
            buf[..len].copy_from_slice(&fresh[..len]);
            Some(len)
        })
    }

    fn offload_tx_checksums(&mut self) -> bool {
        self.device.offload_tx_checksums()
    }
}

impl<D: Wait> Wait for FreshFrames<D> {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.device.wait(timeout)
    }
    #[cfg(unix)]
    fn wake_sources<'a>(&'a self, sources: &mut Vec<std::os::fd::BorrowedFd<'a>>) {
        self.device.wake_sources(sources);
    }
    fn before_sleep(&mut self) -> io::Result<bool> {
        self.device.before_sleep()
    }
    fn after_sleep(&mut self) {
        self.device.after_sleep();
    }
}

impl<D: AsRawFd> AsRawFd for FreshFrames<D> {
    fn as_raw_fd(&self) -> RawFd {
        self.device.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A device that remembers where the frames it lent lived.
    #[derive(Default)]
    struct Lending {
        rx: VecDeque<Vec<u8>>,
        lent: Vec<usize>,
        tx: Vec<Vec<u8>>,
        tx_buf: Vec<u8>,
    }

    impl Device for Lending {
        fn max_frame_len(&self) -> usize {
            64
        }
        fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
            let mut n = 0;
            while n < budget {
                let Some(f) = self.rx.pop_front() else { break };
                self.lent.push(f.as_ptr() as usize);
                on_frame(&f);
                n += 1;
            }
            n
        }
        fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
            self.tx_buf.resize(64, 0xee);
            let mut n = 0;
            while n < budget {
                let Some(len) = fill(&mut self.tx_buf) else { break };
                self.tx.push(self.tx_buf[..len].to_vec());
                n += 1;
            }
            n
        }
    }

    /// Each received frame and whether it was the device's own buffer.
    type Received = Vec<(Vec<u8>, bool)>;

    fn run(recycle: bool) -> (Received, Vec<Vec<u8>>) {
        let mut device = FreshFrames::new(Lending::default(), recycle);
        device.device_mut().rx.extend([vec![1; 20], vec![2; 30]]);
        let mut seen = Vec::new();
        let mut addresses = Vec::new();
        assert_eq!(
            device.receive(8, |f| {
                addresses.push(f.as_ptr() as usize);
                seen.push(f.to_vec());
            }),
            2
        );
        let lent = device.device().lent.clone();
        let in_place: Vec<bool> = addresses.iter().zip(&lent).map(|(a, l)| a == l).collect();
        let mut frames = vec![vec![7u8; 10], vec![8u8; 64]].into_iter();
        assert_eq!(
            device.transmit(8, |buf| {
                let f = frames.next()?;
                assert_eq!(buf.len(), 64);
                buf[..f.len()].copy_from_slice(&f);
                Some(f.len())
            }),
            2
        );
        (seen.into_iter().zip(in_place).collect(), device.device().tx.clone())
    }

    #[test]
    fn recycled_frames_are_the_devices_own_buffers() {
        let (rx, tx) = run(true);
        assert_eq!(rx, vec![(vec![1; 20], true), (vec![2; 30], true)]);
        assert_eq!(tx, vec![vec![7; 10], vec![8; 64]]);
    }

    #[test]
    fn without_recycling_every_frame_is_a_copy_with_the_same_bytes() {
        let (rx, tx) = run(false);
        assert_eq!(rx, vec![(vec![1; 20], false), (vec![2; 30], false)]);
        assert_eq!(tx, vec![vec![7; 10], vec![8; 64]]);
    }
}
