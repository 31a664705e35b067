//! System prerequisites: the Debian packages a subcommand needs.
//!
//! Each subcommand declares its list as a constant and calls
//! [`ensure_debian_packages`] before doing anything else. Missing packages are
//! installed with apt-get when running as root; otherwise xtask stops and
//! prints the exact command to run.

use std::io;
use std::path::Path;
use std::process::Command;

use crate::cargo::Invocation;
use crate::error::Failure;

/// What libxdp-sys needs to build libxdp and libbpf from source (the AF_XDP
/// backend, `fairway-nic`'s `afxdp` feature).
pub const AFXDP_BUILD_PACKAGES: &[&str] =
    &["clang", "llvm", "libelf-dev", "zlib1g-dev", "libpcap-dev", "m4", "gcc-multilib", "pkg-config"];

/// The kernel-side tools the real-peer tests and the testbed drive:
/// namespaces and veth (iproute2), captures (tcpdump), ping, curl, Python,
/// offloads (ethtool), sysctl and kill (procps), and TLS certificates and
/// `s_client` (openssl).
pub const TESTBED_PACKAGES: &[&str] =
    &["iproute2", "tcpdump", "iputils-ping", "curl", "python3", "ethtool", "procps", "openssl"];

/// The HTTP load generator of the server's end-to-end tests and of
/// `bench http`.
pub const WRK_PACKAGE: &str = "wrk";

/// nginx: the baseline of the benchmarks and labs, and an upstream of the
/// reverse proxy's tests.
pub const NGINX_PACKAGE: &str = "nginx";

/// h2load, the HTTP/2 load generator of `bench http`'s `h2` and `h2c`
/// cases.
pub const H2LOAD_PACKAGE: &str = "nghttp2-client";

/// Debian's Chromium: the real browser of the server's HTTP/2 test over
/// AF_XDP (`tests/browser.rs`, headless).
pub const CHROMIUM_PACKAGE: &str = "chromium";

/// The font fairway-lab draws its charts' text with (DejaVu Sans, read at
/// run time from /usr/share/fonts/truetype/dejavu/; see fairway-tests'
/// `plot` module).
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// PostgreSQL's server and psql: the database the axum_postgres
/// example's tests start (a cluster of their own in a temporary directory).
pub const POSTGRES_PACKAGE: &str = "postgresql";

/// Python packages from PyPI the tests' clients import, as (module, pip
/// package): `h2`, HTTP/2's frames and state machine (the HTTP/2 tests'
/// client and attacker).
pub const PYTHON_TEST_PACKAGES: &[(&str, &str)] = &[("h2", "h2")];

/// Makes sure `python3` imports every module of `packages`, installing the
/// missing ones from PyPI (`python3 -m pip install`) when running as root;
/// otherwise it fails with the command to run.
pub fn ensure_python_packages(packages: &[(&str, &str)]) -> Result<(), Failure> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|(module, _)| {
            !Command::new("python3")
                .args(["-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|&(_, package)| package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut args = vec!["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--root-user-action=ignore"];
    args.extend(&missing);
    let install = Invocation::new("python3", args);
    if !is_root() {
        return Err(Failure::failed(format!(
            "missing Python packages: {}\nxtask installs them only when run as root. Install them, then run xtask \
             again:\n  {}",
            missing.join(" "),
            install.display()
        )));
    }
    eprintln!("xtask: installing missing Python packages: {}", missing.join(" "));
    eprintln!("xtask: $ {}", install.display());
    install.run()
}

/// Where apt keeps the package lists `apt-get update` downloads.
const APT_LISTS_DIR: &str = "/var/lib/apt/lists";

/// Makes sure every package in `packages` is installed.
///
/// - On a system without `dpkg-query` (not Debian-like) it warns and returns
///   `Ok`: the build will say what is missing.
/// - Missing packages are installed with
///   `apt-get install -y --no-install-recommends` under
///   `DEBIAN_FRONTEND=noninteractive`, after one `apt-get update` when the
///   package lists are empty or the first install attempt fails.
/// - Without root it fails, naming the missing packages and the command.
pub fn ensure_debian_packages(packages: &[&str]) -> Result<(), Failure> {
    if packages.is_empty() {
        return Ok(());
    }
    let missing = match missing_packages(packages) {
        Ok(missing) => missing,
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            eprintln!(
                "xtask: warning: dpkg-query not found (not a Debian-based system?); \
                 cannot check for the packages {}; continuing",
                packages.join(" ")
            );
            return Ok(());
        }
        Err(err) => {
            return Err(Failure::failed(format!("could not run dpkg-query to check for Debian packages: {err}")));
        }
    };
    if missing.is_empty() {
        return Ok(());
    }

    if !is_root() {
        return Err(Failure::failed(not_root_message(&missing)));
    }

    eprintln!("xtask: installing missing Debian packages: {}", missing.join(" "));
    let install = install_command(&missing);
    let mut updated = false;
    if apt_lists_are_empty(Path::new(APT_LISTS_DIR)) {
        apt_update()?;
        updated = true;
    }
    eprintln!("xtask: $ {}", install.display());
    if let Err(first) = install.run() {
        if updated {
            return Err(first);
        }
        eprintln!("xtask: install failed; updating the package lists and retrying");
        apt_update()?;
        eprintln!("xtask: $ {}", install.display());
        install.run()?;
    }

    let still_missing = missing_packages(&missing)
        .map_err(|err| Failure::failed(format!("could not run dpkg-query after installing: {err}")))?;
    if !still_missing.is_empty() {
        return Err(Failure::failed(format!(
            "apt-get succeeded but these packages are still not installed: {}",
            still_missing.join(" ")
        )));
    }
    Ok(())
}

/// The packages of `packages` that dpkg does not report as installed. An
/// error means dpkg-query could not be run at all.
fn missing_packages<'a>(packages: &[&'a str]) -> io::Result<Vec<&'a str>> {
    let mut missing = Vec::new();
    for &package in packages {
        // A package dpkg has never heard of makes dpkg-query exit 1 with no
        // output: that is "not installed", not an error.
        let output = Command::new("dpkg-query").args(["-W", "-f=${Status}\\n", package]).env("LC_ALL", "C").output()?;
        if !is_installed(&String::from_utf8_lossy(&output.stdout)) {
            missing.push(package);
        }
    }
    Ok(missing)
}

/// Reads `dpkg-query -W -f='${Status}\n'` output: one "want flag status" line
/// per matching package (several for a multi-arch package). Installed means
/// some line has flag `ok` and status `installed`: "install ok installed", or
/// "hold ok installed" for a held package.
pub fn is_installed(dpkg_status: &str) -> bool {
    dpkg_status.lines().any(|line| {
        let mut words = line.split_whitespace();
        matches!(
            (words.next(), words.next(), words.next(), words.next()),
            (Some(_want), Some("ok"), Some("installed"), None)
        )
    })
}

fn not_root_message(missing: &[&str]) -> String {
    format!(
        "missing Debian packages: {}\n\
         xtask installs them only when run as root. Install them, then run xtask again:\n  \
         sudo {}",
        missing.join(" "),
        install_command(missing).display()
    )
}

fn install_command(packages: &[&str]) -> Invocation {
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend_from_slice(packages);
    Invocation::new("apt-get", args).env("DEBIAN_FRONTEND", "noninteractive")
}

fn apt_update() -> Result<(), Failure> {
    let update = Invocation::new("apt-get", ["update"]).env("DEBIAN_FRONTEND", "noninteractive");
    eprintln!("xtask: $ {}", update.display());
    update.run()
}

/// True when apt has no package index yet (a fresh container image), so an
/// install cannot find anything before `apt-get update`.
fn apt_lists_are_empty(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(entries) => !has_package_index(
            entries.filter_map(Result::ok).map(|entry| entry.file_name().to_string_lossy().into_owned()),
        ),
        Err(_) => true,
    }
}

/// Whether a listing of the apt lists directory holds a package index
/// (`..._Packages`, possibly compressed: `_Packages.lz4`, `.gz`, ...).
fn has_package_index(names: impl IntoIterator<Item = String>) -> bool {
    names.into_iter().any(|name| name.ends_with("_Packages") || name.contains("_Packages."))
}

/// Whether xtask runs with effective uid 0.
pub fn is_root() -> bool {
    effective_uid() == Some(0)
}

fn effective_uid() -> Option<u32> {
    if let Some(uid) =
        std::fs::read_to_string("/proc/self/status").ok().and_then(|status| effective_uid_from_status(&status))
    {
        return Some(uid);
    }
    let output = Command::new("id").arg("-u").output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// The effective uid from `/proc/self/status`, whose line reads
/// `Uid:\t<real>\t<effective>\t<saved>\t<filesystem>`.
fn effective_uid_from_status(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_status_installed() {
        assert!(is_installed("install ok installed"));
        assert!(is_installed("install ok installed\n"));
        assert!(is_installed("hold ok installed\n"));
        // Multi-arch: one line per architecture; one installed is enough.
        assert!(is_installed("unknown ok not-installed\ninstall ok installed\n"));
    }

    #[test]
    fn dpkg_status_not_installed() {
        assert!(!is_installed(""));
        assert!(!is_installed("unknown ok not-installed"));
        assert!(!is_installed("deinstall ok config-files"));
        assert!(!is_installed("install ok half-configured"));
        assert!(!is_installed("install ok unpacked"));
        assert!(!is_installed("install reinstreq half-installed"));
        assert!(!is_installed("install ok installedinstall ok installed"));
        assert!(!is_installed("install ok installed extra"));
    }

    #[test]
    fn missing_packages_asks_dpkg() {
        match missing_packages(&["dpkg", "xtask-no-such-package"]) {
            Ok(missing) => assert_eq!(missing, ["xtask-no-such-package"]),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {} // not Debian
            Err(err) => panic!("dpkg-query: {err}"),
        }
    }

    #[test]
    fn empty_list_needs_no_dpkg() {
        // Must succeed anywhere, even without dpkg-query or root.
        assert_eq!(ensure_debian_packages(&[]), Ok(()));
    }

    #[test]
    fn install_command_line() {
        assert_eq!(
            install_command(&["clang", "libelf-dev"]).display(),
            "apt-get install -y --no-install-recommends clang libelf-dev"
        );
    }

    #[test]
    fn not_root_message_gives_the_command() {
        let message = not_root_message(&["clang", "m4"]);
        assert!(message.starts_with("missing Debian packages: clang m4\n"), "{message}");
        assert!(message.ends_with("\n  sudo apt-get install -y --no-install-recommends clang m4"), "{message}");
    }

    #[test]
    fn package_index_detection() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!has_package_index(names(&[])));
        assert!(!has_package_index(names(&["lock", "partial", "auxfiles"])));
        assert!(!has_package_index(names(&["deb.debian.org_debian_dists_bookworm_InRelease"])));
        assert!(has_package_index(names(&[
            "lock",
            "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4",
        ])));
        assert!(has_package_index(names(&["x_main_binary-amd64_Packages"])));
        assert!(apt_lists_are_empty(Path::new("/nonexistent/xtask/apt/lists")));
    }

    #[test]
    fn uid_from_proc_status() {
        let status = "Name:\txtask\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(effective_uid_from_status(status), Some(0));
        assert_eq!(effective_uid_from_status("Uid:\t0\t1000\t1000\t1000\n"), Some(1000));
        assert_eq!(effective_uid_from_status("Name:\tx\n"), None);
        assert!(effective_uid().is_some());
    }
}
