//! Identity in SQL: `identity` (every interval placing a ticker on a CIK, with the
//! observations that showed it), `identity_names` (company names over whole days) and
//! `identity_asof(as_of)` (the intervals in force at an instant, each with the name then:
//! what `/v1/mapping/ticker/{ticker}` answers for every ticker at once, by the same
//! `IdentityIndex`). The version's identity object is read, and hash-checked, only when a
//! query names one of them.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::{DataFusionError, Result};
use futures::FutureExt;
use tokio::sync::OnceCell;

use super::functions::only_instant;
use super::lazy::{Lazy, Make};
use crate::model::clock::Instant;
use crate::model::identity::{EvidenceFile, IdentityFile, IdentityIndex, Mapping};
use crate::model::manifest::ObjectEntry;
use crate::store::CorpusStore;

/// The version's identity object, read once per process when first needed.
#[derive(Debug)]
pub(crate) struct Source {
    store: CorpusStore,
    entry: Option<ObjectEntry>,
    index: OnceCell<Arc<IdentityIndex>>,
}

impl Source {
    pub(crate) fn new(store: CorpusStore, entry: Option<ObjectEntry>) -> Arc<Self> {
        Arc::new(Source {
            store,
            entry,
            index: OnceCell::new(),
        })
    }

    async fn index(&self) -> Result<Arc<IdentityIndex>> {
        self.index
            .get_or_try_init(|| async {
                let file = match &self.entry {
                    Some(e) => crate::format::identity::read_identity(&self.store, e).await,
                    None => Ok(IdentityFile::default()),
                };
                file.and_then(IdentityIndex::new)
                    .map(Arc::new)
                    .map_err(|e| DataFusionError::External(Box::new(e)))
            })
            .await
            .cloned()
    }
}

fn ts(n: &str, null: bool) -> Field {
    Field::new(
        n,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        null,
    )
}

fn text(n: &str, null: bool) -> Field {
    Field::new(n, DataType::Utf8, null)
}

fn strings(values: impl Iterator<Item = Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(values.collect::<Vec<_>>()))
}

fn instants(values: impl Iterator<Item = Instant>) -> ArrayRef {
    Arc::new(
        TimestampMicrosecondArray::from(values.map(Instant::micros).collect::<Vec<_>>())
            .with_timezone("UTC"),
    )
}

/// The evidence files of an interval, as JSON text (as `payload` is in `news`).
fn evidence_json<'a>(files: impl Iterator<Item = &'a EvidenceFile>) -> String {
    serde_json::to_string(&files.collect::<Vec<_>>()).unwrap_or_else(|_| "[]".into())
}

fn evidence_of<'a>(
    file: &'a IdentityFile,
    idx: &'a [u32],
) -> impl Iterator<Item = &'a EvidenceFile> {
    idx.iter().filter_map(|&i| file.evidence.get(i as usize))
}

/// A table of the identity object's rows: `columns` reads them from the loaded index.
fn from_index(
    source: Arc<Source>,
    fields: Vec<Field>,
    columns: impl Fn(&IdentityIndex) -> Vec<ArrayRef> + Send + Sync + 'static,
) -> Lazy {
    let schema = Arc::new(Schema::new(fields));
    let out = Arc::clone(&schema);
    let columns = Arc::new(columns);
    let make: Make = Arc::new(move || {
        let (source, schema, columns) =
            (Arc::clone(&source), Arc::clone(&out), Arc::clone(&columns));
        async move {
            let index = source.index().await?;
            Ok(RecordBatch::try_new(schema, columns(&index))?)
        }
        .boxed()
    });
    Lazy::new(schema, make)
}

/// `identity`: one row per ticker interval, `[valid_from, valid_to)`.
fn intervals(source: Arc<Source>) -> Lazy {
    let fields = vec![
        text("ticker", false),
        text("cik", false),
        ts("valid_from", false),
        ts("valid_to", false),
        text("evidence", false),
    ];
    from_index(source, fields, |index| {
        let f = index.file();
        let t = &f.tickers;
        vec![
            strings(t.iter().map(|t| Some(t.ticker.clone()))),
            strings(t.iter().map(|t| Some(t.cik.clone()))),
            instants(t.iter().map(|t| t.valid_from)),
            instants(t.iter().map(|t| t.valid_to)),
            strings(
                t.iter()
                    .map(|t| Some(evidence_json(evidence_of(f, &t.evidence)))),
            ),
        ]
    })
}

/// `identity_names`: one row per company name, over the whole days `[first_day, last_day]`.
fn names(source: Arc<Source>) -> Lazy {
    let fields = vec![
        text("cik", false),
        text("name", false),
        text("first_day", false),
        text("last_day", false),
        text("evidence", false),
    ];
    from_index(source, fields, |index| {
        let f = index.file();
        let n = &f.names;
        vec![
            strings(n.iter().map(|n| Some(n.cik.clone()))),
            strings(n.iter().map(|n| Some(n.name.clone()))),
            strings(n.iter().map(|n| Some(n.from.to_string()))),
            strings(n.iter().map(|n| Some(n.to.to_string()))),
            strings(
                n.iter()
                    .map(|n| Some(evidence_json(evidence_of(f, &n.evidence)))),
            ),
        ]
    })
}

/// The mappings in force at `as_of`, as `/v1/mapping` answers them.
fn at(source: Arc<Source>, as_of: Instant) -> Lazy {
    let fields = vec![
        text("ticker", false),
        text("cik", false),
        text("name", true),
        ts("valid_from", false),
        ts("valid_to", false),
        text("evidence", false),
    ];
    from_index(source, fields, move |index| {
        let m: Vec<Mapping> = index.all_at(as_of);
        vec![
            strings(m.iter().map(|m| Some(m.ticker.clone()))),
            strings(m.iter().map(|m| Some(m.cik.clone()))),
            strings(m.iter().map(|m| m.name.clone())),
            instants(m.iter().map(|m| m.valid_from)),
            instants(m.iter().map(|m| m.valid_to)),
            strings(m.iter().map(|m| Some(evidence_json(m.evidence.iter())))),
        ]
    })
}

/// `identity_asof(as_of)`.
#[derive(Debug)]
pub(crate) struct IdentityAsOf(pub(crate) Arc<Source>);

impl TableFunctionImpl for IdentityAsOf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let as_of = only_instant(&args, "identity_asof")?;
        Ok(Arc::new(at(Arc::clone(&self.0), as_of)))
    }
}

/// The identity tables, by name.
pub(crate) fn tables(source: &Arc<Source>) -> [(&'static str, Lazy); 2] {
    [
        ("identity", intervals(Arc::clone(source))),
        ("identity_names", names(Arc::clone(source))),
    ]
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;

    use crate::model::identity::{
        EvidenceFile, FORMAT, IdentityFile, NameInterval, TickerInterval,
    };
    use crate::read::corpus::Corpus;
    use crate::store::CorpusStore;
    use crate::testkit::{day, t};
    use crate::write::publish::{ChangeSet, publish};

    fn interval(
        ticker: &str,
        cik: &str,
        from: &str,
        to: &str,
        evidence: Vec<u32>,
    ) -> TickerInterval {
        TickerInterval {
            ticker: ticker.into(),
            cik: cik.into(),
            valid_from: t(from),
            valid_to: t(to),
            evidence,
        }
    }

    /// A corpus whose identity has a ticker that moves from one CIK to another, one shared by
    /// two CIKs for a while, and a company renamed.
    async fn with_identity() -> (tempfile::TempDir, Corpus) {
        let dir = tempfile::tempdir().unwrap();
        let store = CorpusStore::local(dir.path()).unwrap();
        let evidence = |n: u32| EvidenceFile {
            file: format!("raw/sec/company_tickers-{n}.json"),
            sha256: format!("{n:064}"),
            observed_at: t("2026-01-01T00:00:00Z"),
            scope: "full".into(),
        };
        let file = IdentityFile {
            format: FORMAT.into(),
            evidence: vec![evidence(1), evidence(2)],
            tickers: vec![
                interval(
                    "AAA",
                    "1",
                    "2026-01-01T00:00:00Z",
                    "2026-01-10T00:00:00Z",
                    vec![0],
                ),
                interval(
                    "AAA",
                    "2",
                    "2026-01-10T00:00:00Z",
                    "2026-02-01T00:00:00Z",
                    vec![1],
                ),
                interval(
                    "BBB",
                    "3",
                    "2026-01-05T00:00:00Z",
                    "2026-01-20T00:00:00Z",
                    vec![0, 1],
                ),
                interval(
                    "BBB",
                    "4",
                    "2026-01-15T00:00:00Z",
                    "2026-01-25T00:00:00Z",
                    vec![1],
                ),
            ],
            names: vec![
                NameInterval {
                    cik: "1".into(),
                    name: "Old Name Inc".into(),
                    from: day("2025-01-01"),
                    to: day("2026-01-04"),
                    evidence: vec![0],
                },
                NameInterval {
                    cik: "1".into(),
                    name: "New Name Inc".into(),
                    from: day("2026-01-05"),
                    to: day("2026-12-31"),
                    evidence: vec![1],
                },
            ],
        };
        publish(
            &store,
            ChangeSet {
                identity: Some(file),
                ..Default::default()
            },
            t("2026-03-01T00:00:00Z"),
        )
        .await
        .unwrap();
        (dir, Corpus::open(store).await.unwrap())
    }

    async fn lines(c: &Corpus, sql: &str) -> Vec<String> {
        let mut out = Vec::new();
        for b in crate::sql::run_on(c.store(), c.manifest(), sql)
            .await
            .unwrap()
        {
            // Concatenations come back as string views: read any string column as text.
            let col = b.column(0);
            out.extend(
                (0..col.len())
                    .map(|i| arrow::util::display::array_value_to_string(col, i).unwrap()),
            );
        }
        out.sort();
        out
    }

    /// `identity_asof` gives, for every ticker at once, the intervals `/v1/mapping/ticker`
    /// answers at that instant (names and evidence included); `identity` and
    /// `identity_names` hold every interval.
    #[tokio::test]
    async fn identity_asof_answers_what_the_mapping_route_answers_for_every_ticker() {
        let (_d, c) = with_identity().await;
        for at in [
            "2025-12-31T23:59:59Z",
            "2026-01-03T00:00:00Z",
            "2026-01-10T00:00:00Z",
            "2026-01-16T12:00:00Z",
            "2026-01-24T00:00:00Z",
            "2026-03-01T00:00:00Z",
        ] {
            let sql = lines(
                &c,
                &format!(
                    "SELECT ticker || '|' || cik || '|' || coalesce(name, 'null') || '|' || \
                     CAST(CAST(valid_from AS BIGINT) AS VARCHAR) || '|' || \
                     CAST(CAST(valid_to AS BIGINT) AS VARCHAR) || '|' || evidence \
                     FROM identity_asof('{at}')"
                ),
            )
            .await;
            let mut api = Vec::new();
            for ticker in ["AAA", "BBB"] {
                for m in c.mapping_ticker(ticker, t(at)).unwrap_or_default() {
                    api.push(format!(
                        "{}|{}|{}|{}|{}|{}",
                        m.ticker,
                        m.cik,
                        m.name.as_deref().unwrap_or("null"),
                        m.valid_from.micros(),
                        m.valid_to.micros(),
                        serde_json::to_string(&m.evidence).unwrap()
                    ));
                }
            }
            api.sort();
            assert_eq!(sql, api, "as of {at}");
        }
        // Both CIKs while BBB is shared; the renamed company under its name of the day.
        let shared = lines(
            &c,
            "SELECT cik FROM identity_asof('2026-01-16T12:00:00Z') WHERE ticker = 'BBB'",
        )
        .await;
        assert_eq!(shared, ["3", "4"]);
        let named = lines(
            &c,
            "SELECT name FROM identity_asof('2026-01-03T00:00:00Z') WHERE ticker = 'AAA'",
        )
        .await;
        assert_eq!(named, ["Old Name Inc"]);
        assert_eq!(
            lines(&c, "SELECT CAST(count(*) AS VARCHAR) FROM identity").await,
            ["4"]
        );
        assert_eq!(
            lines(
                &c,
                "SELECT first_day || '..' || last_day || ' ' || name FROM identity_names"
            )
            .await,
            [
                "2025-01-01..2026-01-04 Old Name Inc",
                "2026-01-05..2026-12-31 New Name Inc"
            ]
        );
    }

    /// A corpus without an identity object has empty identity tables, not an error.
    #[tokio::test]
    async fn a_corpus_without_identity_has_empty_identity_tables() {
        let (_d, _s, c) = crate::testkit::corpus(vec![], vec![]).await;
        assert_eq!(
            lines(
                &c,
                "SELECT CAST(count(*) AS VARCHAR) FROM identity_asof('2026-01-01T00:00:00Z')"
            )
            .await,
            ["0"]
        );
        assert_eq!(
            lines(&c, "SELECT ticker FROM identity").await,
            Vec::<String>::new()
        );
    }
}
