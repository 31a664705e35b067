//! What the server asks of the C allocator, so that memory a burst took
//! goes back to the kernel once the burst is over.
//!
//! Under glibc, two things keep a quiet server's RSS above what it uses:
//! big blocks (the sockets' 1 MiB buffers, grown collections) that land in
//! an arena instead of a mapping of their own, where freeing them leaves a
//! hole that neighbours pin; and the free pages arenas keep. The first is
//! [`map_large_blocks`] (once, by a server that owns its process), the
//! second [`release_freed_memory`] (after the pools have trimmed).
//! Elsewhere (another libc, or a Rust global allocator of the
//! application's) both do nothing.

/// Blocks at least this big get a mapping of their own: the size from which
/// the stack's pools swap kept buffers for fresh, unwritten ones
/// ([`fairway_stack::LARGE_BUFFER`]), which only returns their pages
/// when they are mapped on their own.
pub const MMAP_THRESHOLD: usize = fairway_stack::LARGE_BUFFER;

/// Has the allocator map every block of [`MMAP_THRESHOLD`] or more on its
/// own, so that freeing one unmaps it at once. glibc's default threshold
/// (128 KiB) rises to the size of the biggest mapped block freed (up to
/// 32 MiB): after the first socket buffer a pool trims, the next ones
/// come from the arenas, where they fragment them. A fixed threshold stops
/// that rise. Process-wide: [`Server::run`](crate::Server::run) calls it;
/// an application that embeds the server decides for itself.
pub fn map_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets one of glibc's tunables; it takes no
    // pointers. The value fits a C int.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
    }
}

/// Asks the allocator to hand the memory it holds free back to the kernel:
/// glibc keeps what is freed inside its arenas, so a shard's buffers freed
/// after a burst would stay resident; `malloc_trim` returns their pages.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only walks glibc's own free
    // lists under their locks.
    unsafe {
        libc::malloc_trim(0);
    }
}
