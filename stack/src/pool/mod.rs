//! Pools: everything the hot path needs is taken from here and given back.

mod buffer_pool;
mod slab;
mod storage_pool;

use crate::time::Duration;

/// How often a pool frees what it did not need over the last interval
/// (the stack's buffer pools, and [`StoragePool::trim`]): after a burst, the
/// memory returns within two intervals of the load falling. The shard
/// trims its own pools at this pace, the server's host its sessions.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(5);

pub use buffer_pool::{BufferPool, LARGE_BUFFER};
pub use slab::{Key, Slab};
pub use storage_pool::StoragePool;
