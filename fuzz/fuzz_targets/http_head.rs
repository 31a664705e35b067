//! The request-head parser on any bytes: no panic, and each outcome keeps
//! to its contract (`fairway::http::fuzzing::head`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fairway::http::fuzzing::head(data));
