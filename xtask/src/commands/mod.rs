//! The subcommands. Each declares the Debian packages it needs as a
//! `PACKAGES` constant and ensures them before it runs anything.

pub mod bench;
pub mod fuzz;
pub mod lab;
pub mod run;
pub mod sim;
pub mod soak;
pub mod test;
pub mod testbed;

use std::time::Duration;

/// "12.3 s"
fn seconds(elapsed: Duration) -> String {
    format!("{:.1} s", elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_format() {
        assert_eq!(seconds(Duration::from_millis(12_345)), "12.3 s");
        assert_eq!(seconds(Duration::ZERO), "0.0 s");
    }
}
