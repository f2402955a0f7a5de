//! Whole corpora built in one go, apart from the per-source adapters: the shipped sample
//! (`asof build-sample`, from the raw files under `snapshots/sources/`) and the synthetic
//! benchmark corpus (`asof bench-corpus`).

pub mod sample;
pub mod synthetic;
