//! `http`: wrk (and h2load for HTTP/2) from a client namespace of the
//! testbed against Fairway over AF_XDP, Fairway on kernel sockets, and
//! nginx, on the same server cores.
//!
//! - [`plan`]: the servers, the cases, the core budget, the command lines;
//! - [`wrk`]: the pipelining script and wrk's `--latency` report;
//! - [`h2load`]: h2load's report;
//! - [`site`]: the files of a run (the one nginx module's site, wrk's script);
//! - [`measure`]: one server started, checked, measured and stopped;
//! - [`openloop`]: the open-loop load generator for the latency case;
//! - [`report`]: medians, the tables, the closing line, the result file.

pub mod h2load;
pub mod measure;
pub mod openloop;
pub mod plan;
pub mod report;
pub mod site;
pub mod wrk;
