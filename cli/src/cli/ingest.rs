//! `asof ingest`: one source's files published as a new corpus version.

use std::path::PathBuf;
use std::process::ExitCode;

use asof_answer::params::enum_param;
use asof_engine::{CorpusStore, Instant, Lane, SourceId};
use clap::Args;

use super::query::flag_error;
use super::{CliResult, disk_full};

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The corpus to publish into: a directory (created when missing) or an object-store URL.
    #[arg(long, env = "ASOF_INGEST_CORPUS")]
    pub corpus: String,
    /// Source namespace of the files (sec.edgar, us.federal_register.pi, us.cftc.cot,
    /// us.ofac.sdn, us.fda.enforcement.drug|device|food, gleif.lei).
    #[arg(long, env = "ASOF_INGEST_SOURCE")]
    pub source: String,
    /// certified_pit (default) or forward_first_seen (the EDGAR current-filings feed).
    #[arg(long, env = "ASOF_INGEST_LANE", default_value = "certified_pit")]
    pub lane: String,
    /// committed_at of the rows added (RFC 3339 UTC with Z; default: now). The same inputs and
    /// commit time give the same corpus_version.
    #[arg(long = "commit-time", env = "ASOF_INGEST_COMMIT_TIME")]
    pub commit_time: Option<String>,
    /// When the files were captured, for sources whose files do not say (list snapshots,
    /// cumulative files); default: the commit time (gleif.lei: none, its files say; a golden
    /// copy named otherwise than GLEIF names it needs this).
    #[arg(long = "captured-at", env = "ASOF_INGEST_CAPTURED_AT")]
    pub captured_at: Option<String>,
    /// Source-days stated complete: YYYY-MM-DD..YYYY-MM-DD (inclusive) or one day, on top of
    /// the whole days the files imply (a daily index's day, a full list's capture day); `none`:
    /// no day at all, not even those (the rows are held, their days stay holes).
    #[arg(long, env = "ASOF_INGEST_CERTIFY")]
    pub certify: Option<String>,
    /// Leave out rows whose day is before this one (YYYY-MM-DD), and certify no day before it.
    #[arg(long, env = "ASOF_INGEST_SINCE")]
    pub since: Option<String>,
    /// Take only the files' identity observations (SEC ticker lists, submissions captures):
    /// no rows, no list change rows, no certification.
    #[arg(long = "identity-only", env = "ASOF_INGEST_IDENTITY_ONLY")]
    pub identity_only: bool,
    /// The source's note in the manifest, shown by `/v1/meta` (what the corpus holds of it).
    #[arg(long, env = "ASOF_INGEST_NOTE")]
    pub note: Option<String>,
    /// A JSON file with the corpus's public sample set (`source_id`, `lane`, `days`,
    /// `examples`), which anonymous callers may query; replaces the one held.
    #[arg(long = "sample-set", env = "ASOF_INGEST_SAMPLE_SET")]
    pub sample_set: Option<PathBuf>,
    /// The files to ingest.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub(crate) async fn ingest(a: IngestArgs) -> CliResult {
    use asof_ingest::pipeline::{self, Request, Step};
    let source: SourceId =
        enum_param("--source", &a.source, SourceId::valid_set).map_err(flag_error)?;
    let lane: Lane = enum_param("--lane", &a.lane, Lane::valid_set).map_err(flag_error)?;
    let commit_time = match &a.commit_time {
        Some(t) => Instant::parse_param("commit-time", t)?,
        None => Instant::now(),
    };
    let captured_at = match &a.captured_at {
        Some(t) => Some(Instant::parse_param("captured-at", t)?),
        // GLEIF's files carry their publish instant (API responses in `meta`, golden copies
        // in their name): a default here would contradict a golden copy's name.
        None if source == SourceId::GleifLei => None,
        None => Some(commit_time),
    };
    let no_implied_certification = a.certify.as_deref() == Some("none");
    let certify = a
        .certify
        .as_deref()
        .filter(|c| *c != "none")
        .map(pipeline::parse_day_range)
        .transpose()?;
    let since = a
        .since
        .as_deref()
        .map(|d| {
            d.parse::<asof_engine::model::clock::Day>()
                .map_err(|()| format!("--since {d:?}: expected one day, YYYY-MM-DD"))
        })
        .transpose()?;
    let sample = match &a.sample_set {
        Some(path) => {
            let bytes =
                std::fs::read(path).map_err(|e| format!("--sample-set {}: {e}", path.display()))?;
            Some(
                serde_json::from_slice::<asof_engine::model::manifest::SampleSet>(&bytes)
                    .map_err(|e| format!("--sample-set {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    if a.note.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err("--note: give the text of the note (it replaces the source's note)".into());
    }
    if !a.corpus.contains("://") {
        std::fs::create_dir_all(&a.corpus)?;
    }
    let store = CorpusStore::open(&a.corpus)?;
    // Every file is checked to be readable before any is parsed (a missing file fails fast);
    // adapters read them as they parse (a golden copy as a stream, never whole).
    let files = pipeline::read_files(&a.files)?;
    let total_bytes: u64 = a
        .files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let req = Request {
        source,
        lane,
        commit_time,
        captured_at,
        certify,
        files,
        options: pipeline::Options {
            since,
            no_implied_certification,
            identity_only: a.identity_only,
            note: a.note,
            sample,
        },
    };
    let progress = |s: Step| match s {
        Step::Parsed(0, total) => bar.set_message(format!(
            "parsing {total} files ({})",
            indicatif::HumanBytes(total_bytes)
        )),
        Step::Parsed(done, total) => bar.set_message(format!("parsed {done}/{total} files")),
        Step::Comparing => bar.set_message("comparing with the current version"),
        Step::Publishing => bar.set_message("publishing partitions, access files and manifest"),
    };
    let before = store.current_version().await.ok().flatten();
    let outcome = pipeline::ingest(&store, req, &progress).await;
    bar.finish_and_clear();
    let outcome = match outcome {
        Err(e) if disk_full(&e) => {
            return Err(format!(
                "the disk holding the corpus ({}) is full: nothing was published, and {} stays current; free space and run the same command again (the objects already written are reused)",
                store.display(),
                before.as_deref().unwrap_or("no version")
            )
            .into());
        }
        r => r?,
    };
    let p = &outcome.published;
    if p.changed {
        eprintln!(
            "published {} new rows ({} unchanged){}{}{}",
            p.rows_added,
            p.rows_unchanged,
            if outcome.observations == 0 {
                String::new()
            } else {
                format!(
                    "; identity: {} new observation(s) folded into the ticker intervals",
                    outcome.observations
                )
            },
            if outcome.changes.is_empty() {
                String::new()
            } else {
                format!(
                    "; list changes: {}",
                    outcome
                        .changes
                        .iter()
                        .map(|(k, n)| format!("{n} {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            if outcome.certified.is_empty() {
                String::new()
            } else {
                format!(
                    "; certified {}",
                    outcome
                        .certified
                        .iter()
                        .map(|(a, b)| if a == b {
                            a.to_string()
                        } else {
                            format!("{a}..{b}")
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    } else {
        eprintln!(
            "nothing new ({} rows already held): no version written",
            p.rows_unchanged
        );
    }
    println!("{}", p.version);
    Ok(ExitCode::SUCCESS)
}
