//! The write side: publishing a version (partitions first, then the derived objects, then the
//! manifest, then the pointer), with every derived object brought up to date from the rows the
//! publish adds, not from the whole corpus (the ingest cost invariant of ARCHITECTURE.md).

pub mod access;
pub mod delta;
pub mod encode;
pub mod ids;
pub mod late;
pub mod publish;
pub mod spill;
