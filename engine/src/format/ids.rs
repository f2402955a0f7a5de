//! Id runs: which source-day partitions hold a revision of a record id, without reading them.
//!
//! Why: a publisher must know the current revision of every id it adds (to supersede it or to
//! see that nothing changed), and the ingest pipeline must know what the corpus holds of the
//! ids it parsed (first-seen instants, the forward lane's "already seen"). Reading every
//! partition of a source-lane for that makes one day's ingest into a 20M-row corpus cost the
//! whole corpus. An id run answers "which days may hold id X" by reading a few kilobytes, so
//! the publisher reads only the partitions that can hold its ids.
//!
//! The index of one source-lane is a small set of immutable runs (a log-structured merge):
//! each publish that adds rows to the source-lane writes one run of `(key(id), day)` pairs for
//! the rows it added, then merges runs of similar size ([`MERGE_RATIO`]), so a source-lane has
//! O(log n) runs and each entry is rewritten O(log n) times over the corpus's life. A lookup
//! asks every run; the union of their days is where the id's revisions live. Keys are the first
//! eight bytes of the id's sha256: two ids sharing a key only make a reader open one partition
//! more, never miss one, because readers match the real id in the rows they read.
//!
//! A run is one object, `snapshots/ids/<source>/<lane>/<sha256>.ids`, little-endian:
//!
//! ```text
//! "ASOFIDS1"              8 bytes, magic
//! n        u64            entries
//! block    u32            entries per block (the fence interval)
//! reserved u32            0
//! entries  n × (u64 key, i32 day)   sorted by (key, day), no duplicates
//! fences   ceil(n / block) × u64    the key of each block's first entry
//! ```
//!
//! Small runs are read whole and hash-checked; a large one is read by byte ranges (header,
//! fences, then only the blocks a key can be in), as access data files are. Runs are derived
//! objects listed in the manifest's `access` list (kind [`KIND_IDS`]); partitions stay
//! authoritative, and a source-lane with partitions but no run is indexed from its partitions
//! at its next publish (a corpus written before id runs existed).
//!
//! A large run also has a key filter (kind [`KIND_IDS_FILTER`], `<run sha256>.filter` beside
//! it): a split-block Bloom filter of its keys, Parquet's (`parquet::bloom_filter::Sbbf`), about
//! a byte and a half per entry against the run's twelve. Why: keys are hashes, so the ids of one
//! day's ingest need blocks all over a large run, and a range per block (or the whole run, once
//! object_store coalesces their ranges) costs the size of the corpus, not of the ingest; most of
//! a day's ids are new, and the filter says so without a block. A lookup reads the filter whole
//! once (kept in [`ID_RUNS`] with the fences, so a poller reads it once per run it sees), then
//! only the blocks of the keys that pass: the ids the run holds, and about one in a hundred of
//! the others. Layout, little-endian:
//!
//! ```text
//! "ASOFIDF1"              8 bytes, magic
//! n        u64            entries of the run it filters
//! filter                  Parquet's Bloom filter: its Thrift header, then the bitset
//! ```

use std::ops::Range;

use bytes::Bytes;
use parquet::bloom_filter::Sbbf;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::clock::{Day, Lane, SourceId};
use crate::model::manifest::{Manifest, ObjectEntry};
use crate::store::CorpusStore;
use crate::store::objects::get_checked;

/// Manifest `kind` of an id run.
pub const KIND_IDS: &str = "ids.run/1";
/// Manifest `kind` of a large run's key filter.
pub const KIND_IDS_FILTER: &str = "ids.filter/1";
/// The filter's target rate of false positives: keys it passes that the run does not hold.
const FILTER_FPP: f64 = 0.01;
const FILTER_MAGIC: &[u8; 8] = b"ASOFIDF1";
/// Entries between two fences.
pub const BLOCK: u32 = 256;
/// A run is merged into the next larger one when it holds at least 1/`MERGE_RATIO` of it.
pub const MERGE_RATIO: u64 = 4;
/// Runs per source-lane beyond which the two smallest are merged whatever their sizes.
pub const MAX_RUNS: usize = 12;
/// Runs up to this size are read whole (and hash-checked) rather than by ranges.
pub(crate) const WHOLE_READ_BYTES: u64 = 4 << 20;

const MAGIC: &[u8; 8] = b"ASOFIDS1";
pub(crate) const HEADER: u64 = 24;
pub(crate) const ENTRY: u64 = 12;

/// One `(key, day)` pair of a run.
pub type IdEntry = (u64, i32);

/// The key of a record id: the first eight bytes of its sha256, big-endian.
pub fn key_of(id: &str) -> u64 {
    let d = Sha256::digest(id.as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// The entry saying `id` has a revision in the partition of `day`.
pub fn entry(id: &str, day: Day) -> IdEntry {
    (key_of(id), day.days())
}

/// The folder holding the runs of one source-lane.
pub fn run_dir(source: SourceId, lane: Lane) -> String {
    format!("snapshots/ids/{source}/{lane}/")
}

/// The runs of one source-lane listed in `manifest`.
pub fn runs_of(manifest: &Manifest, source: SourceId, lane: Lane) -> Vec<&ObjectEntry> {
    let dir = run_dir(source, lane);
    manifest
        .access
        .iter()
        .filter(|e| e.kind == KIND_IDS && e.path.starts_with(&dir))
        .collect()
}

/// Where the key filter of `run` lies: beside it, named by the run's hash.
pub(crate) fn filter_path(run: &ObjectEntry) -> String {
    let stem = run.path.strip_suffix(".ids").unwrap_or(&run.path);
    format!("{stem}.filter")
}

/// The key filter of `run` listed in `manifest`, if it has one (small runs, and large ones
/// written before filters existed, have none).
pub fn filter_of<'a>(manifest: &'a Manifest, run: &ObjectEntry) -> Option<&'a ObjectEntry> {
    let path = filter_path(run);
    manifest
        .access
        .iter()
        .find(|e| e.kind == KIND_IDS_FILTER && e.path == path)
}

/// Encodes the key filter of a run holding `entries` (sorted).
pub fn encode_filter(entries: &[IdEntry]) -> Vec<u8> {
    let distinct = 1 + entries.windows(2).filter(|w| w[0].0 != w[1].0).count() as u64;
    let mut f = Sbbf::new_with_ndv_fpp(distinct, FILTER_FPP).expect("a rate within 0..1");
    let mut last = None;
    for &(k, _) in entries {
        if last != Some(k) {
            f.insert(&k);
            last = Some(k);
        }
    }
    // Its size is rounded up to a power of two; fold back what the rate does not need.
    f.fold_to_target_fpp(FILTER_FPP);
    let mut out = Vec::with_capacity(16 + f.num_blocks() * 32 + 16);
    out.extend_from_slice(FILTER_MAGIC);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    f.write(&mut out).expect("writing to a Vec");
    out
}

/// Decodes a key filter, checking it is one and filters a run of `n` entries.
pub(crate) fn decode_filter(path: &str, bytes: &[u8], n: u64) -> Result<Sbbf> {
    if bytes.len() < 16 || &bytes[..8] != FILTER_MAGIC {
        return Err(Error::integrity(path, "not an id-run filter (bad magic)"));
    }
    let of = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if of != n {
        return Err(Error::integrity(
            path,
            format!("a filter of {of} entries for a run of {n}"),
        ));
    }
    let f = Sbbf::from_bytes(&bytes[16..])
        .map_err(|e| Error::integrity(path, format!("unreadable id-run filter: {e}")))?;
    // Parquet checks the bitset is as long as its header says; a filter of no block would
    // answer nothing (and Parquet's check indexes its first block).
    if f.num_blocks() == 0 {
        return Err(Error::integrity(path, "an id-run filter of no whole block"));
    }
    Ok(f)
}

/// Checks a key filter against its run: hash, layout, and that every key of the run passes
/// it (a filter that refused one would hide that id's revisions from the publisher).
pub async fn verify_filter(
    store: &CorpusStore,
    manifest: &Manifest,
    e: &ObjectEntry,
) -> Result<()> {
    let run = manifest
        .access
        .iter()
        .find(|r| r.kind == KIND_IDS && filter_path(r) == e.path)
        .ok_or_else(|| Error::integrity(&e.path, "an id-run filter without its run"))?;
    let bytes = get_checked(store, &e.path, &e.sha256).await?;
    let filter = decode_filter(&e.path, &bytes, run.row_count)?;
    for (k, _) in read_run(store, run).await? {
        if !filter.check(&k) {
            return Err(Error::integrity(
                &e.path,
                format!("the filter refuses key {k:016x}, which its run holds"),
            ));
        }
    }
    Ok(())
}

/// Whether the source-lane's runs cover its partitions: it has runs, or no partitions at all.
pub fn indexed(manifest: &Manifest, source: SourceId, lane: Lane) -> bool {
    !runs_of(manifest, source, lane).is_empty()
        || !manifest
            .partitions
            .iter()
            .any(|p| p.source_id == source && p.lane == lane)
}

/// Encodes sorted, deduplicated entries as a run.
pub fn encode(entries: &[IdEntry]) -> Vec<u8> {
    debug_assert!(entries.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    let n = entries.len() as u64;
    let blocks = n.div_ceil(u64::from(BLOCK));
    let mut out = Vec::with_capacity((HEADER + n * ENTRY + blocks * 8) as usize);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&BLOCK.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for (k, d) in entries {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&d.to_le_bytes());
    }
    for chunk in entries.chunks(BLOCK as usize) {
        out.extend_from_slice(&chunk[0].0.to_le_bytes());
    }
    out
}

/// The header of a run: entry count and block size, checked against the object's length.
pub(crate) fn header(path: &str, bytes: &[u8], len: u64) -> Result<(u64, u32)> {
    if bytes.len() < HEADER as usize || &bytes[..8] != MAGIC {
        return Err(Error::integrity(path, "not an id run (bad magic)"));
    }
    let n = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let block = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if block == 0 {
        return Err(Error::integrity(path, "id run with a zero block size"));
    }
    let expected = n
        .checked_mul(ENTRY)
        .and_then(|e| e.checked_add(HEADER))
        .and_then(|e| e.checked_add(n.div_ceil(u64::from(block)) * 8));
    if expected != Some(len) {
        return Err(Error::integrity(
            path,
            format!("id run of {n} entries cannot be {len} bytes long"),
        ));
    }
    Ok((n, block))
}

pub(crate) fn decode_entries(path: &str, bytes: &[u8]) -> Result<Vec<IdEntry>> {
    if !bytes.len().is_multiple_of(ENTRY as usize) {
        return Err(Error::integrity(path, "id run block of a partial entry"));
    }
    Ok(bytes
        .chunks_exact(ENTRY as usize)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                i32::from_le_bytes(c[8..].try_into().expect("4 bytes")),
            )
        })
        .collect())
}

/// Every entry of a run, read whole and hash-checked.
pub async fn read_run(store: &CorpusStore, e: &ObjectEntry) -> Result<Vec<IdEntry>> {
    let bytes = get_checked(store, &e.path, &e.sha256).await?;
    let (n, _) = header(&e.path, &bytes, bytes.len() as u64)?;
    let end = (HEADER + n * ENTRY) as usize;
    let entries = decode_entries(&e.path, &bytes[HEADER as usize..end])?;
    if !entries.windows(2).all(|w| w[0] < w[1]) {
        return Err(Error::integrity(&e.path, "id run entries out of order"));
    }
    Ok(entries)
}

pub(crate) async fn get_ranges(
    store: &CorpusStore,
    path: &str,
    ranges: &[Range<u64>],
) -> Result<Vec<Bytes>> {
    Ok(store
        .object_store()
        .get_ranges(&object_store::path::Path::from(path), ranges)
        .await?)
}

pub(crate) async fn get_range(store: &CorpusStore, path: &str, range: Range<u64>) -> Result<Bytes> {
    let mut got = get_ranges(store, path, std::slice::from_ref(&range)).await?;
    got.pop()
        .ok_or_else(|| Error::integrity(path, "a range read answered nothing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::ids::days_holding;
    use crate::store::hashing::sha256_hex;
    use crate::testkit::empty_manifest;
    use crate::write::ids::add;
    use std::collections::BTreeSet;

    fn ids(range: Range<u32>, day: i32) -> Vec<IdEntry> {
        range
            .map(|i| entry(&format!("id-{i}"), Day::from_days(day)))
            .collect()
    }

    #[test]
    fn a_run_encodes_its_entries_and_fences_in_the_documented_layout() {
        let mut e = ids(0..600, 7);
        e.sort_unstable();
        let bytes = encode(&e);
        assert_eq!(&bytes[..8], MAGIC);
        let blocks = 600u64.div_ceil(u64::from(BLOCK));
        assert_eq!(bytes.len() as u64, HEADER + 600 * ENTRY + blocks * 8);
        assert_eq!(
            header("x", &bytes, bytes.len() as u64).unwrap(),
            (600, BLOCK)
        );
        assert!(header("x", &bytes, bytes.len() as u64 + 1).is_err());
    }

    #[tokio::test]
    async fn lookups_find_every_day_an_id_was_written_on_across_merged_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = empty_manifest();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        add(&store, &mut m, s, l, ids(0..1000, 10)).await.unwrap();
        // A revision of id-5 on another day, and new ids.
        let mut more = ids(1000..1010, 11);
        more.push(entry("id-5", Day::from_days(12)));
        add(&store, &mut m, s, l, more).await.unwrap();
        let days = days_holding(&store, &m, s, l, ["id-5", "id-1003", "absent"])
            .await
            .unwrap()
            .unwrap();
        let days: Vec<i32> = days.into_iter().map(Day::days).collect();
        assert_eq!(days, vec![10, 11, 12]);
        // Other source-lanes are not indexed by these runs.
        assert!(
            days_holding(&store, &m, s, Lane::ForwardFirstSeen, ["id-5"])
                .await
                .unwrap()
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn runs_merge_into_few_of_geometric_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = empty_manifest();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        // Batches of uneven sizes (1 to 301 ids), as real ingests are.
        let mut next = 0u32;
        for batch in 0..40u32 {
            let size = (batch * 137) % 301 + 1;
            add(&store, &mut m, s, l, ids(next..next + size, batch as i32))
                .await
                .unwrap();
            next += size;
            let mut sizes: Vec<u64> = runs_of(&m, s, l).iter().map(|e| e.row_count).collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            assert!(sizes.len() <= MAX_RUNS, "{sizes:?}");
            for w in sizes.windows(2) {
                assert!(w[1] * MERGE_RATIO < w[0], "{sizes:?}");
            }
            assert_eq!(sizes.iter().sum::<u64>(), u64::from(next));
        }
        let last = format!("id-{}", next - 1);
        let days = days_holding(&store, &m, s, l, ["id-0", last.as_str()])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            days.into_iter().map(Day::days).collect::<Vec<_>>(),
            vec![0, 39]
        );
    }

    #[tokio::test]
    async fn a_large_run_is_read_by_ranges_and_answers_like_a_whole_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = empty_manifest();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        // 400k entries (4.8 MB) is past the whole-read size; every id on two days, so a key's
        // entries straddle fences.
        let mut e = ids(0..200_000, 1);
        e.extend(ids(0..200_000, 2));
        add(&store, &mut m, s, l, e).await.unwrap();
        let run = runs_of(&m, s, l)[0].clone();
        assert!(run.bytes > WHOLE_READ_BYTES);
        let probe: Vec<String> = (0..200_000)
            .step_by(997)
            .map(|i| format!("id-{i}"))
            .collect();
        for id in &probe {
            let days = days_holding(&store, &m, s, l, [id.as_str()])
                .await
                .unwrap()
                .unwrap();
            assert_eq!(days.len(), 2, "{id}");
        }
        assert!(
            days_holding(&store, &m, s, l, ["id-200000"])
                .await
                .unwrap()
                .unwrap()
                .is_empty()
        );
    }

    /// 400k entries of ids named `prefix-i` over 50 days: a run past the whole-read size.
    fn large(prefix: &str) -> Vec<IdEntry> {
        (0..400_000u32)
            .map(|i| entry(&format!("{prefix}-{i}"), Day::from_days((i % 50) as i32)))
            .collect()
    }

    #[tokio::test]
    async fn a_large_runs_filter_keeps_a_days_new_ids_from_reading_its_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let (counting, store) = crate::testkit::counted_store(dir.path());
        let mut m = empty_manifest();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        add(&store, &mut m, s, l, large("filtered")).await.unwrap();
        let run = runs_of(&m, s, l)[0].clone();
        assert!(run.bytes > WHOLE_READ_BYTES);
        let filter = filter_of(&m, &run)
            .expect("a large run has a filter")
            .clone();
        assert!(
            filter.bytes * 6 < run.bytes,
            "filter {} bytes for a run of {}",
            filter.bytes,
            run.bytes
        );
        // One day's ingest: 5,000 ids never seen, 20 revisions of held ones.
        let held: Vec<u32> = (0..20).map(|i| i * 19_997).collect();
        let batch: Vec<String> = (0..5_000)
            .map(|i| format!("new-{i}"))
            .chain(held.iter().map(|i| format!("filtered-{i}")))
            .collect();
        counting.reset();
        let days = days_holding(&store, &m, s, l, batch.iter().map(String::as_str))
            .await
            .unwrap()
            .unwrap();
        let want: BTreeSet<Day> = held
            .iter()
            .map(|i| Day::from_days((i % 50) as i32))
            .collect();
        assert_eq!(days, want, "the held ids' days, and no other");
        // The filter whole, the header and fences, then a block (or two, at a fence) for each
        // held id and each false positive (1% of 5,000 expected; 3% allowed).
        let gets = counting.requests();
        let of = |path: &str| -> (usize, u64) {
            let hits: Vec<u64> = gets
                .iter()
                .filter(|(p, _)| p == path)
                .map(|(_, b)| *b)
                .collect();
            (hits.len(), hits.iter().sum())
        };
        assert_eq!(of(&filter.path), (1, filter.bytes));
        let (run_gets, run_bytes) = of(&run.path);
        let block_bytes = u64::from(BLOCK) * ENTRY;
        let fences = 400_000u64.div_ceil(u64::from(BLOCK)) * 8;
        let most_blocks = 2 * (20 + 150);
        assert!(
            run_bytes <= HEADER + fences + most_blocks * block_bytes,
            "{run_gets} GETs, {run_bytes} bytes of a {}-byte run",
            run.bytes
        );
        assert!(run_gets as u64 <= 2 + most_blocks, "{run_gets} GETs");
        // The next day's batch reads neither the filter nor the fences again.
        counting.reset();
        let next: Vec<String> = (5_000..10_000).map(|i| format!("new-{i}")).collect();
        let none = days_holding(&store, &m, s, l, next.iter().map(String::as_str))
            .await
            .unwrap()
            .unwrap();
        assert!(none.is_empty());
        let gets = counting.requests();
        assert!(gets.iter().all(|(p, _)| p == &run.path), "{gets:?}");
        assert!(gets.len() <= 150, "{} block reads", gets.len());
    }

    #[tokio::test]
    async fn a_large_run_written_before_filters_gets_one_at_the_next_publish_and_verify_checks_it()
    {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = empty_manifest();
        let (s, l) = (SourceId::SecEdgar, Lane::CertifiedPit);
        add(&store, &mut m, s, l, large("unfiltered"))
            .await
            .unwrap();
        // As a corpus written before filters were: the run alone.
        m.access.retain(|e| e.kind != KIND_IDS_FILTER);
        let run = runs_of(&m, s, l)[0].clone();
        assert!(filter_of(&m, &run).is_none());
        assert_eq!(
            days_holding(&store, &m, s, l, ["unfiltered-7"])
                .await
                .unwrap(),
            Some([Day::from_days(7)].into())
        );
        // A small publish keeps the run (too small to merge) and gives it its filter.
        add(&store, &mut m, s, l, ids(0..10, 60)).await.unwrap();
        assert!(runs_of(&m, s, l).iter().any(|r| r.path == run.path));
        let filter = filter_of(&m, &run).expect("filtered now").clone();
        verify_filter(&store, &m, &filter).await.unwrap();
        assert_eq!(
            days_holding(&store, &m, s, l, ["unfiltered-7", "id-3"])
                .await
                .unwrap(),
            Some([Day::from_days(7), Day::from_days(60)].into())
        );
        // A filter that refuses a key its run holds is a fault `verify` names, even when its
        // hash is the manifest's (an empty filter of the same size, listed as the real one).
        let bytes = std::fs::read(dir.path().join(&filter.path)).unwrap();
        let bits = decode_filter(&filter.path, &bytes, run.row_count)
            .unwrap()
            .num_blocks()
            * 32;
        let mut empty = bytes.clone();
        let at = empty.len() - bits;
        empty[at..].fill(0);
        std::fs::write(dir.path().join(&filter.path), &empty).unwrap();
        for e in &mut m.access {
            if e.path == filter.path {
                e.sha256 = sha256_hex(&empty);
            }
        }
        let forged = filter_of(&m, &run).unwrap().clone();
        let err = verify_filter(&store, &m, &forged)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("refuses key") && err.contains(&filter.path),
            "{err}"
        );
    }

    #[test]
    fn a_filter_that_is_not_one_or_names_another_run_is_refused() {
        let mut e = ids(0..100, 1);
        e.sort_unstable();
        let bytes = encode_filter(&e);
        assert!(decode_filter("f", &bytes, 100).is_ok());
        let err = decode_filter("f", &bytes, 101).unwrap_err().to_string();
        assert!(
            err.contains("a filter of 100 entries for a run of 101"),
            "{err}"
        );
        assert!(decode_filter("f", &bytes[..12], 100).is_err());
        assert!(decode_filter("f", b"ASOFIDS1........", 100).is_err());
        // The header and count of a filter, and a bitset cut short of its header's length.
        assert!(decode_filter("f", &bytes[..bytes.len() - 1], 100).is_err());
    }

    #[tokio::test]
    async fn a_damaged_run_is_an_integrity_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let mut m = empty_manifest();
        let (s, l) = (SourceId::OfacSdn, Lane::CertifiedPit);
        add(&store, &mut m, s, l, ids(0..10, 3)).await.unwrap();
        let run = runs_of(&m, s, l)[0].clone();
        let path = dir.path().join(&run.path);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[30] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let err = days_holding(&store, &m, s, l, ["id-1"])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(&run.path), "{err}");
    }
}
