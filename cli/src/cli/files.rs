//! `asof files`: a corpus's Parquet partitions as files, for analysts working offline. Lists
//! them (JSON, CSV or a table) and downloads them (`asof files download --out DIR`), checking
//! every file's sha256 against the manifest before it is kept.
//!
//! It reads the corpus directly (a directory or an object-store URL), as `asof query` does;
//! the HTTP service hands out the same files as signed URLs (`/v1/files`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use asof_engine::{Corpus, Day, FileEntry, FilesQuery, SourceId};
use clap::{Args, Subcommand};
use futures::StreamExt;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::flags::{CorpusArg, Format};
use super::{CliResult, open};

#[derive(Debug, Args)]
pub struct FilesArgs {
    #[command(subcommand)]
    pub command: Option<FilesCommand>,
    #[command(flatten)]
    pub select: Select,
    /// Output of the listing.
    #[arg(long, value_enum, default_value = "json", global = true)]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum FilesCommand {
    /// Download the selected files into a directory, verifying each one's sha256; files
    /// already there with the right hash are kept. Writes `files.json` (the listing) beside
    /// them.
    Download(DownloadArgs),
}

/// Which files: flags accepted before or after `download`.
#[derive(Debug, Args)]
pub struct Select {
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// Only this source (e.g. sec.edgar).
    #[arg(long, global = true)]
    pub source: Option<String>,
    /// Only UTC days on or after this one (YYYY-MM-DD).
    #[arg(long, global = true)]
    pub from: Option<String>,
    /// Only UTC days on or before this one (YYYY-MM-DD).
    #[arg(long, global = true)]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct DownloadArgs {
    /// Directory to write into (created if missing); each file lands at
    /// `<source_id>/<lane>/<date>/<sha256>.parquet` under it.
    #[arg(long)]
    pub out: PathBuf,
}

/// One file as listed offline: the API's file object without a signed URL (the corpus is
/// read directly), with the object path.
#[derive(Debug, Serialize)]
struct FileRow {
    id: String,
    source_id: String,
    lane: String,
    date: String,
    row_count: u64,
    bytes: u64,
    sha256: String,
    certified: bool,
    certified_row_count: Option<u64>,
    coverage_key: String,
    format: &'static str,
    path: String,
    corpus_version: String,
}

#[derive(Debug, Serialize)]
struct Listing<'a> {
    corpus_version: &'a str,
    count: usize,
    results: &'a [FileRow],
}

fn row(corpus: &Corpus, e: &FileEntry) -> FileRow {
    FileRow {
        id: e.id.clone(),
        source_id: e.source_id.to_string(),
        lane: e.lane.to_string(),
        date: e.date.to_string(),
        row_count: e.row_count,
        bytes: e.bytes,
        sha256: e.sha256.clone(),
        certified: e.certified_row_count.is_some(),
        certified_row_count: e.certified_row_count,
        coverage_key: e.coverage_key.clone(),
        format: "parquet",
        path: e.path.clone(),
        corpus_version: corpus.version().to_owned(),
    }
}

fn day(flag: &str, v: Option<&str>) -> Result<Option<Day>, asof_engine::Error> {
    v.map(|s| {
        s.parse::<Day>().map_err(|()| {
            asof_engine::Error::invalid(flag, format!("{s:?} is not a YYYY-MM-DD day"))
        })
    })
    .transpose()
}

fn query_of(s: &Select, corpus: &Corpus) -> Result<FilesQuery, asof_engine::Error> {
    let source = s
        .source
        .as_deref()
        .map(|v| {
            let held = corpus.manifest().held_sources();
            v.parse::<SourceId>()
                .ok()
                .filter(|s| held.contains(s))
                .ok_or_else(|| {
                    let names: Vec<&str> = held.iter().map(|s| s.as_str()).collect();
                    asof_engine::Error::invalid(
                        "--source",
                        format!(
                            "{v:?} is not held by this corpus; held: {}",
                            names.join(", ")
                        ),
                    )
                })
        })
        .transpose()?;
    let (from, to) = (
        day("--from", s.from.as_deref())?,
        day("--to", s.to.as_deref())?,
    );
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return Err(asof_engine::Error::invalid(
            "--from",
            "--from must be on or before --to",
        ));
    }
    Ok(FilesQuery {
        source,
        from,
        to,
        ..FilesQuery::all()
    })
}

pub async fn files(a: FilesArgs) -> CliResult {
    let corpus = open(&a.select.corpus.corpus).await?;
    let q = query_of(&a.select, &corpus)?;
    let (entries, _) = corpus.files(&q);
    let rows: Vec<FileRow> = entries.iter().map(|e| row(&corpus, e)).collect();
    match a.command {
        None => list(&corpus, &rows, a.format),
        Some(FilesCommand::Download(d)) => download(&corpus, &entries, &rows, &d.out).await,
    }
}

fn list(corpus: &Corpus, rows: &[FileRow], format: Format) -> CliResult {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            let listing = Listing {
                corpus_version: corpus.version(),
                count: rows.len(),
                results: rows,
            };
            serde_json::to_writer_pretty(&mut out, &listing)?;
            writeln!(out)?;
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut out);
            for r in rows {
                w.serialize(r)?;
            }
            w.flush()?;
        }
        Format::Table => {
            writeln!(out, "corpus_version {}", corpus.version())?;
            for r in rows {
                writeln!(
                    out,
                    "{}  {:<26} {:<18} {:>8} rows {:>10} bytes  {:<9} {}",
                    r.date,
                    r.source_id,
                    r.lane,
                    r.row_count,
                    r.bytes,
                    if r.certified { "certified" } else { "partial" },
                    &r.id[..16]
                )?;
            }
            writeln!(out, "{} file(s)", rows.len())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where a file lands under `out`.
fn target(out: &Path, e: &FileEntry) -> PathBuf {
    out.join(e.source_id.as_str())
        .join(e.lane.as_str())
        .join(e.date.to_string())
        .join(format!("{}.parquet", e.sha256))
}

/// The sha256 of a file on disk, if it exists.
fn hash_of(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let mut h = Sha256::new();
            std::io::copy(&mut f, &mut h)?;
            Ok(Some(hex::encode(h.finalize())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

async fn download(
    corpus: &Corpus,
    entries: &[FileEntry],
    rows: &[FileRow],
    out: &Path,
) -> CliResult {
    std::fs::create_dir_all(out)?;
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let (mut fetched, mut kept) = (0usize, 0usize);
    for e in entries {
        let dst = target(out, e);
        bar.set_message(format!("{} {}", e.source_id, e.date));
        if hash_of(&dst)?.as_deref() == Some(e.sha256.as_str()) {
            kept += 1;
            bar.inc(e.bytes);
            continue;
        }
        std::fs::create_dir_all(dst.parent().expect("a file path has a parent"))?;
        // Written beside its place and renamed only once its hash is right: an interrupted or
        // corrupt download never leaves a file that looks complete.
        let part = dst.with_extension("parquet.part");
        let mut f = tokio::fs::File::create(&part).await?;
        let mut h = Sha256::new();
        let mut stream = corpus.store().get_range(&e.path, None).await?.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(asof_engine::Error::from)?;
            h.update(&chunk);
            f.write_all(&chunk).await?;
            bar.inc(chunk.len() as u64);
        }
        f.flush().await?;
        drop(f);
        let got = hex::encode(h.finalize());
        if got != e.sha256 {
            let _ = std::fs::remove_file(&part);
            bar.abandon();
            return Err(asof_engine::Error::integrity(
                &e.path,
                format!(
                    "sha256 is {got}, the manifest says {}; nothing was kept",
                    e.sha256
                ),
            )
            .into());
        }
        std::fs::rename(&part, &dst)?;
        fetched += 1;
    }
    bar.finish_and_clear();
    let listing = Listing {
        corpus_version: corpus.version(),
        count: rows.len(),
        results: rows,
    };
    std::fs::write(out.join("files.json"), serde_json::to_vec_pretty(&listing)?)?;
    eprintln!(
        "{} file(s) verified in {} ({fetched} downloaded, {kept} already there), corpus_version {}",
        entries.len(),
        out.display(),
        corpus.version()
    );
    Ok(ExitCode::SUCCESS)
}
