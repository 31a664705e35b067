//! Integration tests and simulated-network scenarios for Fairway.
//!
//! - [`world`]: shards on a simulated network, driven in virtual time;
//! - [`apps`]: the server's HTTP layer on a bare shard and an HTTP client on
//!   the stack, for kernel peers;
//! - [`real_peers`]: shards on a testbed against curl and Python, for the
//!   real-peer tests;
//! - [`served`]: Fairway's own HTTP server (the userspace backend) on a
//!   testbed, and the kernel clients that check it;
//! - [`transfers`]: bulk transfers with SHA-256 integrity checks;
//! - [`reqresp`]: an allocation-free request/response workload;
//! - [`stream`]: endless downloads measured over a window of virtual time;
//! - [`regression`]: the regression table and the comparison with the Mathis bound;
//! - [`forge`]: forged TCP frames, for the attacks;
//! - [`http2`]: HTTP/2 from Python's `h2`: a client's checks and HTTP/2's own attacks;
//! - [`syn_flood`]: a SYN flood while legitimate clients connect;
//! - [`blind_injection`]: blind RSTs and data aimed at long transfers;
//! - [`fairness`]: RTT fairness under the window-control policies (`cargo xtask lab fairness`);
//! - [`fairness_testbed`]: the same with kernel TCP senders on the testbed;
//! - [`certificate`]: self-signed certificates for the HTTPS tests and benchmarks;
//! - [`browser`]: headless Chromium loading a page from a testbed namespace;
//! - [`delay_lab`]: how added delay slows downloads of each size, on the testbed (`cargo xtask lab delay`);
//! - [`nginx`]: nginx over the kernel stack in a testbed namespace, the
//!   uncontrolled baseline of every benchmark and lab: one configuration,
//!   one site directory, run as a [`testbed::ServerProcess`] (the process
//!   every benchmark starts its servers as);
//! - [`postgres`]: a PostgreSQL server of a test's own, for the axum_postgres example;
//! - [`todos`]: that example's to-do API against Python clients, checked against the database;
//! - [`plot`]: PNG charts of the lab's results (goodput over time, J against N);
//! - [`scenario`]: the named scenarios of `cargo xtask sim`.
//! - [`soak`]: the server over AF_XDP under a checked mixed load and link faults (`cargo xtask soak`);
//! - [`testbed`]: network namespaces where Fairway meets kernel peers (`cargo xtask testbed`).
#![deny(missing_docs)]

pub mod apps;
#[cfg(target_os = "linux")]
pub mod attack_testbed;
pub mod attacks;
pub mod blind_injection;
#[cfg(target_os = "linux")]
pub mod browser;
pub mod certificate;
#[cfg(target_os = "linux")]
pub mod delay_lab;
pub mod fairness;
#[cfg(target_os = "linux")]
pub mod fairness_testbed;
pub mod forge;
pub mod http2;
pub mod nginx;
pub mod platform;
pub mod plot;
#[cfg(target_os = "linux")]
pub mod postgres;
pub mod real_peers;
pub mod regression;
pub mod reqresp;
pub mod scenario;
#[cfg(target_os = "linux")]
pub mod served;
#[cfg(target_os = "linux")]
pub mod soak;
pub mod stats;
pub mod stream;
pub mod syn_flood;
pub mod testbed;
#[cfg(target_os = "linux")]
pub mod todos;
pub mod transfers;
pub mod world;
