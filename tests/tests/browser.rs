//! A real browser against the `fairway` server: headless Chromium in a
//! testbed client namespace loads a page of 50 assets over HTTPS from
//! Fairway's userspace stack over AF_XDP (root; `cargo xtask test` runs it
//! with the `afxdp` feature and installs Debian's `chromium`).
//!
//! The page's own script reports, once it has loaded, what the browser
//! got: every resource's protocol (`nextHopProtocol`, which must be `h2`),
//! status and sizes from the Resource Timing API, and what each asset did
//! when it arrived: each image's dimensions and a hash of its decoded
//! pixels, each stylesheet's generated content, each script's hash of its
//! own payload, all compared with what the test wrote. The server's
//! `/metrics` must agree: 51 responses, all 200.
//!
//! Chromium trusts the test's self-signed certificate through
//! `--ignore-certificate-errors-spki-list` with that certificate's key:
//! this one key is accepted, and every other certificate error still
//! stops a load.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fairway_tests::browser;
use fairway_tests::certificate::{KeyKind, self_signed_in, spki_sha256_base64};
use fairway_tests::served::{Root, Served};
use fairway_tests::testbed::{self, Testbed, TestbedConfig};

/// How long Chromium has to load the page (about a second here).
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What an asset is, and what it must have done in the page.
#[derive(Debug)]
enum Kind {
    /// An `<img>` of this size.
    Image { width: u32, height: u32 },
    /// A stylesheet giving its probe element a `::before` with the payload.
    Style,
    /// A script that hashes its payload.
    Script,
}

/// One asset: its URL path, its length, and the hash the page must report.
#[derive(Debug)]
struct Asset {
    path: String,
    kind: Kind,
    len: usize,
    hash: u32,
}

/// FNV-1a, 32 bits: what the page's script hashes with.
fn fnv(bytes: impl IntoIterator<Item = u8>) -> u32 {
    bytes.into_iter().fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// Deterministic pseudo-random bytes (xorshift), for pixels and payloads
/// that do not compress.
struct Noise(u64);

impl Noise {
    fn byte(&mut self) -> u8 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 32) as u8
    }

    /// `len` letters and digits: a payload that needs no escaping in a
    /// JavaScript or CSS string.
    fn text(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..len).map(|_| char::from(ALPHABET[usize::from(self.byte()) % ALPHABET.len()])).collect()
    }
}

/// An RGB PNG of `width` × `height`: smooth (a few hundred bytes) or
/// noise (three bytes a pixel). Returns the file and its pixels' hash.
fn png(width: u32, height: u32, noise: Option<&mut Noise>) -> (Vec<u8>, u32) {
    let pixels: Vec<u8> = match noise {
        Some(noise) => (0..width * height * 3).map(|_| noise.byte()).collect(),
        None => (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| [(x * 9) as u8, (y * 7) as u8, ((x + y) * 5) as u8]))
            .collect(),
    };
    let mut file = Vec::new();
    let mut encoder = png::Encoder::new(&mut file, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header().and_then(|mut w| w.write_image_data(&pixels)).unwrap();
    (file, fnv(pixels))
}

/// Writes the page and its 50 assets into `root/page/`: 20 images, 15
/// stylesheets and 15 scripts, 25 of them small (up to a few KB) and 25 of
/// a few KB to 320 KB. Returns the assets.
fn write_page(root: &Path) -> Vec<Asset> {
    let dir = root.join("page");
    std::fs::create_dir_all(&dir).unwrap();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut assets = Vec::new();
    let mut add = |name: String, kind: Kind, content: &[u8], hash: u32| {
        std::fs::write(dir.join(&name), content).unwrap();
        assets.push(Asset { path: format!("/page/{name}"), kind, len: content.len(), hash });
    };
    for i in 0..20u32 {
        let (side, noisy) = if i < 10 { (8 + 2 * i, false) } else { (60 + 24 * (i - 10), true) };
        let (width, height) = (side + i % 3, side);
        let (file, hash) = png(width, height, noisy.then_some(&mut noise));
        add(format!("image-{i}.png"), Kind::Image { width, height }, &file, hash);
    }
    let style_lens =
        [100, 400, 900, 1_500, 2_000, 2_500, 3_000, 3_500, 8_000, 16_000, 40_000, 80_000, 150_000, 220_000, 300_000];
    for (i, len) in style_lens.into_iter().enumerate() {
        let payload = noise.text(len);
        let css = format!("/* asset {i} */\n#s{i}::before {{ content: \"{payload}\"; }}\n");
        add(format!("style-{i}.css"), Kind::Style, css.as_bytes(), fnv(payload.bytes()));
    }
    let script_lens =
        [50, 300, 700, 1_200, 1_800, 2_400, 3_000, 5_000, 9_000, 27_000, 60_000, 100_000, 160_000, 240_000, 320_000];
    for (i, len) in script_lens.into_iter().enumerate() {
        let payload = noise.text(len);
        let js = format!("// asset {i}\nran[\"/page/script-{i}.js\"] = fnv(\"{payload}\");\n");
        add(format!("script-{i}.js"), Kind::Script, js.as_bytes(), fnv(payload.bytes()));
    }
    std::fs::write(dir.join("index.html"), index_html(&assets)).unwrap();
    assets
}

/// The page: every asset in its markup (stylesheets and scripts in the
/// head, images in the body), and a script that, on `load`, writes its
/// report into `<pre id="report">` one line a fact, ending with `done`.
fn index_html(assets: &[Asset]) -> String {
    let mut head = String::new();
    let mut body = String::new();
    let mut style = 0;
    for asset in assets {
        let path = &asset.path;
        match asset.kind {
            Kind::Image { .. } => body.push_str(&format!("<img src=\"{path}\">\n")),
            Kind::Style => {
                head.push_str(&format!("<link rel=\"stylesheet\" href=\"{path}\">\n"));
                body.push_str(&format!("<div class=\"probe\" id=\"s{style}\" data-href=\"{path}\"></div>\n"));
                style += 1;
            }
            Kind::Script => head.push_str(&format!("<script src=\"{path}\"></script>\n")),
        }
    }
    format!(
        r#"<!doctype html>
<html><head><meta charset="utf-8"><title>fifty assets</title>
<link rel="icon" href="data:,">
<style>.probe {{ width: 1px; height: 1px; overflow: hidden; }}</style>
<script>
const ran = {{}};
function fnv(s) {{
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {{ h ^= s.charCodeAt(i); h = Math.imul(h, 0x01000193); }}
  return h >>> 0;
}}
</script>
{head}</head><body>
{body}<pre id="report"></pre>
<script>
addEventListener("load", () => {{
  const lines = [];
  const nav = performance.getEntriesByType("navigation")[0];
  lines.push(["navigation", nav.nextHopProtocol, nav.responseStatus].join(" "));
  for (const r of performance.getEntriesByType("resource")) {{
    lines.push(["resource", new URL(r.name).pathname, r.nextHopProtocol, r.responseStatus,
                r.transferSize, r.encodedBodySize, r.decodedBodySize].join(" "));
  }}
  const canvas = document.createElement("canvas");
  for (const img of document.images) {{
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const cx = canvas.getContext("2d", {{ willReadFrequently: true }});
    cx.drawImage(img, 0, 0);
    const px = cx.getImageData(0, 0, canvas.width, canvas.height).data;
    let h = 0x811c9dc5;
    for (let i = 0; i < px.length; i++) {{ if (i % 4 != 3) {{ h ^= px[i]; h = Math.imul(h, 0x01000193); }} }}
    lines.push(["image", new URL(img.src).pathname, img.naturalWidth, img.naturalHeight, h >>> 0].join(" "));
  }}
  for (const el of document.querySelectorAll(".probe")) {{
    lines.push(["style", el.dataset.href, fnv(getComputedStyle(el, "::before").content.slice(1, -1))].join(" "));
  }}
  for (const [src, h] of Object.entries(ran)) lines.push(["script", src, h].join(" "));
  lines.push("done");
  document.getElementById("report").textContent = lines.join("\n");
}});
</script>
</body></html>
"#
    )
}

/// What the page reported: its lines, by kind, each split into words.
fn report(dom: &str) -> BTreeMap<&str, Vec<Vec<&str>>> {
    let start = dom.find("<pre id=\"report\">").map(|at| at + "<pre id=\"report\">".len());
    let text = start.and_then(|start| Some(&dom[start..start + dom[start..].find("</pre>")?]));
    let text = text.unwrap_or_else(|| panic!("no report in the DOM: {}", dom.chars().take(2_000).collect::<String>()));
    assert_eq!(text.lines().last(), Some("done"), "the page's report did not finish: {text}");
    let mut lines: BTreeMap<&str, Vec<Vec<&str>>> = BTreeMap::new();
    for line in text.lines().filter(|l| *l != "done") {
        let words: Vec<&str> = line.split(' ').collect();
        lines.entry(words[0]).or_default().push(words[1..].to_vec());
    }
    lines
}

/// `curl` from client 0 over HTTPS (HTTP/2): the body of `path`.
fn curl_https(tb: &Testbed, path: &str, cert: &Path) -> String {
    let url = format!("https://{}{path}", tb.server_ip());
    let cert = cert.display().to_string();
    let line = ["curl", "-sS", "-f", "--http2", "--max-time", "20", "--cacert", &cert, &url];
    let out = testbed::exec_timeout(&tb.client_ns(0), &line, Duration::from_secs(30)).unwrap();
    assert!(out.success(), "{path}: {}", out.stderr_text());
    out.stdout_text()
}

#[test]
fn chromium_loads_a_page_of_fifty_assets_over_https_and_http2_on_afxdp() {
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("br{}", std::process::id() % 100_000);
    let tb = Testbed::up(TestbedConfig::new(prefix).clients(1).queues(1)).unwrap_or_else(|e| panic!("testbed up: {e}"));
    let root = Root::new("browser");
    let assets = write_page(root.path());
    let ip = tb.server_ip().to_string();
    let (cert, key) = self_signed_in(&root.path().join("tls"), KeyKind::EcdsaP256, &format!("IP:{ip}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let fingerprint = spki_sha256_base64(&cert).unwrap_or_else(|e| panic!("{e}"));
    let (afxdp, root_arg) = (tb.afxdp_flags(), root.arg());
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let mut flags: Vec<&str> = afxdp.iter().map(String::as_str).collect();
    flags.extend(["--queues", "1", "--shards", "1", "--root", &root_arg]);
    flags.extend(["--tls-cert", &cert_arg, "--tls-key", &key_arg]);
    let served = Served::start(&tb, &flags);

    let trust = format!("--ignore-certificate-errors-spki-list={fingerprint}");
    let url = format!("https://{ip}/page/index.html");
    let dom = browser::dump_dom(&tb.client_ns(0), &url, &[&trust], LOAD_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(!browser::any_left(), "a Chromium process outlived its load");
    let report = report(&dom);

    assert_eq!(report["navigation"], [["h2", "200"]], "the page itself");
    let resources: BTreeMap<&str, &[&str]> = report["resource"].iter().map(|r| (r[0], &r[1..])).collect();
    assert_eq!(resources.len(), report["resource"].len(), "an asset was fetched twice: {:?}", report["resource"]);
    let fetched: std::collections::BTreeSet<&str> = resources.keys().copied().collect();
    assert_eq!(fetched, assets.iter().map(|a| a.path.as_str()).collect(), "what the page fetched");
    let reported = |kind: &str| -> BTreeMap<&str, Vec<&str>> {
        report.get(kind).into_iter().flatten().map(|r| (r[0], r[1..].to_vec())).collect()
    };
    let (images, styles, scripts) = (reported("image"), reported("style"), reported("script"));
    for asset in &assets {
        let path = asset.path.as_str();
        let [protocol, status, transfer, encoded, decoded] = resources[path] else {
            panic!("{path}: {:?}", resources[path])
        };
        assert_eq!((*protocol, *status), ("h2", "200"), "{path}");
        let len = asset.len.to_string();
        assert_eq!((*encoded, *decoded), (len.as_str(), len.as_str()), "{path}: the body's length");
        assert!(transfer.parse::<usize>().unwrap() > asset.len, "{path}: {transfer} bytes transferred, not a cache's");
        let (seen, expected) = match asset.kind {
            Kind::Image { width, height } => {
                (&images, vec![width.to_string(), height.to_string(), asset.hash.to_string()])
            }
            Kind::Style => (&styles, vec![asset.hash.to_string()]),
            Kind::Script => (&scripts, vec![asset.hash.to_string()]),
        };
        assert_eq!(
            seen.get(path),
            Some(&expected.iter().map(String::as_str).collect()),
            "{path}: what the page saw of it"
        );
    }
    assert_eq!((images.len(), styles.len(), scripts.len()), (20, 15, 15));

    // The server's side: the page and its 50 assets, each a 200, and
    // nothing else (no favicon: the page names its own).
    let metrics = curl_https(&tb, "/metrics", &cert);
    let responses: Vec<&str> = metrics.lines().filter(|l| l.starts_with("fairway_http_responses_total{")).collect();
    assert_eq!(responses, ["fairway_http_responses_total{code=\"200\"} 51"], "{metrics}");
    assert!(metrics.lines().any(|l| l == "fairway_http_requests_total 51"), "{metrics}");
    let reports = served.stop();
    // And the scrape.
    assert_eq!(reports.iter().map(|r| r.requests).sum::<u64>(), 52, "{reports:?}");
}
