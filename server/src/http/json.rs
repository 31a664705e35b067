//! The JSON the `/json` endpoint sends: a message object serialized per
//! request (as the TechEmpower rules require), into a fixed buffer.

use crate::http::response::ByteWriter;

/// The object `/json` answers with: `{"message":"Hello, World!"}`.
pub(crate) struct Message<'a> {
    pub message: &'a str,
}

impl Message<'_> {
    pub(crate) fn write_json(&self, w: &mut ByteWriter<'_>) {
        w.put(b"{");
        write_string(w, "message");
        w.put(b":");
        write_string(w, self.message);
        w.put(b"}");
    }
}

/// A JSON string (RFC 8259 §7): quotes, backslashes and control characters
/// escaped; everything else as UTF-8.
fn write_string(w: &mut ByteWriter<'_>, s: &str) {
    w.put(b"\"");
    let bytes = s.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..0x20 => b"",
            _ => continue,
        };
        w.put(&bytes[plain..i]);
        plain = i + 1;
        if escape.is_empty() {
            w.put(b"\\u00");
            w.put(&[b"0123456789abcdef"[usize::from(b >> 4)], b"0123456789abcdef"[usize::from(b & 0xf)]]);
        } else {
            w.put(escape);
        }
    }
    w.put(&bytes[plain..]);
    w.put(b"\"");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(message: &str) -> String {
        let mut buf = [0u8; 128];
        let mut w = ByteWriter::new(&mut buf);
        Message { message }.write_json(&mut w);
        let len = w.finish().unwrap();
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn serializes_the_message() {
        assert_eq!(json("Hello, World!"), r#"{"message":"Hello, World!"}"#);
        assert_eq!(json("a\"b\\c\nd\u{1}é"), r#"{"message":"a\"b\\c\nd\u0001é"}"#);
        assert_eq!(json(""), r#"{"message":""}"#);
    }
}
