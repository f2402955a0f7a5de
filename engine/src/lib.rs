//! asof engine: corpus manifests and partitions, visibility clocks, coverage and identity.
//!
//! The engine knows nothing of HTTP. The server maps its answers to envelopes; offline
//! analysts call it through `asof query` and `asof sql`. See ARCHITECTURE.md for the map.

pub mod access;
pub mod changes;
pub mod clock;
pub mod corpus;
pub mod coverage;
pub mod cut;
pub mod delta;
pub mod encode;
pub mod error;
pub mod identity;
pub mod ids;
pub mod late;
pub mod lists;
pub mod manifest;
pub mod page_cache;
pub mod publish;
pub mod read;
pub mod record;
pub mod rule;
pub mod sample;
pub mod scan_pool;
pub mod spill;
pub mod sql;
pub mod store;
pub mod verify;

pub use clock::{
    AvailabilityBasis, CLOCK_PATTERN, Clock, DAY_PATTERN, Day, Instant, Lane, SourceId, VisibleBy,
};
pub use corpus::{
    Answer, Certificate, Corpus, CoverageQuery, Entity, FileEntry, FilePosition, FilesQuery,
    NewsQuery, Position, RecordLookup, normalize_cik,
};
pub use coverage::{Coverage, Scope};
pub use error::{ClockFault, Error, Result};
pub use manifest::Manifest;
pub use record::NewsRow;
pub use scan_pool::ScanPool;
pub use store::CorpusStore;

#[cfg(test)]
pub(crate) mod testkit;
