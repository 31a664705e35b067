//! Quoting for POSIX shells: how a command is printed so that it can be
//! pasted back into one. Shared with `fairway-tests`'s testbed (it includes
//! this file), which prints the commands it runs the same way; the file
//! needs nothing but std, so xtask stays free of the workspace's crates.

use std::ffi::OsStr;

/// `word` as a POSIX shell takes it: as is when it has only characters a
/// shell leaves alone, else in single quotes (a `'` inside as `'\''`).
pub fn quote(word: &OsStr) -> String {
    let word = word.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.into_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_needs_it_is_quoted() {
        let q = |s: &str| quote(OsStr::new(s));
        assert_eq!(q("tcp::x"), "tcp::x");
        assert_eq!(q("--bytes=1,2"), "--bytes=1,2");
        assert_eq!(q("a b"), "'a b'");
        assert_eq!(q(""), "''");
        assert_eq!(q("it's"), r"'it'\''s'");
        assert_eq!(q("$HOME"), "'$HOME'");
    }
}
