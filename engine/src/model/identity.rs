//! Identity as of an instant: which CIK a ticker named, and which tickers and name a CIK had.
//!
//! Intervals are built from dated observations (full ticker-list snapshots and per-company
//! submissions captures) with *knowable-then* semantics: at an instant, a ticker is placed on a
//! CIK only if the latest relevant observation at or before that instant showed the pair and is
//! at most [`MAX_CARRY_DAYS`] old. A later observation never reaches back in time. A ticker is
//! never resolved through a current list.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant};

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

/// The stored identity object (canonical JSON, hash-checked through the manifest).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityFile {
    pub format: String,
    pub evidence: Vec<EvidenceFile>,
    pub tickers: Vec<TickerInterval>,
    pub names: Vec<NameInterval>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::identity::intervals_schema;

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
