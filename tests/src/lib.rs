//! Integration tests and simulated-network scenarios for Fairway.
//!
//! - [`world`]: shards on a simulated network, driven in virtual time;
//! - [`transfers`]: bulk transfers with SHA-256 integrity checks;
//! - [`reqresp`]: an allocation-free request/response workload;
//! - [`scenario`]: the named scenarios of `cargo xtask sim`.
#![deny(missing_docs)]

pub mod reqresp;
pub mod scenario;
pub mod transfers;
pub mod world;
