//! asof engine: corpus manifests and partitions, visibility clocks, coverage and identity.
//!
//! The engine knows nothing of HTTP. The answer layer (`asof-answer`) and the server map its
//! answers to envelopes; offline analysts call it through `asof query` and `asof sql`. The
//! folders are its layers, each using only those listed before it (ARCHITECTURE.md):
//! [`model`] (the as-of model: clocks, records, the cut, manifests, coverage, identity),
//! [`store`] (where a corpus lives: objects put and read back, hash-checked), [`format`] (every
//! stored object's layout, encoded and decoded), [`read`] (a loaded version and its answers),
//! [`rule`] (the rule exported to other engines: its tables derived, its SQL written),
//! [`sql`] (SQL over a snapshot), [`verify`] (`asof verify`) and [`write`] (publishing a
//! version), the order `scripts/check-circles` prints.

pub mod error;
pub mod format;
pub mod model;
pub mod read;
pub mod rule;
pub mod sql;
pub mod store;
pub mod verify;
pub mod write;

pub use error::{ClockFault, Error, Result};
pub use model::clock::{
    AvailabilityBasis, CLOCK_PATTERN, Clock, DAY_PATTERN, Day, Instant, Lane, SourceId, VisibleBy,
};
pub use model::coverage::{Coverage, Scope};
pub use model::manifest::Manifest;
pub use model::record::NewsRow;
pub use read::corpus::{
    Answer, Certificate, Corpus, CoverageQuery, Entity, FileEntry, FilePosition, FilesQuery,
    NewsQuery, Position, RecordLookup, normalize_cik,
};
pub use read::scan_pool::ScanPool;
pub use store::CorpusStore;

#[cfg(test)]
pub(crate) mod testkit;
