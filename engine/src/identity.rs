//! Identity as of an instant: which CIK a ticker named, and which tickers and name a CIK had.
//!
//! Intervals are built from dated observations (full ticker-list snapshots and per-company
//! submissions captures) with *knowable-then* semantics: at an instant, a ticker is placed on a
//! CIK only if the latest relevant observation at or before that instant showed the pair and is
//! at most [`MAX_CARRY_DAYS`] old. A later observation never reaches back in time. A ticker is
//! never resolved through a current list.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::clock::{Day, Instant};
use crate::error::{Error, Result};
use crate::manifest::ObjectEntry;
use crate::store::CorpusStore;

/// How long one observation keeps a pair placed when no newer observation exists: two weekly
/// cadences of the ticker-file snapshots plus a day, so one missed weekly capture does not
/// open a hole, while a pair unseen for longer is no longer placed.
pub const MAX_CARRY_DAYS: i64 = 15;
const MICROS_PER_DAY: i64 = 86_400_000_000;

pub const FORMAT: &str = "asof.identity/1";

/// One observation file: a full ticker list, or one company's submissions capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvidenceFile {
    pub file: String,
    pub sha256: String,
    /// When the file was captured (or the upper bound the provenance gives for it).
    pub observed_at: Instant,
    /// `full` (a list of every ticker) or `cik:<n>` (one company's own list).
    pub scope: String,
}

/// A half-open interval `[valid_from, valid_to)` placing `ticker` on `cik`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickerInterval {
    pub ticker: String,
    pub cik: String,
    pub valid_from: Instant,
    pub valid_to: Instant,
    /// Indexes into `IdentityFile::evidence` of the observations that showed the pair.
    pub evidence: Vec<u32>,
}

/// A company name valid over whole days `[from, to]` (from submissions `formerNames`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameInterval {
    pub cik: String,
    pub name: String,
    pub from: Day,
    pub to: Day,
    pub evidence: Vec<u32>,
}

/// The columns of the identity object's Parquet encoding ([`IdentityFile::to_parquet`]), for
/// readers that need them before reading a file (its Delta table's schema). Every column is
/// declared nullable: the encoding marks a column required only when no row leaves it empty.
pub fn intervals_schema() -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    let s = |n: &str| Field::new(n, DataType::Utf8, true);
    let d = |n: &str| Field::new(n, DataType::Int32, true);
    let t = |n: &str| Field::new(n, crate::record::ts_type(), true);
    std::sync::Arc::new(Schema::new(vec![
        s("kind"),
        s("ticker"),
        s("cik"),
        s("name"),
        t("valid_from"),
        t("valid_to"),
        d("from_day"),
        d("to_day"),
        s("evidence"),
    ]))
}

/// The stored identity object (canonical JSON, hash-checked through the manifest).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityFile {
    pub format: String,
    pub evidence: Vec<EvidenceFile>,
    pub tickers: Vec<TickerInterval>,
    pub names: Vec<NameInterval>,
}

impl IdentityFile {
    /// Encodes as Parquet: one row per interval (`kind` = `ticker` or `name`), the evidence
    /// table as JSON in the file's key-value metadata (`asof.identity.evidence`).
    pub fn to_parquet(&self) -> Result<Vec<u8>> {
        use arrow::array::{
            ArrayRef, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
        };
        use parquet::arrow::ArrowWriter;
        use parquet::file::metadata::KeyValue;
        use std::sync::Arc;
        let n = self.tickers.len() + self.names.len();
        let mut kind = Vec::with_capacity(n);
        let (mut ticker, mut cik, mut name) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut from, mut to, mut from_day, mut to_day, mut ev) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let join = |e: &[u32]| e.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for t in &self.tickers {
            kind.push("ticker");
            ticker.push(Some(t.ticker.clone()));
            cik.push(t.cik.clone());
            name.push(None);
            from.push(Some(t.valid_from.micros()));
            to.push(Some(t.valid_to.micros()));
            from_day.push(None);
            to_day.push(None);
            ev.push(join(&t.evidence));
        }
        for nm in &self.names {
            kind.push("name");
            ticker.push(None);
            cik.push(nm.cik.clone());
            name.push(Some(nm.name.clone()));
            from.push(None);
            to.push(None);
            from_day.push(Some(nm.from.days()));
            to_day.push(Some(nm.to.days()));
            ev.push(join(&nm.evidence));
        }
        let ts = |v: Vec<Option<i64>>| -> ArrayRef {
            Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
        };
        let batch = RecordBatch::try_from_iter(vec![
            ("kind", Arc::new(StringArray::from(kind)) as ArrayRef),
            ("ticker", Arc::new(StringArray::from(ticker)) as ArrayRef),
            ("cik", Arc::new(StringArray::from(cik)) as ArrayRef),
            ("name", Arc::new(StringArray::from(name)) as ArrayRef),
            ("valid_from", ts(from)),
            ("valid_to", ts(to)),
            ("from_day", Arc::new(Int32Array::from(from_day)) as ArrayRef),
            ("to_day", Arc::new(Int32Array::from(to_day)) as ArrayRef),
            ("evidence", Arc::new(StringArray::from(ev)) as ArrayRef),
        ])?;
        let meta = vec![
            KeyValue::new("asof.identity.format".into(), self.format.clone()),
            KeyValue::new(
                "asof.identity.evidence".into(),
                serde_json::to_string(&self.evidence)?,
            ),
        ];
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .set_created_by("asof".into())
            .set_key_value_metadata(Some(meta))
            .build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
        w.write(&batch)?;
        w.close()?;
        Ok(buf)
    }

    pub fn from_parquet(path: &str, bytes: bytes::Bytes) -> Result<Self> {
        use arrow::array::{Array, Int32Array, StringArray, TimestampMicrosecondArray};
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let bad = |d: &str| Error::integrity(path, d.to_owned());
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| bad(&format!("not parquet: {e}")))?;
        let meta = builder.metadata().clone();
        let get = crate::read::footer_value(&meta);
        let format = get("asof.identity.format").ok_or_else(|| bad("no identity format"))?;
        let evidence: Vec<EvidenceFile> = serde_json::from_str(
            &get("asof.identity.evidence").ok_or_else(|| bad("no evidence table"))?,
        )?;
        let mut file = IdentityFile {
            format,
            evidence,
            tickers: vec![],
            names: vec![],
        };
        for batch in builder.build()? {
            let b = batch?;
            let s = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
                    .ok_or_else(|| bad(n))
            };
            let t = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| {
                        c.as_any()
                            .downcast_ref::<TimestampMicrosecondArray>()
                            .cloned()
                    })
                    .ok_or_else(|| bad(n))
            };
            let d = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| c.as_any().downcast_ref::<Int32Array>().cloned())
                    .ok_or_else(|| bad(n))
            };
            let (kind, ticker, cik, name, ev) = (
                s("kind")?,
                s("ticker")?,
                s("cik")?,
                s("name")?,
                s("evidence")?,
            );
            let (from, to, from_day, to_day) = (
                t("valid_from")?,
                t("valid_to")?,
                d("from_day")?,
                d("to_day")?,
            );
            for i in 0..b.num_rows() {
                let evidence: Vec<u32> = ev
                    .value(i)
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().map_err(|_| bad("evidence index")))
                    .collect::<Result<_>>()?;
                match kind.value(i) {
                    "ticker" if !ticker.is_null(i) && !from.is_null(i) && !to.is_null(i) => {
                        file.tickers.push(TickerInterval {
                            ticker: ticker.value(i).to_owned(),
                            cik: cik.value(i).to_owned(),
                            valid_from: Instant::from_micros(from.value(i)),
                            valid_to: Instant::from_micros(to.value(i)),
                            evidence,
                        })
                    }
                    "name" if !name.is_null(i) && !from_day.is_null(i) && !to_day.is_null(i) => {
                        file.names.push(NameInterval {
                            cik: cik.value(i).to_owned(),
                            name: name.value(i).to_owned(),
                            from: Day::from_days(from_day.value(i)),
                            to: Day::from_days(to_day.value(i)),
                            evidence,
                        })
                    }
                    other => return Err(bad(&format!("row {i}: bad interval of kind {other:?}"))),
                }
            }
        }
        Ok(file)
    }
}

/// A dated observation of ticker → CIK pairs.
#[derive(Debug, Clone)]
pub struct Observation {
    pub evidence: EvidenceFile,
    /// `None` for a full list; `Some(cik)` when the file speaks for one company only.
    pub cik_scope: Option<String>,
    pub pairs: BTreeSet<(String, String)>,
}

/// Builds knowable-then intervals from observations (any order).
pub fn build_intervals(
    mut observations: Vec<Observation>,
) -> (Vec<EvidenceFile>, Vec<TickerInterval>) {
    observations.sort_by(|a, b| {
        (a.evidence.observed_at, &a.evidence.file).cmp(&(b.evidence.observed_at, &b.evidence.file))
    });
    let carry = MAX_CARRY_DAYS * MICROS_PER_DAY;
    let evidence: Vec<EvidenceFile> = observations.iter().map(|o| o.evidence.clone()).collect();
    let all_pairs: BTreeSet<&(String, String)> =
        observations.iter().flat_map(|o| o.pairs.iter()).collect();
    let mut out = Vec::new();
    for pair in all_pairs {
        let (ticker, cik) = pair;
        // (start, last_seen, evidence) of the run being built.
        let mut open: Option<(Instant, Instant, Vec<u32>)> = None;
        let close =
            |run: (Instant, Instant, Vec<u32>), until: Instant, out: &mut Vec<TickerInterval>| {
                let end = until.min(Instant::from_micros(run.1.micros() + carry));
                out.push(TickerInterval {
                    ticker: ticker.clone(),
                    cik: cik.clone(),
                    valid_from: run.0,
                    valid_to: end,
                    evidence: run.2,
                });
            };
        for (i, o) in observations.iter().enumerate() {
            let relevant = o.cik_scope.as_ref().is_none_or(|c| c == cik);
            if !relevant {
                continue;
            }
            let t = o.evidence.observed_at;
            let shows = o.pairs.contains(pair);
            if let Some(run) = open.take() {
                let stale = t.micros() > run.1.micros() + carry;
                if shows && !stale {
                    let mut run = run;
                    run.1 = t;
                    run.2.push(i as u32);
                    open = Some(run);
                    continue;
                }
                close(run, t, &mut out);
            }
            if shows {
                open = Some((t, t, vec![i as u32]));
            }
        }
        if let Some(run) = open {
            close(run, Instant::from_micros(i64::MAX), &mut out);
        }
    }
    (evidence, out)
}

/// In-memory lookups over an identity file.
#[derive(Debug, Default)]
pub struct IdentityIndex {
    file: IdentityFile,
    by_ticker: HashMap<String, Vec<usize>>,
    by_cik: HashMap<String, Vec<usize>>,
    names_by_cik: HashMap<String, Vec<usize>>,
}

/// One interval as answered to a caller, with its evidence spelled out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mapping {
    pub ticker: String,
    pub cik: String,
    pub name: Option<String>,
    pub valid_from: Instant,
    pub valid_to: Instant,
    pub evidence: Vec<EvidenceFile>,
}

impl IdentityIndex {
    pub fn new(file: IdentityFile) -> Result<Self> {
        if !file.format.is_empty() && file.format != FORMAT {
            return Err(Error::Manifest {
                path: "identity".into(),
                detail: format!("unknown identity format {}", file.format),
            });
        }
        let mut idx = IdentityIndex {
            file,
            ..Default::default()
        };
        for (i, t) in idx.file.tickers.iter().enumerate() {
            idx.by_ticker.entry(t.ticker.clone()).or_default().push(i);
            idx.by_cik.entry(t.cik.clone()).or_default().push(i);
        }
        for (i, n) in idx.file.names.iter().enumerate() {
            idx.names_by_cik.entry(n.cik.clone()).or_default().push(i);
        }
        Ok(idx)
    }

    pub fn file(&self) -> &IdentityFile {
        &self.file
    }

    /// Whether any interval ever names this ticker (for "not held by name" refusals).
    pub fn knows_ticker(&self, ticker: &str) -> bool {
        self.by_ticker.contains_key(ticker)
    }

    pub fn knows_cik(&self, cik: &str) -> bool {
        self.by_cik.contains_key(cik) || self.names_by_cik.contains_key(cik)
    }

    /// Intervals placing `ticker` at `as_of` (empty: an identity hole).
    pub fn ticker_at(&self, ticker: &str, as_of: Instant) -> Vec<Mapping> {
        self.at(self.by_ticker.get(ticker), as_of)
    }

    /// Intervals placing any ticker on `cik` at `as_of`.
    pub fn cik_at(&self, cik: &str, as_of: Instant) -> Vec<Mapping> {
        self.at(self.by_cik.get(cik), as_of)
    }

    /// The company name in force on `as_of`'s day, per the dated name evidence.
    pub fn name_at(&self, cik: &str, as_of: Instant) -> Option<String> {
        let day = as_of.day();
        self.names_by_cik
            .get(cik)?
            .iter()
            .map(|&i| &self.file.names[i])
            .filter(|n| n.from <= day && day <= n.to)
            .max_by_key(|n| n.from)
            .map(|n| n.name.clone())
    }

    /// Every interval in force at `as_of`, whatever its ticker: what `/v1/mapping` would
    /// answer for each ticker it places then (SQL's `identity_asof`).
    pub fn all_at(&self, as_of: Instant) -> Vec<Mapping> {
        self.at(Some(&(0..self.file.tickers.len()).collect()), as_of)
    }

    fn at(&self, ids: Option<&Vec<usize>>, as_of: Instant) -> Vec<Mapping> {
        let mut v: Vec<Mapping> = ids
            .into_iter()
            .flatten()
            .map(|&i| &self.file.tickers[i])
            .filter(|t| t.valid_from <= as_of && as_of < t.valid_to)
            .map(|t| Mapping {
                ticker: t.ticker.clone(),
                cik: t.cik.clone(),
                name: self.name_at(&t.cik, as_of),
                valid_from: t.valid_from,
                valid_to: t.valid_to,
                evidence: t
                    .evidence
                    .iter()
                    .filter_map(|&e| self.file.evidence.get(e as usize).cloned())
                    .collect(),
            })
            .collect();
        v.sort_by(|a, b| (&a.ticker, &a.cik).cmp(&(&b.ticker, &b.cik)));
        v
    }
}

/// The most characters of a ticker (the contract's bound).
pub const TICKER_MAX_LENGTH: usize = 16;

/// A ticker as written by a caller (`param` names where): 1 to 16 of letters, digits, `.`,
/// `-`; matched case-insensitively, so answered in upper case.
pub fn ticker(s: &str, param: &str) -> Result<String> {
    if s.is_empty()
        || s.len() > TICKER_MAX_LENGTH
        || !s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
    {
        return Err(Error::invalid(
            param,
            format!("ticker must be 1 to 16 letters, digits, '.' or '-'; got {s:?}"),
        ));
    }
    Ok(s.to_ascii_uppercase())
}

/// The identity-hole coverage key of the spec.
pub fn ticker_hole_key(ticker: &str, as_of: Instant) -> String {
    format!("identity.ticker/{ticker}@{}", as_of.day())
}

/// Groups name intervals per CIK and drops exact duplicates (two captures of one history).
pub fn dedup_names(names: Vec<NameInterval>) -> Vec<NameInterval> {
    let mut map: BTreeMap<(String, Day, Day, String), Vec<u32>> = BTreeMap::new();
    for n in names {
        map.entry((n.cik, n.from, n.to, n.name))
            .or_default()
            .extend(n.evidence);
    }
    map.into_iter()
        .map(|((cik, from, to, name), mut evidence)| {
            evidence.sort_unstable();
            evidence.dedup();
            NameInterval {
                cik,
                name,
                from,
                to,
                evidence,
            }
        })
        .collect()
}

/// The observations an identity file was built from: each evidence file with the pairs whose
/// intervals cite it (every observation that showed a pair is cited by exactly one interval of
/// that pair), so `build_intervals(observations_of(f))` gives `f`'s intervals back.
pub fn observations_of(file: &IdentityFile) -> Vec<Observation> {
    let mut out: Vec<Observation> = file
        .evidence
        .iter()
        .map(|e| Observation {
            evidence: e.clone(),
            cik_scope: e.scope.strip_prefix("cik:").map(str::to_owned),
            pairs: BTreeSet::new(),
        })
        .collect();
    for t in &file.tickers {
        for &i in &t.evidence {
            if let Some(o) = out.get_mut(i as usize) {
                o.pairs.insert((t.ticker.clone(), t.cik.clone()));
            }
        }
    }
    out
}

/// A company name interval observed in one evidence file (a submissions capture's
/// `formerNames` and current name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedName {
    pub file: String,
    pub name: NameInterval,
}

/// The identity file after new observations: the old file's observations and the new ones
/// (an evidence file already held, same name and sha256, is not counted twice) rebuilt into
/// intervals with the same knowable-then rules as a build from scratch, and the name intervals
/// of both. Ingesting ticker lists and submissions one after the other gives the identity a
/// single build of all of them gives.
pub fn update(
    held: Option<&IdentityFile>,
    observations: Vec<Observation>,
    names: Vec<ObservedName>,
) -> IdentityFile {
    let mut all = held.map(observations_of).unwrap_or_default();
    for o in observations {
        let known = all
            .iter()
            .any(|h| h.evidence.file == o.evidence.file && h.evidence.sha256 == o.evidence.sha256);
        if !known {
            all.push(o);
        }
    }
    let old_names: Vec<ObservedName> = held
        .map(|f| {
            f.names
                .iter()
                .flat_map(|n| {
                    n.evidence.iter().filter_map(|&i| {
                        f.evidence.get(i as usize).map(|e| ObservedName {
                            file: e.file.clone(),
                            name: NameInterval {
                                evidence: vec![],
                                ..n.clone()
                            },
                        })
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let (evidence, tickers) = build_intervals(all);
    let index_of: BTreeMap<&str, u32> = evidence
        .iter()
        .enumerate()
        .map(|(i, e)| (e.file.as_str(), i as u32))
        .collect();
    let names = dedup_names(
        old_names
            .into_iter()
            .chain(names)
            .map(|o| NameInterval {
                evidence: index_of.get(o.file.as_str()).copied().into_iter().collect(),
                ..o.name
            })
            .collect(),
    );
    IdentityFile {
        format: FORMAT.into(),
        evidence,
        tickers,
        names,
    }
}

/// Reads the identity file `e` names, hash-checked.
pub async fn read_identity(store: &CorpusStore, e: &ObjectEntry) -> Result<IdentityFile> {
    let bytes = crate::read::get_checked(store, &e.path, &e.sha256).await?;
    IdentityFile::from_parquet(&e.path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(file: &str, at: &str, scope: Option<&str>, pairs: &[(&str, &str)]) -> Observation {
        Observation {
            evidence: EvidenceFile {
                file: file.into(),
                sha256: "0".repeat(64),
                observed_at: Instant::parse(at).unwrap(),
                scope: scope.map_or("full".into(), |c| format!("cik:{c}")),
            },
            cik_scope: scope.map(Into::into),
            pairs: pairs
                .iter()
                .map(|(t, c)| ((*t).into(), (*c).into()))
                .collect(),
        }
    }

    fn t(s: &str) -> Instant {
        Instant::parse(s).unwrap()
    }

    #[test]
    fn weekly_observations_form_one_interval_carried_after_the_last() {
        let (_, iv) = build_intervals(vec![
            obs("w2", "2025-12-14T06:00:00Z", None, &[("AAPL", "320193")]),
            obs("w1", "2025-12-07T06:00:00Z", None, &[("AAPL", "320193")]),
        ]);
        assert_eq!(iv.len(), 1);
        assert_eq!(iv[0].valid_from, t("2025-12-07T06:00:00Z"));
        assert_eq!(iv[0].valid_to, t("2025-12-29T06:00:00Z"));
        assert_eq!(iv[0].evidence, vec![0, 1]);
    }

    #[test]
    fn a_ticker_is_never_placed_before_the_first_observation_that_showed_it() {
        let (ev, iv) = build_intervals(vec![obs(
            "w1",
            "2025-12-07T06:00:00Z",
            None,
            &[("NEWCO", "1")],
        )]);
        let idx = IdentityIndex::new(IdentityFile {
            format: FORMAT.into(),
            evidence: ev,
            tickers: iv,
            names: vec![],
        })
        .unwrap();
        assert!(idx.ticker_at("NEWCO", t("2025-12-07T05:59:59Z")).is_empty());
        assert_eq!(idx.ticker_at("NEWCO", t("2025-12-07T06:00:00Z")).len(), 1);
        assert!(
            idx.ticker_at("NEWCO", t("2025-12-22T06:00:00Z")).is_empty(),
            "carried at most 15 days"
        );
        assert_eq!(
            ticker_hole_key("NEWCO", t("2025-12-20T01:00:00Z")),
            "identity.ticker/NEWCO@2025-12-20"
        );
    }

    #[test]
    fn a_contradicting_observation_ends_the_interval_at_its_capture() {
        let (_, iv) = build_intervals(vec![
            obs("w1", "2025-12-07T06:00:00Z", None, &[("OLD", "1")]),
            obs("c1", "2025-12-09T12:00:00Z", Some("1"), &[("NEW", "1")]),
            obs("c2", "2025-12-09T12:00:00Z", Some("2"), &[]),
        ]);
        let old: Vec<_> = iv.iter().filter(|i| i.ticker == "OLD").collect();
        assert_eq!(old.len(), 1);
        assert_eq!(old[0].valid_to, t("2025-12-09T12:00:00Z"));
        let new: Vec<_> = iv.iter().filter(|i| i.ticker == "NEW").collect();
        assert_eq!(new[0].valid_from, t("2025-12-09T12:00:00Z"));
    }

    #[test]
    fn observations_added_one_at_a_time_give_the_identity_of_one_build() {
        let all = vec![
            obs(
                "a.json",
                "2026-01-01T00:00:00Z",
                None,
                &[("AAA", "1"), ("BBB", "2")],
            ),
            obs(
                "b.json",
                "2026-01-08T00:00:00Z",
                None,
                &[("AAA", "1"), ("CCC", "2")],
            ),
            obs(
                "sub.json",
                "2026-01-10T00:00:00Z",
                Some("2"),
                &[("CCC", "2")],
            ),
            obs("c.json", "2026-02-20T00:00:00Z", None, &[("AAA", "3")]),
        ];
        let name = |file: &str, n: &str, from: &str, to: &str| ObservedName {
            file: file.into(),
            name: NameInterval {
                cik: "2".into(),
                name: n.into(),
                from: from.parse().unwrap(),
                to: to.parse().unwrap(),
                evidence: vec![],
            },
        };
        let names = vec![
            name("sub.json", "OLD NAME", "2020-01-01", "2025-12-31"),
            name("sub.json", "NEW NAME", "2026-01-01", "2026-01-10"),
        ];
        let once = update(None, all.clone(), names.clone());
        let mut stepwise: Option<IdentityFile> = None;
        for o in all.clone() {
            let n = if o.evidence.file == "sub.json" {
                names.clone()
            } else {
                vec![]
            };
            stepwise = Some(update(stepwise.as_ref(), vec![o], n));
        }
        assert_eq!(stepwise.as_ref(), Some(&once));
        // The same files again change nothing.
        assert_eq!(update(Some(&once), all, names), once);
        let (ev, tickers) = build_intervals(observations_of(&once));
        assert_eq!((ev, tickers), (once.evidence.clone(), once.tickers.clone()));
    }

    #[test]
    fn identity_files_survive_a_parquet_round_trip() {
        let (evidence, tickers) = build_intervals(vec![obs(
            "w1",
            "2025-12-07T06:00:00Z",
            None,
            &[("AAA", "1"), ("BBB", "2")],
        )]);
        let names = vec![NameInterval {
            cik: "1".into(),
            name: "AAA CORP".into(),
            from: "2020-01-01".parse().unwrap(),
            to: "2025-12-07".parse().unwrap(),
            evidence: vec![0],
        }];
        let f = IdentityFile {
            format: FORMAT.into(),
            evidence,
            tickers,
            names,
        };
        let back =
            IdentityFile::from_parquet("x", bytes::Bytes::from(f.to_parquet().unwrap())).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn the_declared_interval_columns_are_the_encodings_columns_in_order_and_type() {
        let f = IdentityFile {
            format: FORMAT.into(),
            ..IdentityFile::default()
        };
        let bytes = bytes::Bytes::from(f.to_parquet().unwrap());
        let written = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .schema()
            .clone();
        let declared = intervals_schema();
        let shape = |s: &arrow::datatypes::Schema| -> Vec<(String, arrow::datatypes::DataType)> {
            s.fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect()
        };
        assert_eq!(shape(&written), shape(&declared));
    }

    #[test]
    fn a_company_capture_says_nothing_about_other_companies() {
        let (_, iv) = build_intervals(vec![
            obs("w1", "2025-12-07T06:00:00Z", None, &[("AAA", "1")]),
            obs("c2", "2025-12-08T06:00:00Z", Some("2"), &[("BBB", "2")]),
            obs("w2", "2025-12-14T06:00:00Z", None, &[("AAA", "1")]),
        ]);
        let aaa: Vec<_> = iv.iter().filter(|i| i.ticker == "AAA").collect();
        assert_eq!(
            aaa.len(),
            1,
            "the capture of CIK 2 does not split AAA's interval"
        );
    }
}
