//! Self-signed certificates for the HTTPS tests and benchmarks, made by the
//! `openssl` tool (`cargo xtask test` installs it): one way to make them,
//! whatever key type and name a test needs.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The key a certificate is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256.
    EcdsaP256,
    /// RSA, 2048 bits.
    Rsa2048,
}

/// A self-signed certificate for `name` (a subject alternative name such
/// as `DNS:localhost` or `IP:10.77.0.1`) and its key, written to `cert`
/// and `key` (PEM), valid for a week.
///
/// # Errors
///
/// openssl cannot be run, or says why it made nothing.
pub fn self_signed(cert: &Path, key: &Path, kind: KeyKind, name: &str) -> io::Result<()> {
    let subject = format!("/CN={}", name.split_once(':').map_or(name, |(_, value)| value));
    let mut command = Command::new("openssl");
    command.args(["req", "-x509", "-nodes", "-days", "7", "-newkey"]);
    match kind {
        KeyKind::EcdsaP256 => command.args(["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
        KeyKind::Rsa2048 => command.arg("rsa:2048"),
    };
    let out = command
        .args(["-subj", &subject, "-addext", &format!("subjectAltName={name}")])
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("openssl (to make a certificate): {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("openssl req: {}", String::from_utf8_lossy(&out.stderr).trim())))
    }
}

/// [`self_signed`] into `dir` as `cert.pem` and `key.pem`: their paths.
///
/// # Errors
///
/// As [`self_signed`], or `dir` cannot be made.
pub fn self_signed_in(dir: &Path, kind: KeyKind, name: &str) -> io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    self_signed(&cert, &key, kind, name)?;
    Ok((cert, key))
}

/// The base64 SHA-256 of `cert`'s public key (its DER
/// SubjectPublicKeyInfo): what Chromium's
/// `--ignore-certificate-errors-spki-list` takes to trust this one key.
///
/// # Errors
///
/// openssl cannot be run, or cannot read `cert`.
pub fn spki_sha256_base64(cert: &Path) -> io::Result<String> {
    let script = "set -o pipefail; openssl x509 -in \"$1\" -noout -pubkey | openssl pkey -pubin -outform der | \
                  openssl dgst -sha256 -binary | openssl base64 -A";
    let out = Command::new("bash").args(["-c", script, "spki"]).arg(cert).output()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // 32 bytes are 44 characters of base64.
    if out.status.success() && text.len() == 44 {
        Ok(text)
    } else {
        Err(io::Error::other(format!(
            "openssl (SPKI of {}): {}",
            cert.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_are_made_for_the_name_given() {
        let dir = std::env::temp_dir().join(format!("fairway-certificate-{}", std::process::id()));
        for (kind, name, key_says) in
            [(KeyKind::EcdsaP256, "DNS:localhost", "PRIVATE KEY"), (KeyKind::Rsa2048, "IP:10.77.0.1", "PRIVATE KEY")]
        {
            let (cert, key) = self_signed_in(&dir, kind, name).unwrap();
            assert!(std::fs::read_to_string(&cert).unwrap().contains("BEGIN CERTIFICATE"));
            assert!(std::fs::read_to_string(&key).unwrap().contains(key_says));
            let text = Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(&cert).output().unwrap();
            let text = String::from_utf8_lossy(&text.stdout).into_owned();
            let (san, algorithm) = match kind {
                KeyKind::EcdsaP256 => ("DNS:localhost", "id-ecPublicKey"),
                KeyKind::Rsa2048 => ("IP Address:10.77.0.1", "rsaEncryption"),
            };
            assert!(text.contains(san) && text.contains(algorithm), "{text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_spki_fingerprint_is_the_keys_own() {
        let dir = std::env::temp_dir().join(format!("fairway-certificate-spki-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        let (cert_a, _) = self_signed_in(&a, KeyKind::EcdsaP256, "IP:10.77.0.1").unwrap();
        let (cert_b, _) = self_signed_in(&b, KeyKind::EcdsaP256, "IP:10.77.0.1").unwrap();
        let fingerprint = spki_sha256_base64(&cert_a).unwrap();
        assert!(fingerprint.ends_with('=') && !fingerprint.contains(char::is_whitespace), "{fingerprint}");
        assert_eq!(spki_sha256_base64(&cert_a).unwrap(), fingerprint);
        assert_ne!(spki_sha256_base64(&cert_b).unwrap(), fingerprint, "another key, another fingerprint");
        assert!(spki_sha256_base64(&dir.join("none.pem")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
