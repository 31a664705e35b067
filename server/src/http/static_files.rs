//! Static files under a root directory: the one thing the HTTP layer does
//! besides memory.
//!
//! Resolving a URL path (`/a/b%20c.html`):
//!
//! 1. each `/`-separated segment is percent-decoded on its own, so an
//!    encoded slash (`%2F`) cannot make a separator, and a segment that
//!    decodes to one, to a NUL or to a backslash, or that is `..`
//!    (spelled any way, `%2e%2e` too), is refused (400): nothing climbs;
//! 2. the segments are joined under the root, the result canonicalized
//!    (symlinks resolved) and refused (403) unless it is still under the
//!    canonical root, so a symlink cannot lead out;
//! 3. a directory serves its `index.html` (checked the same way); there are
//!    no listings;
//! 4. the file is opened with `O_NOFOLLOW | O_NONBLOCK` and must be a regular
//!    file: a FIFO or device would block or never end.
//!
//! Between canonicalizing and opening, someone who can write under the root
//! could swap a directory for a symlink; the root is the operator's, so that
//! is out of scope (`openat2` with `RESOLVE_BENEATH` would close it).
//!
//! Opening a file allocates (canonical paths are built by the OS); reading
//! it does not: bodies are read with positioned reads straight into the
//! connection's output window, never whole.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::http::date;

/// Why a path is not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileError {
    /// 400: a bad escape, an encoded slash, a NUL, or a `..` segment.
    BadPath,
    /// 403: the path resolves outside the root (a symlink), or the OS
    /// refused to open it.
    Forbidden,
    /// 404: no such file, or not a regular file (a directory without
    /// `index.html`, a FIFO, a device).
    NotFound,
}

impl FileError {
    /// The status this error is answered with.
    #[must_use]
    pub fn status(self) -> u16 {
        match self {
            FileError::BadPath => 400,
            FileError::Forbidden => 403,
            FileError::NotFound => 404,
        }
    }
}

/// The files served from a root directory.
#[derive(Debug)]
pub struct StaticFiles {
    root: PathBuf,
    /// Scratch space for one path, reused.
    decoded: Vec<u8>,
    candidate: PathBuf,
}

impl StaticFiles {
    /// Serves files under `root`.
    ///
    /// # Errors
    ///
    /// `root` does not exist, cannot be canonicalized, or is not a directory.
    pub fn new(root: impl AsRef<Path>) -> io::Result<StaticFiles> {
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, format!("{} is not a directory", root.display())));
        }
        Ok(StaticFiles { root, decoded: Vec::with_capacity(256), candidate: PathBuf::with_capacity(256) })
    }

    /// The canonical root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens the file a URL path (without query) names.
    ///
    /// # Errors
    ///
    /// See [`FileError`].
    pub fn open(&mut self, url_path: &str) -> Result<OpenFile, FileError> {
        self.candidate.clear();
        self.candidate.push(&self.root);
        for segment in url_path.as_bytes().split(|&b| b == b'/') {
            self.decoded.clear();
            percent_decode(segment, &mut self.decoded)?;
            match self.decoded.as_slice() {
                b"" | b"." => {}
                b".." => return Err(FileError::BadPath),
                name if name.iter().any(|&b| matches!(b, b'/' | b'\\' | 0)) => return Err(FileError::BadPath),
                name => self.candidate.push(std::ffi::OsStr::from_bytes(name)),
            }
        }
        let mut path = self.beneath_root(&self.candidate)?;
        if std::fs::metadata(&path).map_err(not_found)?.is_dir() {
            path.push("index.html");
            path = self.beneath_root(&path)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(not_found)?;
        let meta = file.metadata().map_err(not_found)?;
        if !meta.is_file() {
            return Err(FileError::NotFound);
        }
        let since_epoch = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or_default();
        Ok(OpenFile {
            file,
            len: meta.len(),
            modified_secs: since_epoch.as_secs(),
            modified_nanos: u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX),
            content_type: content_type(&path),
        })
    }

    /// `path` canonicalized, if it stays under the root.
    fn beneath_root(&self, path: &Path) -> Result<PathBuf, FileError> {
        let canonical = std::fs::canonicalize(path).map_err(not_found)?;
        if canonical.starts_with(&self.root) { Ok(canonical) } else { Err(FileError::Forbidden) }
    }
}

fn not_found(e: io::Error) -> FileError {
    match e.kind() {
        io::ErrorKind::PermissionDenied => FileError::Forbidden,
        _ => FileError::NotFound,
    }
}

/// Appends `segment` with `%XX` escapes decoded.
fn percent_decode(segment: &[u8], out: &mut Vec<u8>) -> Result<(), FileError> {
    let mut bytes = segment.iter();
    while let Some(&b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16)).ok_or(FileError::BadPath);
        let (hi, lo) = (hex(bytes.next())?, hex(bytes.next())?);
        out.push((hi * 16 + lo) as u8);
    }
    Ok(())
}

/// `Content-Type` by extension; the default is `application/octet-stream`.
fn content_type(path: &Path) -> &'static str {
    let Some(ext) = path.extension().and_then(|e| e.to_str()) else { return "application/octet-stream" };
    const TYPES: &[(&str, &str)] = &[
        ("html", "text/html; charset=utf-8"),
        ("htm", "text/html; charset=utf-8"),
        ("css", "text/css; charset=utf-8"),
        ("js", "text/javascript; charset=utf-8"),
        ("mjs", "text/javascript; charset=utf-8"),
        ("txt", "text/plain; charset=utf-8"),
        ("md", "text/markdown; charset=utf-8"),
        ("csv", "text/csv; charset=utf-8"),
        ("json", "application/json"),
        ("xml", "application/xml"),
        ("wasm", "application/wasm"),
        ("pdf", "application/pdf"),
        ("zip", "application/zip"),
        ("gz", "application/gzip"),
        ("tar", "application/x-tar"),
        ("svg", "image/svg+xml"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("gif", "image/gif"),
        ("webp", "image/webp"),
        ("avif", "image/avif"),
        ("ico", "image/x-icon"),
        ("mp4", "video/mp4"),
        ("webm", "video/webm"),
        ("mp3", "audio/mpeg"),
        ("woff", "font/woff"),
        ("woff2", "font/woff2"),
        ("ttf", "font/ttf"),
        ("otf", "font/otf"),
    ];
    TYPES.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)).map_or("application/octet-stream", |(_, t)| t)
}

/// An open file and what its response headers need.
#[derive(Debug)]
pub struct OpenFile {
    file: File,
    len: u64,
    modified_secs: u64,
    modified_nanos: u64,
    content_type: &'static str,
}

impl OpenFile {
    /// The file's length when it was opened.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty when it was opened.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its `Content-Type`.
    #[must_use]
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }

    /// Its modification time, in whole seconds since 1970 (`Last-Modified`).
    #[must_use]
    pub fn modified_secs(&self) -> u64 {
        self.modified_secs
    }

    /// Its `Last-Modified` value.
    #[must_use]
    pub fn last_modified(&self) -> [u8; date::HTTP_DATE_LEN] {
        date::format_http_date(self.modified_secs)
    }

    /// Its strong `ETag`: `"<len hex>-<mtime ns hex>"`, quotes included.
    #[must_use]
    pub fn etag(&self) -> ETag {
        let mut tag = ETag { bytes: [0; ETAG_MAX], len: 0 };
        let mut w = crate::http::response::ByteWriter::new(&mut tag.bytes);
        w.put(b"\"");
        w.put_hex(self.len);
        w.put(b"-");
        w.put_hex(self.modified_nanos);
        w.put(b"\"");
        tag.len = w.len();
        tag
    }

    /// Reads into `buf` from `offset` (a positioned read; the file has no
    /// cursor to share).
    ///
    /// # Errors
    ///
    /// What `pread(2)` reports.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }

    /// RFC 9110 §13.1.2–3: whether `If-None-Match` (its field lines) or,
    /// without it, `If-Modified-Since` says the client's copy is current,
    /// for a GET or HEAD (→ 304).
    pub(crate) fn not_modified<'a>(
        &self,
        mut if_none_match: impl Iterator<Item = &'a [u8]>,
        if_modified_since: Option<&[u8]>,
    ) -> bool {
        let etag = self.etag();
        let mut any = false;
        for value in if_none_match.by_ref() {
            any = true;
            if entity_tags(value).any(|tag| matches!(tag, Tag::Any) || tag.opaque() == Some(etag.opaque())) {
                return true;
            }
        }
        if any {
            return false;
        }
        if_modified_since.and_then(date::parse_http_date).is_some_and(|since| self.modified_secs <= since)
    }

    /// RFC 9110 §13.1.5: a `Range` counts only if `If-Range` (when present)
    /// names this version: our strong ETag exactly, or our `Last-Modified`.
    pub(crate) fn range_applies(&self, if_range: Option<&[u8]>) -> bool {
        let Some(value) = if_range.map(<[u8]>::trim_ascii) else { return true };
        if value.starts_with(b"\"") || value.starts_with(b"W/") {
            return value == self.etag().as_bytes();
        }
        date::parse_http_date(value) == Some(self.modified_secs)
    }
}

const ETAG_MAX: usize = 40;

/// An entity tag, quotes included, in a fixed buffer.
#[derive(Clone, Copy, Debug)]
pub struct ETag {
    bytes: [u8; ETAG_MAX],
    len: usize,
}

impl ETag {
    /// The field value.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn opaque(&self) -> &[u8] {
        &self.bytes[1..self.len - 1]
    }
}

/// One member of an `If-None-Match` list.
enum Tag<'a> {
    Any,
    /// A tag's opaque part (weak or strong: `If-None-Match` compares weakly).
    Opaque(&'a [u8]),
}

impl Tag<'_> {
    fn opaque(&self) -> Option<&[u8]> {
        match self {
            Tag::Any => None,
            Tag::Opaque(o) => Some(o),
        }
    }
}

/// The members of `*` or `1#entity-tag`. Opaque tags may hold commas, so
/// this scans quotes rather than splitting; it stops at the first member
/// that is not an entity tag.
fn entity_tags(value: &[u8]) -> impl Iterator<Item = Tag<'_>> {
    let mut rest = value;
    std::iter::from_fn(move || {
        rest = rest.trim_ascii_start();
        while let [b',', tail @ ..] = rest {
            rest = tail.trim_ascii_start();
        }
        if let [b'*', tail @ ..] = rest {
            rest = tail;
            return Some(Tag::Any);
        }
        let quoted = rest.strip_prefix(b"W/").unwrap_or(rest).strip_prefix(b"\"")?;
        let close = quoted.iter().position(|&b| b == b'"')?;
        rest = &quoted[close + 1..];
        Some(Tag::Opaque(&quoted[..close]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        let mut out = Vec::new();
        percent_decode(b"a%20b%2e%2E%41", &mut out).unwrap();
        assert_eq!(out, b"a b..A");
        for bad in [&b"%"[..], b"%2", b"%zz", b"%%41"] {
            assert_eq!(percent_decode(bad, &mut Vec::new()), Err(FileError::BadPath));
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(Path::new("/a/index.HTML")), "text/html; charset=utf-8");
        assert_eq!(content_type(Path::new("/a/b.tar.gz")), "application/gzip");
        assert_eq!(content_type(Path::new("/a/b")), "application/octet-stream");
        assert_eq!(content_type(Path::new("/a/.png")), "application/octet-stream");
    }

    #[test]
    fn entity_tag_lists() {
        let tags = |v: &str| {
            entity_tags(v.as_bytes())
                .map(|t| t.opaque().map_or("*".to_string(), |o| String::from_utf8_lossy(o).into_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(tags(r#""a", W/"b,c" ,, "d""#), ["a", "b,c", "d"]);
        assert_eq!(tags("*"), ["*"]);
        assert_eq!(tags(r#""a", junk, "b""#), ["a"]);
        assert_eq!(tags(r#""unterminated"#), Vec::<String>::new());
        assert_eq!(tags(""), Vec::<String>::new());
    }
}
