//! A bounded in-process cache of byte ranges read from remote object stores (S3, GCS, Azure).
//!
//! The index path reads a few pages of an access file per request. From a local directory
//! those are positional reads the OS page cache answers in microseconds; from an object store
//! each is an HTTP round trip, which made a replica on S3 twenty times slower than one on a
//! local disk (BENCHMARKS.md, "Load during reloads"). Access files are content-addressed
//! (their name is their sha256) and never rewritten, so a range read once can be kept without
//! ever being invalidated, across reloads too: the cache is keyed by path and range only.
//!
//! Bounded in bytes (`ASOF_REMOTE_CACHE_MB`, default 256): past the bound the least recently
//! used ranges go first.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{LazyLock, Mutex};

use bytes::Bytes;

/// The size bound when `ASOF_REMOTE_CACHE_MB` is unset.
pub const DEFAULT_MB: usize = 256;

/// The process's cache of remote ranges.
pub static REMOTE: LazyLock<PageCache> = LazyLock::new(|| {
    let mb = std::env::var("ASOF_REMOTE_CACHE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MB);
    PageCache::new(mb * 1024 * 1024)
});

type Key = (String, u64, u64);

#[derive(Debug)]
pub struct PageCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Key, (Bytes, u64)>,
    bytes: usize,
    clock: u64,
}

impl PageCache {
    pub fn new(max_bytes: usize) -> Self {
        PageCache {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The bytes of `range` of `path`, if held.
    pub fn get(&self, path: &str, range: &Range<u64>) -> Option<Bytes> {
        let mut m = self.inner.lock().expect("page cache lock");
        m.clock += 1;
        let now = m.clock;
        let (bytes, used) = m
            .entries
            .get_mut(&(path.to_owned(), range.start, range.end))?;
        *used = now;
        Some(bytes.clone())
    }

    /// Keeps `bytes` as `range` of `path`, evicting the least recently used ranges past the
    /// bound (down to three quarters of it, so eviction runs rarely).
    pub fn put(&self, path: &str, range: &Range<u64>, bytes: Bytes) {
        if bytes.len() > self.max_bytes / 4 {
            return; // one range may not take most of the cache
        }
        let mut m = self.inner.lock().expect("page cache lock");
        m.clock += 1;
        let now = m.clock;
        let len = bytes.len();
        if let Some((old, _)) = m
            .entries
            .insert((path.to_owned(), range.start, range.end), (bytes, now))
        {
            m.bytes -= old.len();
        }
        m.bytes += len;
        if m.bytes > self.max_bytes {
            let mut by_age: Vec<(u64, Key, usize)> = m
                .entries
                .iter()
                .map(|(k, (b, used))| (*used, k.clone(), b.len()))
                .collect();
            by_age.sort_unstable_by_key(|(used, _, _)| *used);
            let target = self.max_bytes / 4 * 3;
            for (_, k, len) in by_age {
                if m.bytes <= target {
                    break;
                }
                m.entries.remove(&k);
                m.bytes -= len;
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().expect("page cache lock").bytes
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
}
