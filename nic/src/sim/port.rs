//! [`Port`]: one host's [`Device`] on the simulated network.

use fairway_stack::time::Instant;

use super::network::Network;
use super::topology::HostId;
use crate::Device;

/// A host's attachment to a [`Network`]: the [`Device`] its stack drives.
///
/// `receive` drains the frames that have reached the host (run
/// [`Network::advance`] to move time and frames forward); `transmit` puts
/// frames on the host's uplink at [`Network::now`]. The port borrows the
/// network, so take it, use it, and drop it.
pub struct Port<'a> {
    net: &'a mut Network,
    host: u32,
}

impl<'a> Port<'a> {
    pub(super) fn new(net: &'a mut Network, host: u32) -> Port<'a> {
        Port { net, host }
    }

    /// The host this port belongs to.
    pub fn host(&self) -> HostId {
        HostId(self.host)
    }

    /// The network's current time: when transmitted frames leave.
    pub fn now(&self) -> Instant {
        self.net.now()
    }

    /// Whether received frames are waiting.
    pub fn has_pending_rx(&self) -> bool {
        self.net.has_pending_rx(self.host())
    }
}

impl core::fmt::Debug for Port<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Port").field("host", &self.host()).field("now", &self.now()).finish()
    }
}

impl Device for Port<'_> {
    fn max_frame_len(&self) -> usize {
        self.net.max_frame_len()
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, on_frame: F) -> usize {
        self.net.deliver_rx(self.host, budget, on_frame)
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let mut sent = 0;
        while sent < budget {
            let (id, buf) = self.net.take_buffer();
            let capacity = buf.len();
            let Some(len) = fill(buf) else {
                self.net.return_buffer(id);
                break;
            };
            debug_assert!(len <= capacity, "Device::transmit: fill returned {len} bytes for a {capacity}-byte buffer");
            self.net.inject(self.host, id, len.min(capacity));
            sent += 1;
        }
        sent
    }
}
