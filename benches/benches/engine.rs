//! Criterion benchmarks of the engine's hot paths over a bench corpus.
//!
//! `ASOF_BENCH_CORPUS=DIR cargo bench -p asof-bench --bench engine` (benches/run.sh sets it).
//! Each iteration answers the next of 200 drawn queries, so the estimate is over random CIKs
//! and cuts, not one cached answer; `asof-bench` reports the p50/p99 table.

use std::time::Duration;

use asof_bench::{Size, draw};
use asof_engine::model::coverage::Scope;
use asof_engine::read::corpus::{Answer, Corpus};
use asof_engine::{CorpusStore, Lane, SourceId, VisibleBy};
use criterion::{Criterion, criterion_group, criterion_main};

fn engine(c: &mut Criterion) {
    let dir = std::env::var("ASOF_BENCH_CORPUS")
        .expect("set ASOF_BENCH_CORPUS to a corpus written by `asof bench-corpus`");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let corpus = rt
        .block_on(async { Corpus::open(CorpusStore::open(&dir)?).await })
        .expect("open the bench corpus");
    let queries = draw(&corpus, 200, 7);
    let mut g = c.benchmark_group("engine");
    g.measurement_time(Duration::from_secs(5));
    for size in [Size::Big, Size::Small] {
        let drawn: Vec<_> = queries.iter().filter(|q| q.size == size).collect();
        let name = format!("{size:?}").to_lowercase();
        let mut i = 0;
        g.bench_function(format!("first_page/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % drawn.len();
                rt.block_on(corpus.news(&drawn[i].cut(100), Scope::Corpus))
                    .expect("answer")
            })
        });
        // Positions after the first page of each query, then the page they lead to.
        let later: Vec<_> = drawn
            .iter()
            .filter_map(
                |q| match rt.block_on(corpus.news(&q.cut(100), Scope::Corpus)) {
                    Ok(Answer::Page { next: Some(p), .. }) => {
                        let mut nq = q.cut(100);
                        nq.after = Some(p);
                        Some(nq)
                    }
                    _ => None,
                },
            )
            .collect();
        if !later.is_empty() {
            let mut i = 0;
            g.bench_function(format!("next_page/{name}"), |b| {
                b.iter(|| {
                    i = (i + 1) % later.len();
                    rt.block_on(corpus.news(&later[i], Scope::Corpus))
                        .expect("answer")
                })
            });
        }
        let mut i = 0;
        g.bench_function(format!("diff_one_day/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % drawn.len();
                rt.block_on(corpus.news(&drawn[i].diff(100), Scope::Corpus))
                    .expect("answer")
            })
        });
    }
    let mut i = 0;
    g.bench_function("coverage_decision", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            corpus
                .source_coverage(SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus)
                .cut(VisibleBy::PublishedAt, queries[i].as_of)
        })
    });
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
