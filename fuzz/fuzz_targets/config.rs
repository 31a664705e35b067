//! The config file (TOML) and the `--weight` flag: any text is a config or
//! an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = fairway::config::from_file_text(text);
    // The same text as --weight values, one per line.
    let mut args = vec!["fairway".to_owned(), "--fairness".to_owned(), "equal-rate".to_owned()];
    for line in text.lines().take(16) {
        args.push("--weight".to_owned());
        args.push(line.to_owned());
    }
    let _ = fairway::config::Config::load(args, None);
});
