//! `nic`: what one shard moves through real devices on the namespace
//! testbed (feature `afxdp`, root).
//!
//! - [`pps`]: packets per second received and sent by one shard over
//!   AF_XDP (copy mode on veth) and received over TAP;
//! - [`bulk`]: a bulk download by kernel curl from Fairway over AF_XDP, and
//!   the same from nginx over the kernel stack (`fairway_tests::nginx`).

pub mod bulk;
pub mod pps;
