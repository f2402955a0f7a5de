//! Workloads shared by the benchmark programs: random by-CIK cuts over a synthetic corpus.
//!
//! A corpus written by `asof bench-corpus` records its spec in the manifest notes; from it the
//! workload knows the filer ranks (rank 1 files the most) and the certified days, and draws
//! queries for big filers (ranks 1–20) and small ones (the lower half of the ranks), with cuts
//! uniform over the certified span after its first year. The same seed gives the same
//! queries, so the engine, HTTP and DuckDB runs measure the same questions.

use asof_engine::model::clock::{Instant, Lane, SourceId, VisibleBy};
use asof_engine::read::corpus::{Corpus, Entity, NewsQuery};
use asof_ingest::corpora::synthetic::{Rng, cik_of};
use serde::Serialize;

/// Which filers a query asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    Big,
    Small,
}

/// One drawn query: a CIK and a cut (and a one-day diff window ending at the cut).
#[derive(Debug, Clone, Serialize)]
pub struct Drawn {
    pub size: Size,
    pub cik: String,
    pub as_of: Instant,
}

impl Drawn {
    /// The first-page as-of query of this draw.
    pub fn cut(&self, limit: usize) -> NewsQuery {
        NewsQuery {
            source: SourceId::SecEdgar,
            lane: Lane::CertifiedPit,
            visible_by: VisibleBy::PublishedAt,
            start: None,
            as_of: self.as_of,
            entity: Entity::Cik(self.cik.clone()),
            after: None,
            limit,
        }
    }
    /// The diff over the day before the cut.
    pub fn diff(&self, limit: usize) -> NewsQuery {
        NewsQuery {
            start: Some(Instant::from_micros(self.as_of.micros() - 86_400_000_000)),
            ..self.cut(limit)
        }
    }
}

/// The number of filers of a bench corpus, read from its manifest notes.
pub fn ciks_of(corpus: &Corpus) -> Option<u32> {
    let note = corpus.manifest().notes.get("sec.edgar")?;
    note.split_whitespace()
        .find_map(|w| w.strip_prefix("ciks="))
        .and_then(|n| n.parse().ok())
}

/// `n` queries of each size, deterministic in `seed`.
pub fn draw(corpus: &Corpus, n: usize, seed: u64) -> Vec<Drawn> {
    let ciks = ciks_of(corpus).expect("a corpus written by `asof bench-corpus`");
    let span = corpus
        .manifest()
        .span(SourceId::SecEdgar, Lane::CertifiedPit)
        .expect("a certified span");
    let first = span.first.start().micros() + 365 * 86_400_000_000;
    let last = span.last.end_of_day().micros();
    let width = (last - first).max(1) as u64;
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(2 * n);
    for size in [Size::Big, Size::Small] {
        for _ in 0..n {
            let rank = match size {
                Size::Big => rng.below(20) as usize,
                Size::Small => (ciks / 2) as usize + rng.below(u64::from(ciks / 2)) as usize,
            };
            let as_of =
                Instant::from_micros(first + rng.below(width / 1_000_000) as i64 * 1_000_000);
            out.push(Drawn {
                size,
                cik: cik_of(rank, ciks),
                as_of,
            });
        }
    }
    out
}

/// Median and 99th percentile of durations in microseconds.
pub fn percentiles(mut us: Vec<f64>) -> (f64, f64) {
    us.sort_by(f64::total_cmp);
    let at = |p: f64| us[((us.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.99))
}
