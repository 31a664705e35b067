//! The XDP program that steers frames to AF_XDP sockets: finding it on an
//! interface, removing it, and the process-wide count of open sockets per
//! interface that decides when to remove it.
//!
//! The first socket of an interface attaches libxdp's default AF_XDP
//! program (`xsk_def_prog`, built into libxdp), and every socket puts
//! itself in that program's socket map under its queue. libxdp's own
//! socket set-up keeps a reference count in the program; ours does not use
//! it (a process killed with sockets open never decrements it anyway).
//! Instead, when this process closes its last socket on an interface, it
//! removes the program.

use std::ffi::{CStr, c_int};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use super::config::XdpMode;
use super::error::AfXdpError;
use super::sys::{self, NetnsId};

/// The name libxdp gives its default AF_XDP program.
const XSK_PROGRAM: &CStr = c"xsk_def_prog";

/// What is attached to an interface, as far as AF_XDP cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attached {
    /// No XDP program.
    Nothing,
    /// libxdp's AF_XDP program.
    Xsk {
        /// Its mode (`None`: offloaded or unknown).
        mode: Option<XdpMode>,
        /// Whether it runs under libxdp's dispatcher (which lets other XDP
        /// programs share the interface) rather than alone.
        dispatcher: bool,
    },
    /// Some other XDP program, and not the AF_XDP one.
    Other,
}

/// libxdp's view of the XDP programs on one interface: the dispatcher and
/// its components, or a single (legacy) program. Closed on drop.
struct Multiprog(NonNull<libxdp_sys::xdp_multiprog>);

impl Multiprog {
    /// The programs on `ifindex` (in the calling thread's namespace), or
    /// `None` when there are none.
    fn of(ifindex: u32) -> io::Result<Option<Multiprog>> {
        let ifindex = c_int::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a plain call; it returns a multiprog we own, NULL, or an
        // error encoded in the pointer (checked below before any use).
        let mp = unsafe { libxdp_sys::xdp_multiprog__get_from_ifindex(ifindex) };
        if mp.is_null() {
            return Ok(None);
        }
        // SAFETY: libxdp_get_error only looks at the pointer's value.
        let error = unsafe { libxdp_sys::libxdp_get_error(mp.cast_const().cast()) };
        if error != 0 {
            let errno = i32::try_from(-error).unwrap_or(libc::EINVAL);
            return match errno {
                libc::ENOENT => Ok(None),
                _ => Err(io::Error::from_raw_os_error(errno)),
            };
        }
        Ok(NonNull::new(mp).map(Multiprog))
    }

    /// The raw attach mode of the dispatcher or legacy program.
    fn raw_mode(&self) -> libxdp_sys::xdp_attach_mode {
        // SAFETY: `self.0` is a live multiprog until drop.
        unsafe { libxdp_sys::xdp_multiprog__attach_mode(self.0.as_ptr()) }
    }

    fn mode(&self) -> Option<XdpMode> {
        match self.raw_mode() {
            libxdp_sys::xdp_attach_mode_XDP_MODE_NATIVE => Some(XdpMode::Native),
            libxdp_sys::xdp_attach_mode_XDP_MODE_SKB => Some(XdpMode::Generic),
            _ => None,
        }
    }

    /// The programs that actually run: the components of a dispatcher, or
    /// the one legacy program. They live as long as `self`.
    fn programs(&self) -> Vec<NonNull<libxdp_sys::xdp_program>> {
        let mp = self.0.as_ptr();
        // SAFETY: `mp` is a live multiprog until drop.
        if unsafe { libxdp_sys::xdp_multiprog__is_legacy(mp) } {
            // SAFETY: as above; the main program belongs to `mp`.
            return NonNull::new(unsafe { libxdp_sys::xdp_multiprog__main_prog(mp) }).into_iter().collect();
        }
        let mut programs = Vec::new();
        let mut previous: *const libxdp_sys::xdp_program = ptr::null();
        // SAFETY: `mp` is live, and `previous` is NULL or the component
        // returned by the previous call, as the iterator requires.
        while let Some(next) = NonNull::new(unsafe { libxdp_sys::xdp_multiprog__next_prog(previous, mp) }) {
            programs.push(next);
            previous = next.as_ptr();
        }
        programs
    }
}

impl Drop for Multiprog {
    fn drop(&mut self) {
        // SAFETY: we own the multiprog and close it once; the programs
        // borrowed from it are not used after this.
        unsafe { libxdp_sys::xdp_multiprog__close(self.0.as_ptr()) };
    }
}

/// Whether `program` (from a live [`Multiprog`]) is libxdp's AF_XDP program.
fn is_xsk_program(program: NonNull<libxdp_sys::xdp_program>) -> bool {
    // SAFETY: `program` belongs to a live multiprog; the name it returns is
    // NULL or a NUL-terminated string owned by the program.
    let name = unsafe { libxdp_sys::xdp_program__name(program.as_ptr()) };
    // SAFETY: checked non-NULL; valid while the program lives, and only
    // compared here.
    !name.is_null() && unsafe { CStr::from_ptr(name) } == XSK_PROGRAM
}

/// What is attached to `ifindex` in the calling thread's namespace.
pub(super) fn inspect(ifindex: u32) -> io::Result<Attached> {
    let Some(mp) = Multiprog::of(ifindex)? else {
        return Ok(Attached::Nothing);
    };
    if mp.programs().into_iter().any(is_xsk_program) {
        // SAFETY: `mp` is a live multiprog.
        let legacy = unsafe { libxdp_sys::xdp_multiprog__is_legacy(mp.0.as_ptr()) };
        Ok(Attached::Xsk { mode: mp.mode(), dispatcher: !legacy })
    } else {
        Ok(Attached::Other)
    }
}

/// Removes libxdp's AF_XDP program from `ifindex` (in the calling thread's
/// namespace), leaving any other XDP program in place. Returns how many
/// programs were removed.
pub(super) fn detach_xsk(ifindex: u32) -> io::Result<usize> {
    let Some(mp) = Multiprog::of(ifindex)? else {
        return Ok(0);
    };
    let ifindex = c_int::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mode = mp.raw_mode();
    let mut removed = 0;
    for program in mp.programs().into_iter().filter(|&p| is_xsk_program(p)) {
        // SAFETY: `program` belongs to `mp`, which is live; libxdp finds
        // it on the interface by its id and removes it (the whole
        // dispatcher when it was the last component). The mode is the one
        // it is attached in, so the kernel detaches the right slot.
        let result = unsafe { libxdp_sys::xdp_program__detach(program.as_ptr(), ifindex, mode, 0) };
        if result < 0 {
            return Err(io::Error::from_raw_os_error(-result));
        }
        removed += 1;
    }
    Ok(removed)
}

/// The object file libxdp builds its AF_XDP program from (embedded in the
/// library).
const XSK_OBJECT: &CStr = c"xsk_def_xdp_prog.o";

/// Entries in the program's socket map as the object file sizes it; libxdp
/// sizes it to the interface's queues, and so do we when there are more.
const XSK_MAP_ENTRIES: u32 = 64;

/// A program loaded from an object file, closed on drop (which leaves it
/// attached if it was).
struct Program(NonNull<libxdp_sys::xdp_program>);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: we own the program handle and close it once.
        unsafe { libxdp_sys::xdp_program__close(self.0.as_ptr()) };
    }
}

/// The error libxdp encoded in `pointer`, if any.
fn libxdp_error<T>(pointer: *mut T) -> Option<io::Error> {
    if pointer.is_null() {
        return Some(io::Error::from_raw_os_error(libc::ENOENT));
    }
    // SAFETY: libxdp_get_error only looks at the pointer's value.
    let error = unsafe { libxdp_sys::libxdp_get_error(pointer.cast_const().cast()) };
    (error != 0).then(|| io::Error::from_raw_os_error(i32::try_from(-error).unwrap_or(libc::EINVAL)))
}

/// Attaches libxdp's own AF_XDP program to `ifindex` (in the calling
/// thread's namespace) in `mode`, with room for `queues` sockets; with
/// `frags`, loaded as one that handles multi-buffer frames
/// (`BPF_F_XDP_HAS_FRAGS`), which a driver needs before it passes frames
/// longer than a page (a veth refuses a program without it when its peer's
/// MTU is larger).
pub(super) fn attach_xsk(ifindex: u32, mode: XdpMode, queues: u32, frags: bool) -> io::Result<()> {
    let ifindex = c_int::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a plain call with a NUL-terminated name and NULL defaults; it
    // returns a program we own, NULL or an encoded error (checked).
    let raw = unsafe { libxdp_sys::xdp_program__find_file(XSK_OBJECT.as_ptr(), ptr::null_mut(), ptr::null_mut()) };
    if let Some(error) = libxdp_error(raw) {
        return Err(error);
    }
    let program = Program(NonNull::new(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?);
    // SAFETY: `program` is live and not loaded yet, as setting the flag
    // requires.
    let result = unsafe { libxdp_sys::xdp_program__set_xdp_frags_support(program.0.as_ptr(), frags) };
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    if queues > XSK_MAP_ENTRIES {
        // SAFETY: the object belongs to the live program; the map name is
        // NUL-terminated; the map is not created yet, so it can be resized.
        unsafe {
            let object = libxdp_sys::xdp_program__bpf_obj(program.0.as_ptr());
            let map = libxdp_sys::bpf_object__find_map_by_name(object, c"xsks_map".as_ptr());
            if map.is_null() {
                return Err(io::Error::from_raw_os_error(libc::ENOENT));
            }
            let result = libxdp_sys::bpf_map__set_max_entries(map, queues);
            if result < 0 {
                return Err(io::Error::from_raw_os_error(-result));
            }
        }
    }
    let mode = match mode {
        XdpMode::Generic => libxdp_sys::xdp_attach_mode_XDP_MODE_SKB,
        XdpMode::Native | XdpMode::Auto => libxdp_sys::xdp_attach_mode_XDP_MODE_NATIVE,
    };
    // SAFETY: `program` is live; libxdp loads it and attaches it (under its
    // dispatcher when it can), and keeps nothing of our handle after close.
    let result = unsafe { libxdp_sys::xdp_program__attach(program.0.as_ptr(), ifindex, mode, 0) };
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    Ok(())
}

/// A file descriptor libbpf returned (non-negative), or the error it
/// encoded (negative errno).
fn owned_fd(result: c_int) -> io::Result<OwnedFd> {
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    // SAFETY: libbpf returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(result) })
}

/// The socket map (`BPF_MAP_TYPE_XSKMAP`) of the AF_XDP program attached
/// to `ifindex`, or `ENOENT` when there is none.
fn xsk_map(ifindex: u32) -> io::Result<OwnedFd> {
    let not_found = || io::Error::from_raw_os_error(libc::ENOENT);
    let mp = Multiprog::of(ifindex)?.ok_or_else(not_found)?;
    let program = mp.programs().into_iter().find(|&p| is_xsk_program(p)).ok_or_else(not_found)?;
    // SAFETY: `program` belongs to `mp`, which is live; the descriptor is
    // the program's own (not ours to close) and stays open while `mp` does.
    let program_fd = unsafe { libxdp_sys::xdp_program__fd(program.as_ptr()) };
    if program_fd < 0 {
        return Err(not_found());
    }
    let mut map_ids = [0u32; 16];
    // SAFETY: `bpf_prog_info` is plain integers; all-zero is valid.
    let mut info: libxdp_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    info.nr_map_ids = map_ids.len() as u32;
    info.map_ids = map_ids.as_mut_ptr() as u64;
    let mut len = std::mem::size_of::<libxdp_sys::bpf_prog_info>() as u32;
    // SAFETY: the kernel writes at most `len` bytes into `info` and at most
    // `nr_map_ids` ids into `map_ids`; both outlive the call.
    let result = unsafe { libxdp_sys::bpf_prog_get_info_by_fd(program_fd, &mut info, &mut len) };
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    let count = (info.nr_map_ids as usize).min(map_ids.len());
    for &id in &map_ids[..count] {
        // SAFETY: a plain call; it returns a new descriptor or an error.
        let Ok(map) = owned_fd(unsafe { libxdp_sys::bpf_map_get_fd_by_id(id) }) else { continue };
        // SAFETY: as for the program's info above.
        let mut map_info: libxdp_sys::bpf_map_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libxdp_sys::bpf_map_info>() as u32;
        // SAFETY: the kernel writes at most `len` bytes into `map_info`.
        let result = unsafe { libxdp_sys::bpf_map_get_info_by_fd(map.as_raw_fd(), &mut map_info, &mut len) };
        if result == 0 && map_info.type_ == libxdp_sys::bpf_map_type_BPF_MAP_TYPE_XSKMAP {
            return Ok(map);
        }
    }
    Err(not_found())
}

/// Puts the bound AF_XDP socket `socket` in the socket map of the program
/// on `ifindex`, under `queue_id`: from then on the program redirects that
/// queue's frames to it. Closing the socket takes it out again.
pub(super) fn insert_socket(ifindex: u32, queue_id: u32, socket: RawFd) -> io::Result<()> {
    let map = xsk_map(ifindex)?;
    let value: c_int = socket;
    // SAFETY: the key and value are a u32 and an int that live for the call,
    // the sizes the socket map is declared with.
    let result = unsafe {
        libxdp_sys::bpf_map_update_elem(
            map.as_raw_fd(),
            ptr::from_ref(&queue_id).cast(),
            ptr::from_ref(&value).cast(),
            0,
        )
    };
    if result < 0 { Err(io::Error::from_raw_os_error(-result)) } else { Ok(()) }
}

/// One interface this process has open sockets on.
#[derive(Debug)]
struct Entry {
    netns: NetnsId,
    ifindex: u32,
    sockets: usize,
}

/// The open sockets of this process, per interface. Held across opening
/// and closing a socket, so that attaching and detaching the program never
/// race between threads.
#[derive(Debug)]
pub(super) struct Registry {
    entries: Vec<Entry>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new() });

/// Takes the registry lock (a panic while it was held leaves nothing half
/// done that matters, so poisoning is ignored).
pub(super) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    /// Counts one more open socket on the interface.
    pub(super) fn add(&mut self, netns: NetnsId, ifindex: u32) {
        match self.entries.iter_mut().find(|e| e.netns == netns && e.ifindex == ifindex) {
            Some(entry) => entry.sockets += 1,
            None => self.entries.push(Entry { netns, ifindex, sockets: 1 }),
        }
    }

    /// Counts one socket fewer; returns whether it was the last.
    pub(super) fn remove(&mut self, netns: NetnsId, ifindex: u32) -> bool {
        let Some(index) = self.entries.iter().position(|e| e.netns == netns && e.ifindex == ifindex) else {
            return true;
        };
        self.entries[index].sockets -= 1;
        if self.entries[index].sockets == 0 {
            self.entries.swap_remove(index);
            return true;
        }
        false
    }

    /// Whether this process has a socket open on the interface.
    pub(super) fn in_use(&self, netns: NetnsId, ifindex: u32) -> bool {
        self.entries.iter().any(|e| e.netns == netns && e.ifindex == ifindex)
    }
}

/// Removes the AF_XDP program from `ifindex` when no socket of this
/// process uses the interface any more. Best effort: it runs on drop,
/// where there is no one to report to.
pub(super) fn remove_if_unused(registry: &Registry, netns: NetnsId, ifindex: u32) {
    if !registry.in_use(netns, ifindex) && matches!(inspect(ifindex), Ok(Attached::Xsk { .. })) {
        let _ = detach_xsk(ifindex);
    }
}

/// Removes libxdp's AF_XDP program from `interface`, in the calling
/// thread's network namespace, whatever its reference count says. Other
/// XDP programs on the interface stay. Returns how many programs were
/// removed (0 when there was nothing to do).
///
/// This is the cleanup for exits that skip [`AfXdp`](super::AfXdp)'s drop
/// (see the [module documentation](super) for how a runtime wires it):
/// call it when this process's sockets on the interface are closed or
/// about to die with it, for instance from a panic hook, after a second
/// Ctrl-C, or at start-up to clear what a killed run left behind. An AF_XDP
/// socket still open on the interface, in this process or another, stops
/// receiving.
///
/// It does not wait for sockets being opened or closed on other threads
/// (a panic hook may run on a thread that holds that lock).
///
/// # Errors
///
/// [`AfXdpError::NoSuchInterface`], [`AfXdpError::PermissionDenied`]
/// without CAP_NET_ADMIN, [`AfXdpError::Os`] for anything else.
pub fn detach_all(interface: &str) -> Result<usize, AfXdpError> {
    let ifindex = sys::interface_index(interface).map_err(|source| match source.raw_os_error() {
        Some(libc::ENODEV | libc::ENXIO | libc::EINVAL) => {
            AfXdpError::NoSuchInterface { interface: interface.to_owned() }
        }
        _ => AfXdpError::Os { action: "looking up the interface", interface: interface.to_owned(), source },
    })?;
    let _lock = match REGISTRY.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    detach_xsk(ifindex).map_err(|source| match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => AfXdpError::PermissionDenied { action: "detach the XDP program" },
        _ => AfXdpError::Os { action: "detaching the AF_XDP program", interface: interface.to_owned(), source },
    })
}
