//! The server's test helpers (`server/tests/common`, shared rather than copied) and starting
//! the binary itself (`spawn`), for the end-to-end tests of the `asof` binary.
#![allow(dead_code, unused_imports)]

#[path = "../../../server/tests/common/mod.rs"]
mod server;

pub use server::*;

pub mod spawn;
