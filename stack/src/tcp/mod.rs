//! TCP (RFC 9293).

pub mod assembler;
pub mod seq;
