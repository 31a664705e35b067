//! Pools: everything the hot path needs is taken from here and given back.

mod buffer_pool;
mod slab;

pub use buffer_pool::BufferPool;
pub use slab::{Key, Slab};
