//! `asof-bench`: latency percentiles of the engine's query paths over a bench corpus.
//!
//! Usage: `asof-bench CORPUS [--queries N] [--seed S] [--emit-queries FILE] [--scan N]`
//!
//! Opens the corpus (timed, with resident memory after opening), draws N queries for big and
//! for small filers (see `asof_bench::draw`) and measures, per query: the first page (limit
//! 100) by CIK, the next page through the first page's position, the diff over the day before
//! the cut, and the coverage decision of the cut. `--scan N` also times the first N queries of
//! each size through the DataFusion scan over partitions (the general path). Prints a Markdown
//! table and one JSON line; `--emit-queries` writes the drawn queries as JSONL for the DuckDB
//! and HTTP load runs.

use std::io::Write;
use std::time::Instant as Clock;

use asof_bench::{Drawn, Size, draw, percentiles};
use asof_engine::model::coverage::Scope;
use asof_engine::read::corpus::{Answer, Corpus};
use asof_engine::{CorpusStore, Lane, SourceId, VisibleBy};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Resident and peak resident memory of this process, in MiB (Linux).
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

async fn time_us<F: std::future::Future>(f: F) -> (f64, F::Output) {
    let t = Clock::now();
    let out = f.await;
    (t.elapsed().as_secs_f64() * 1e6, out)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let corpus_dir = args.first().filter(|a| !a.starts_with("--")).ok_or(
        "usage: asof-bench CORPUS [--queries N] [--seed S] [--emit-queries FILE] [--scan N]",
    )?;
    let n: usize = arg(&args, "--queries").map_or(Ok(200), |v| v.parse())?;
    let seed: u64 = arg(&args, "--seed").map_or(Ok(7), |v| v.parse())?;
    let scan_n: usize = arg(&args, "--scan").map_or(Ok(0), |v| v.parse())?;

    let t = Clock::now();
    let corpus = Corpus::open(CorpusStore::open(corpus_dir)?).await?;
    let open_s = t.elapsed().as_secs_f64();
    let (rss_open, _) = rss_mib();
    let rows: u64 = corpus.partitions().iter().map(|p| p.row_count).sum();
    let queries = draw(&corpus, n, seed);

    if let Some(path) = arg(&args, "--emit-queries") {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for q in &queries {
            writeln!(f, "{}", serde_json::to_string(q)?)?;
        }
    }

    // One untimed pass warms the OS cache and the allocator, as a serving process would be.
    for q in queries.iter().take(20) {
        corpus.news(&q.cut(100), Scope::Corpus).await?;
    }

    let mut results = serde_json::Map::new();
    let mut table = Vec::new();
    for size in [Size::Big, Size::Small] {
        let drawn: Vec<&Drawn> = queries.iter().filter(|q| q.size == size).collect();
        let (mut first, mut later, mut diff, mut cov) = (vec![], vec![], vec![], vec![]);
        let (mut holes, mut returned) = (0usize, 0usize);
        for q in &drawn {
            let (us, a) = time_us(corpus.news(&q.cut(100), Scope::Corpus)).await;
            first.push(us);
            match a? {
                Answer::Page { rows, next, .. } => {
                    returned += rows.len();
                    if let Some(pos) = next {
                        let mut nq = q.cut(100);
                        nq.after = Some(pos);
                        let (us, a) = time_us(corpus.news(&nq, Scope::Corpus)).await;
                        a?;
                        later.push(us);
                    }
                }
                Answer::Hole { .. } => holes += 1,
            }
            let (us, a) = time_us(corpus.news(&q.diff(100), Scope::Corpus)).await;
            a?;
            diff.push(us);
            let t = Clock::now();
            let view =
                corpus.source_coverage(SourceId::SecEdgar, Lane::CertifiedPit, Scope::Corpus);
            let c = view.cut(VisibleBy::PublishedAt, q.as_of);
            cov.push(t.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(c);
        }
        let mut scan = vec![];
        if scan_n > 0 {
            let mut s = Corpus::open(corpus.store().clone()).await?;
            s.set_read_path(asof_engine::read::corpus::ReadPath::Scan);
            for q in drawn.iter().take(scan_n) {
                let (us, a) = time_us(s.news(&q.cut(100), Scope::Corpus)).await;
                a?;
                scan.push(us);
            }
        }
        let name = format!("{size:?}").to_lowercase();
        let mut entry = serde_json::Map::new();
        for (label, v) in [
            ("first_page", &first),
            ("next_page", &later),
            ("diff_one_day", &diff),
            ("coverage_decision", &cov),
            ("scan_first_page", &scan),
        ] {
            if v.is_empty() {
                continue;
            }
            let (p50, p99) = percentiles(v.clone());
            entry.insert(
                label.into(),
                serde_json::json!({"n": v.len(), "p50_us": p50, "p99_us": p99}),
            );
            table.push(format!(
                "| {name} | {label} | {} | {:.3} ms | {:.3} ms |",
                v.len(),
                p50 / 1000.0,
                p99 / 1000.0
            ));
        }
        entry.insert("holes".into(), holes.into());
        entry.insert("rows_returned".into(), returned.into());
        results.insert(name, entry.into());
    }
    let (rss, hwm) = rss_mib();
    println!(
        "corpus: {corpus_dir} ({rows} rows in {} partitions, {} access objects)",
        corpus.partitions().len(),
        corpus.manifest().access.len()
    );
    println!(
        "open: {open_s:.2} s; resident after open {rss_open:.0} MiB; now {rss:.0} MiB (peak {hwm:.0} MiB)\n"
    );
    println!("| filers | path | queries | p50 | p99 |\n|---|---|---|---|---|");
    for line in table {
        println!("{line}");
    }
    let summary = serde_json::json!({
        "corpus": corpus_dir, "rows": rows, "partitions": corpus.partitions().len(),
        "open_seconds": open_s, "rss_after_open_mib": rss_open, "rss_mib": rss, "peak_rss_mib": hwm,
        "results": results,
    });
    println!("\n{summary}");
    Ok(())
}
