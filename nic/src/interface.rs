//! What the kernel knows about a network interface, asked from the calling
//! thread's network namespace.
//!
//! `/sys/class/net/IF/address` answers for the namespace whoever mounted
//! sysfs was in, so a thread that entered another namespace with `setns(2)`
//! reads the wrong interface (or none) there. An `ioctl` on a socket the
//! thread opens asks its own namespace.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Runs the `SIOC*` request `request` about interface `name` on a fresh
/// socket of the calling thread's namespace, and returns the `ifreq` the
/// kernel filled in.
fn ask(name: &str, request: libc::Ioctl) -> io::Result<libc::ifreq> {
    // SAFETY: socket takes no pointers; a non-negative result is a new
    // descriptor that nothing else owns.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` was just created and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    ask_on(sock.as_fd(), name, request)
}

/// [`ask`] on descriptor `fd`: a socket, or a device's own descriptor that
/// answers for its interface (a TAP's answers `SIOCGIFHWADDR` whatever the
/// thread's namespace).
fn ask_on(fd: BorrowedFd<'_>, name: &str, request: libc::Ioctl) -> io::Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0 || b == b'/') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not an interface name")));
    }
    // SAFETY: `struct ifreq` is plain data (a name array and a union of
    // integers, addresses and a pointer); all zeroes is a valid value of
    // each, the pointer being null.
    let mut ifr: libc::ifreq = unsafe { core::mem::zeroed() };
    for (o, b) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    // SAFETY: the `SIOCGIF*` requests asked here read and write one
    // `struct ifreq`, and `ifr` is one we own for the duration of the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut ifr) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The MAC address of interface `name` in the calling thread's network
/// namespace (`SIOCGIFHWADDR`).
///
/// # Errors
///
/// `InvalidInput` for a name that cannot be an interface's; otherwise what
/// the kernel said (`ENODEV`: no such interface here).
pub fn mac_address(name: &str) -> io::Result<[u8; 6]> {
    mac_of(&ask(name, libc::SIOCGIFHWADDR as libc::Ioctl)?)
}

/// The MAC address of interface `name` asked on `fd`, its device's own
/// descriptor (see [`ask_on`]).
pub(crate) fn mac_address_on(fd: BorrowedFd<'_>, name: &str) -> io::Result<[u8; 6]> {
    mac_of(&ask_on(fd, name, libc::SIOCGIFHWADDR as libc::Ioctl)?)
}

/// The hardware address a `SIOCGIFHWADDR` answer holds.
fn mac_of(ifr: &libc::ifreq) -> io::Result<[u8; 6]> {
    // SAFETY: the kernel filled the address member of the union; every bit
    // pattern is a valid `sockaddr`.
    let addr = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut mac = [0; 6];
    for (m, b) in mac.iter_mut().zip(addr.sa_data) {
        *m = b as u8;
    }
    Ok(mac)
}

/// The MTU of interface `name` in the calling thread's network namespace
/// (`SIOCGIFMTU`): the largest IP packet it sends, Ethernet header not
/// counted.
///
/// # Errors
///
/// As [`mac_address`].
pub fn mtu(name: &str) -> io::Result<usize> {
    let ifr = ask(name, libc::SIOCGIFMTU as libc::Ioctl)?;
    // SAFETY: the kernel filled the MTU member; every bit pattern is a valid
    // `c_int`.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("negative MTU {mtu}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_the_zero_mac_and_strangers_have_none() {
        assert_eq!(mac_address("lo").unwrap(), [0; 6]);
        let missing = mac_address("fwnosuchif0").unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENODEV), "{missing}");
        assert_eq!(mac_address("").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(mac_address("a/b").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn loopback_has_an_mtu_and_strangers_have_none() {
        assert!(mtu("lo").unwrap() >= 1500);
        assert_eq!(mtu("fwnosuchif0").unwrap_err().raw_os_error(), Some(libc::ENODEV));
        assert_eq!(mtu("").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
