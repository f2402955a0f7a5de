//! Bounded in-process caches keyed by immutable objects: compressed access-file blocks read
//! from remote object stores (S3, GCS, Azure), rows decoded from access files and partitions,
//! and partition footers (the id-run cache, `ids::ID_RUNS`, is built from [`Cache`] beside
//! what it holds).
//!
//! The index path reads a few pages of an access file per request. From a local directory
//! those are positional reads the OS page cache answers in microseconds; from an object store
//! each is an HTTP round trip, which made a replica on S3 twenty times slower than one on a
//! local disk (BENCHMARKS.md, "Load during reloads"). And wherever the bytes come from,
//! decoding a page into rows was most of what a first page cost once the bytes were at hand
//! (BENCHMARKS.md, "The hot path"). Access files are content-addressed (their name is their
//! sha256) and never rewritten, so what was read or decoded from one can be kept without ever
//! being invalidated, across reloads too: entries are keyed by path and range only.
//!
//! Each cache is bounded in bytes (`ASOF_REMOTE_CACHE_MB`, `ASOF_ROW_CACHE_MB` and
//! `ASOF_ID_RUN_CACHE_MB`, default 256 each; `ASOF_FOOTER_CACHE_MB`, 64; 0 turns one off):
//! past the bound the least recently used entries go first.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;

use crate::model::record::RowBlock;

/// The size bound of each cache when its variable is unset.
pub const DEFAULT_MB: usize = 256;

fn bound(var: &str) -> usize {
    bound_or(var, DEFAULT_MB)
}

/// The bound `var` sets in MiB, else `default_mb` MiB (for caches declared beside their
/// values, as `ids::ID_RUNS`).
pub fn bound_or(var: &str, default_mb: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_mb)
        * 1024
        * 1024
}

/// The process's cache of access-file blocks read from a remote store, compressed (one entry
/// per 128-row block, a few kilobytes): a block whose decoded rows left [`ROWS`] is decoded
/// again without a round trip.
pub static REMOTE: LazyLock<PageCache> =
    LazyLock::new(|| PageCache::new(bound("ASOF_REMOTE_CACHE_MB")));

/// Rows decoded: one entry per block of a CIK's run in an access file, or per block of a
/// partition the walk reads (`corpus::walk`), shared by every request that reads it.
pub static ROWS: LazyLock<Cache<Arc<RowBlock>>> =
    LazyLock::new(|| Cache::new(bound("ASOF_ROW_CACHE_MB")));

/// Footers (with page indexes) of partitions the walk reads, keyed by path and the whole
/// object's range: a block read then costs its pages only. Partitions are content-addressed
/// too, so a footer is never stale.
pub static FOOTERS: LazyLock<Cache<parquet::arrow::arrow_reader::ArrowReaderMetadata>> =
    LazyLock::new(|| Cache::new(bound_or("ASOF_FOOTER_CACHE_MB", 64)));

/// Byte ranges of stored objects.
pub type PageCache = Cache<Bytes>;

/// What an entry costs in memory, approximately (heap included).
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for Bytes {
    fn weight(&self) -> usize {
        self.len()
    }
}

impl Weigh for Arc<RowBlock> {
    fn weight(&self) -> usize {
        RowBlock::weight(self)
    }
}

impl Weigh for parquet::arrow::arrow_reader::ArrowReaderMetadata {
    fn weight(&self) -> usize {
        self.metadata().memory_size()
    }
}

/// Each object's entries by their range: value, weight, and the clock of its last use.
type Ranges<V> = HashMap<(u64, u64), (V, usize, u64), foldhash::fast::RandomState>;

/// A least-recently-used map from `(object path, range)` to a value, bounded in bytes.
#[derive(Debug)]
pub struct Cache<V> {
    max_bytes: usize,
    inner: Mutex<Inner<V>>,
}

/// Entries by object path, then range: a lookup (every page reads one or two) hashes the
/// borrowed path and copies nothing, where one `(String, u64, u64)` key made a `String` of the
/// path per lookup and hashed it with SipHash. The keys are the corpus's own object paths, not
/// a caller's text, so foldhash (no flooding resistance) is enough.
#[derive(Debug)]
struct Inner<V> {
    entries: HashMap<String, Ranges<V>, foldhash::fast::RandomState>,
    bytes: usize,
    clock: u64,
}

impl<V: Clone + Weigh> Cache<V> {
    pub fn new(max_bytes: usize) -> Self {
        Cache {
            max_bytes,
            inner: Mutex::new(Inner {
                entries: HashMap::default(),
                bytes: 0,
                clock: 0,
            }),
        }
    }

    /// The value of `range` of `path`, if held.
    pub fn get(&self, path: &str, range: &Range<u64>) -> Option<V> {
        if self.max_bytes == 0 {
            return None;
        }
        let mut m = self.inner.lock().expect("cache lock");
        m.clock += 1;
        let now = m.clock;
        let (value, _, used) = m
            .entries
            .get_mut(path)?
            .get_mut(&(range.start, range.end))?;
        *used = now;
        Some(value.clone())
    }

    /// Keeps `value` as `range` of `path`, evicting the least recently used entries past the
    /// bound (down to three quarters of it, so eviction runs rarely).
    pub fn put(&self, path: &str, range: &Range<u64>, value: V) {
        let len = value.weight();
        if len > self.max_bytes / 4 {
            return; // one entry may not take most of the cache
        }
        let mut m = self.inner.lock().expect("cache lock");
        m.clock += 1;
        let now = m.clock;
        let ranges = match m.entries.get_mut(path) {
            Some(r) => r,
            None => m.entries.entry(path.to_owned()).or_default(),
        };
        if let Some((_, old, _)) = ranges.insert((range.start, range.end), (value, len, now)) {
            m.bytes -= old;
        }
        m.bytes += len;
        if m.bytes > self.max_bytes {
            let mut by_age: Vec<(u64, String, (u64, u64), usize)> = m
                .entries
                .iter()
                .flat_map(|(path, ranges)| {
                    ranges
                        .iter()
                        .map(move |(r, (_, len, used))| (*used, path.clone(), *r, *len))
                })
                .collect();
            by_age.sort_unstable_by_key(|(used, ..)| *used);
            let target = self.max_bytes / 4 * 3;
            for (_, path, r, len) in by_age {
                if m.bytes <= target {
                    break;
                }
                if let Some(ranges) = m.entries.get_mut(&path) {
                    ranges.remove(&r);
                    if ranges.is_empty() {
                        m.entries.remove(&path);
                    }
                }
                m.bytes -= len;
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().expect("cache lock").bytes
    }

    /// Objects with at least one range held.
    #[cfg(test)]
    fn objects(&self) -> usize {
        self.inner.lock().expect("cache lock").entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_read_once_is_answered_from_memory() {
        let c = PageCache::new(1 << 20);
        assert!(c.get("a", &(0..4)).is_none());
        c.put("a", &(0..4), Bytes::from_static(b"abcd"));
        assert_eq!(c.get("a", &(0..4)).unwrap(), Bytes::from_static(b"abcd"));
        assert!(
            c.get("a", &(0..3)).is_none(),
            "another range is another entry"
        );
        assert!(c.get("b", &(0..4)).is_none());
        c.put("a", &(0..4), Bytes::from_static(b"wxyz"));
        assert_eq!(c.get("a", &(0..4)).unwrap(), Bytes::from_static(b"wxyz"));
        assert_eq!(c.bytes(), 4, "a range kept again replaces its weight");
    }

    #[test]
    fn past_the_bound_the_least_recently_used_ranges_go_first() {
        let c = PageCache::new(4000);
        for i in 0..4u64 {
            c.put(
                "f",
                &(i * 1000..i * 1000 + 900),
                Bytes::from(vec![0u8; 900]),
            );
        }
        // Touch the first: the second is now the oldest.
        assert!(c.get("f", &(0..900)).is_some());
        c.put("f", &(9000..9900), Bytes::from(vec![0u8; 900]));
        assert!(
            c.bytes() <= 3000,
            "evicted down to three quarters: {}",
            c.bytes()
        );
        assert!(c.get("f", &(0..900)).is_some(), "recently used: kept");
        assert!(
            c.get("f", &(1000..1900)).is_none(),
            "least recently used: gone"
        );
        assert!(c.get("f", &(9000..9900)).is_some());
        // A range larger than a quarter of the cache is never kept.
        c.put("g", &(0..2000), Bytes::from(vec![0u8; 2000]));
        assert!(c.get("g", &(0..2000)).is_none());
    }

    #[test]
    fn an_object_whose_every_range_was_evicted_is_forgotten() {
        let c = PageCache::new(4000);
        for (i, path) in ["a", "b", "c", "d"].iter().enumerate() {
            c.put(path, &(0..900), Bytes::from(vec![i as u8; 900]));
        }
        assert_eq!(c.objects(), 4);
        c.put("e", &(0..900), Bytes::from(vec![9; 900]));
        assert!(c.get("a", &(0..900)).is_none() && c.get("b", &(0..900)).is_none());
        assert_eq!(c.objects(), 3, "no empty map is left for an evicted object");
        assert_eq!(c.bytes(), 2700);
    }
}
