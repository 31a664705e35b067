//! Pools: everything the hot path needs is taken from here and given back.

mod buffer_pool;
mod slab;
mod storage_pool;

pub use buffer_pool::BufferPool;
pub use slab::{Key, Slab};
pub use storage_pool::StoragePool;
