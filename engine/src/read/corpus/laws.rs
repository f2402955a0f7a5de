//! Property tests of the laws every as-of answer obeys, over generated corpora published
//! through the real publish path: a cut never shows a row whose clock is after `as_of`; a cut
//! holds exactly what a direct reading of the as-of rule over every revision gives; a diff is
//! the later cut minus the earlier one; walking keyset pages gives one large page; and the
//! three readings (the access index with the walk beside it, the walk alone, the DataFusion
//! scan) answer alike, page for page.
//!
//! Each case publishes a corpus (base rows, then up to two rounds of corrections), so cases
//! are few by default; `ASOF_LAW_CASES=500 cargo test -p asof-engine laws` runs a long search.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{Answer, Corpus, Entity, NewsQuery, ReadPath};
use crate::model::clock::{Instant, Lane, SourceId, VisibleBy};
use crate::model::coverage::Scope;
use crate::model::record::NewsRow;
use crate::store::CorpusStore;
use crate::testkit::{cert, edgar, t};
use crate::write::publish::{ChangeSet, publish};

/// One generated record: its company, first publication and commit, and corrections.
#[derive(Debug, Clone)]
struct Gen {
    cik: u8,
    /// Minutes after 2026-01-01T00:00Z; `None`: no publication instant.
    published: Option<i64>,
    /// Minutes from publication (or from the start) to the commit.
    commit_delay: i64,
    /// Each correction: minutes after the previous revision's commit, and a publication shift.
    corrections: Vec<(i64, i64)>,
    /// A forward-lane row (first seen by the poller: `available_at` set) instead of certified.
    forward: bool,
}

const START: &str = "2026-01-01T00:00:00Z";
/// The certified span ends here: every cut lies inside it.
const SPAN_MINUTES: i64 = 58 * 24 * 60;

fn minute(m: i64) -> Instant {
    Instant::from_micros(t(START).micros() + m * 60_000_000)
}

fn gen_record() -> impl Strategy<Value = Gen> {
    (
        1u8..=4,
        prop::option::weighted(0.9, 0i64..40 * 24 * 60),
        0i64..3 * 24 * 60,
        prop::collection::vec((1i64..5 * 24 * 60, -120i64..120), 0..=2),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(cik, published, commit_delay, corrections, forward)| Gen {
            cik,
            published,
            commit_delay,
            corrections,
            forward,
        })
}

/// Every revision of every record: (round, row), round 0 the first publication.
fn revisions(gens: &[Gen]) -> Vec<(usize, NewsRow)> {
    let mut out = Vec::new();
    for (i, g) in gens.iter().enumerate() {
        let accession = format!("0000000001-26-{i:06}");
        let mut published = g.published;
        let mut committed = g.published.unwrap_or(0) + g.commit_delay;
        for round in 0..=g.corrections.len() {
            if round > 0 {
                let (after, shift) = g.corrections[round - 1];
                committed += after;
                published = published.map(|p| (p + shift).max(0));
            }
            let mut row = edgar(&accession, &g.cik.to_string(), None, "2026-01-01T00:00:00Z");
            row.published_at = published.map(minute);
            row.acceptance_at = row.published_at;
            row.committed_at = Some(minute(committed));
            if g.forward {
                // First seen between publication and the first commit, whatever the revision.
                row.lane = Lane::ForwardFirstSeen;
                row.available_at = Some(minute(g.published.unwrap_or(0) + g.commit_delay / 2));
                row.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
            }
            row.title = format!("rev{round}");
            out.push((round, row));
        }
    }
    out
}

/// The as-of rule read directly off the revisions: (id, title) of what a cut holds.
fn expected(all: &[(usize, NewsRow)], q: &NewsQuery) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let ids: BTreeSet<&str> = all.iter().map(|(_, r)| r.id.as_str()).collect();
    for id in ids {
        let revs: Vec<&NewsRow> = all
            .iter()
            .filter(|(_, r)| r.id == id)
            .map(|(_, r)| r)
            .collect();
        let in_force = match q.visible_by {
            // The corpus's history: the last revision committed at or before the cut.
            VisibleBy::CommittedAt => revs
                .iter()
                .rev()
                .find(|r| r.committed_at.is_some_and(|c| c <= q.as_of)),
            // Best knowledge: the latest revision, whenever it was committed.
            _ => revs.last(),
        };
        let Some(r) = in_force else { continue };
        if r.lane != q.lane {
            continue;
        }
        let entity_ok = match &q.entity {
            Entity::Cik(c) => r.cik.as_deref() == Some(c.as_str()),
            _ => true,
        };
        let seen = r
            .clock(q.visible_by)
            .is_some_and(|c| c <= q.as_of && q.start.is_none_or(|s| c > s));
        if entity_ok && seen {
            out.insert((r.id.clone(), r.title.clone()));
        }
    }
    out
}

/// The corpus read three ways: the default (index and walk), the walk alone, the scan.
struct Readings {
    indexed: Corpus,
    walked: Corpus,
    scanned: Corpus,
}

async fn build(gens: &[Gen]) -> (tempfile::TempDir, Readings, Vec<(usize, NewsRow)>) {
    let dir = tempfile::tempdir().unwrap();
    let store = CorpusStore::local(dir.path()).unwrap();
    let all = revisions(gens);
    let rounds = all.iter().map(|(r, _)| *r).max().unwrap_or(0);
    for round in 0..=rounds {
        let rows: Vec<NewsRow> = all
            .iter()
            .filter(|(r, _)| *r == round)
            .map(|(_, row)| row.clone())
            .collect();
        let certifications = if round == 0 {
            [Lane::CertifiedPit, Lane::ForwardFirstSeen]
                .map(|lane| cert(lane, "2026-01-01", "2026-02-27", "2026-01-01T00:00:00Z"))
                .to_vec()
        } else {
            vec![]
        };
        publish(
            &store,
            ChangeSet {
                rows,
                certifications,
                ..Default::default()
            },
            minute(SPAN_MINUTES + 24 * 60 * (round as i64 + 1)),
        )
        .await
        .unwrap();
    }
    let indexed = Corpus::open(store.clone()).await.unwrap();
    let mut walked = Corpus::open(store.clone()).await.unwrap();
    walked.set_read_path(ReadPath::Walk);
    let mut scanned = Corpus::open(store).await.unwrap();
    scanned.set_read_path(ReadPath::Scan);
    let readings = Readings {
        indexed,
        walked,
        scanned,
    };
    (dir, readings, all)
}

fn page(a: Answer<NewsRow>) -> (Vec<NewsRow>, Option<super::Position>) {
    match a {
        Answer::Page { rows, next, .. } => (rows, next),
        Answer::Hole { coverage } => {
            panic!("a cut inside the certified span is a hole: {coverage:?}")
        }
    }
}

fn keys(rows: &[NewsRow]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| (r.id.clone(), r.title.clone()))
        .collect()
}

/// Walks keyset pages of `page_size` rows to the end.
async fn walk_pages(c: &Corpus, q: &NewsQuery, page_size: usize) -> Vec<(String, String)> {
    let mut walked = Vec::new();
    let mut p = q.clone();
    p.limit = page_size;
    loop {
        let (rows, next) = page(c.news(&p, Scope::Corpus).await.unwrap());
        assert!(rows.len() <= page_size);
        walked.extend(keys(&rows));
        match next {
            Some(n) => p.after = Some(n),
            None => break,
        }
    }
    walked
}

async fn check(gens: Vec<Gen>, cuts: Vec<(i64, i64)>, page_size: usize) {
    let (_dir, readings, all) = build(&gens).await;
    let Readings {
        indexed,
        walked,
        scanned,
    } = &readings;
    for (a, b) in cuts {
        let (a, b) = (minute(a.min(b)), minute(a.max(b)));
        // Every clock a lane can answer (certified rows carry no `available_at`: a cut on it
        // is an availability hole there).
        for (lane, clock) in [
            (Lane::CertifiedPit, VisibleBy::PublishedAt),
            (Lane::CertifiedPit, VisibleBy::CommittedAt),
            (Lane::ForwardFirstSeen, VisibleBy::PublishedAt),
            (Lane::ForwardFirstSeen, VisibleBy::AvailableAt),
            (Lane::ForwardFirstSeen, VisibleBy::CommittedAt),
        ] {
            let entities =
                std::iter::once(Entity::All).chain((1..=4).map(|c: u8| Entity::Cik(c.to_string())));
            for entity in entities {
                let q = |as_of: Instant, start: Option<Instant>| NewsQuery {
                    source: SourceId::SecEdgar,
                    lane,
                    visible_by: clock,
                    start,
                    as_of,
                    entity: entity.clone(),
                    after: None,
                    limit: 1000,
                };
                let cut_b = page(indexed.news(&q(b, None), Scope::Corpus).await.unwrap()).0;
                let cut_a = page(indexed.news(&q(a, None), Scope::Corpus).await.unwrap()).0;
                // Never a row whose clock is after the cut.
                for r in &cut_b {
                    assert!(
                        r.clock(clock).is_some_and(|c| c <= b),
                        "{} ({}) at {b} on {clock:?}",
                        r.id,
                        r.title
                    );
                }
                // Exactly the as-of rule.
                let got: BTreeSet<(String, String)> = keys(&cut_b).into_iter().collect();
                assert_eq!(
                    got,
                    expected(&all, &q(b, None)),
                    "cut at {b} on {clock:?} {lane:?} {entity:?}"
                );
                assert_eq!(got.len(), cut_b.len(), "a record twice in one cut");
                // The three readings agree, row for row and in order.
                let scan_b = page(scanned.news(&q(b, None), Scope::Corpus).await.unwrap()).0;
                assert_eq!(
                    keys(&scan_b),
                    keys(&cut_b),
                    "index vs scan at {b} {entity:?}"
                );
                let walk_b = page(walked.news(&q(b, None), Scope::Corpus).await.unwrap()).0;
                assert_eq!(
                    keys(&walk_b),
                    keys(&cut_b),
                    "walk vs index at {b} on {clock:?} {entity:?}"
                );
                let walk_diff = page(walked.news(&q(b, Some(a)), Scope::Corpus).await.unwrap()).0;
                let scan_diff = page(scanned.news(&q(b, Some(a)), Scope::Corpus).await.unwrap()).0;
                assert_eq!(
                    keys(&walk_diff),
                    keys(&scan_diff),
                    "walk vs scan, diff ({a}, {b}] on {clock:?} {entity:?}"
                );
                // A diff is the later cut minus the earlier.
                let diff = page(indexed.news(&q(b, Some(a)), Scope::Corpus).await.unwrap()).0;
                let before: BTreeSet<(String, String)> = keys(&cut_a).into_iter().collect();
                let minus: Vec<(String, String)> = keys(&cut_b)
                    .into_iter()
                    .filter(|k| !before.contains(k))
                    .collect();
                assert_eq!(
                    keys(&diff),
                    minus,
                    "diff ({a}, {b}] on {clock:?} {entity:?}"
                );
                // Pages of any size walk to the one large page, on every reading, for cuts
                // and windows.
                for (name, c) in [("index", indexed), ("walk", walked), ("scan", scanned)] {
                    assert_eq!(
                        walk_pages(c, &q(b, None), page_size).await,
                        keys(&cut_b),
                        "{name}: pages of {page_size} at {b} on {clock:?} {entity:?}"
                    );
                }
                assert_eq!(
                    walk_pages(walked, &q(b, Some(a)), page_size).await,
                    keys(&diff),
                    "walk: diff pages of {page_size} ({a}, {b}] on {clock:?} {entity:?}"
                );
            }
        }
    }
}

fn cases() -> u32 {
    std::env::var("ASOF_LAW_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_cut_diff_and_page_walk_obeys_the_as_of_rule(
        gens in prop::collection::vec(gen_record(), 1..40),
        cuts in prop::collection::vec((0i64..SPAN_MINUTES, 0i64..SPAN_MINUTES), 1..4),
        page_size in 1usize..7,
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(check(gens, cuts, page_size));
    }
}
