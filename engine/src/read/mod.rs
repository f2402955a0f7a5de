//! The read side: a loaded version ([`corpus::Corpus`]) and the answers it gives, with what
//! they read through: hash-checked objects, ranged partition reads, the access index, late
//! rows, id runs, Delta logs for sharing, the page caches and the scan pool; and `asof verify`.

pub mod access;
pub mod changes;
pub mod corpus;
pub mod delta;
pub mod ids;
pub mod late;
pub mod page_cache;
pub(crate) mod ranged;
pub mod sample;
pub mod scan_pool;
