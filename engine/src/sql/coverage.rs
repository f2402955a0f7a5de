//! Coverage in SQL: the `coverage` table (every certificate of every source and lane, as the
//! version stands) and `coverage_asof(as_of)` (each as known at an instant), row for row what
//! `/v1/coverage` pages, made by the one rule of `crate::model::coverage::certificate_of`.
//!
//! With `news_asof`, a hole fails the query; these let an analyst see the holes themselves:
//! `SELECT key FROM coverage WHERE status = 'missing'`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::error::Result;
use futures::FutureExt;

use super::functions::only_instant;
use super::lazy::{Lazy, Make};
use crate::model::clock::{Instant, Lane};
use crate::model::coverage::{Certificate, DayTable, certificate_keys, certificate_of};
use crate::model::manifest::Manifest;

/// The columns of `coverage` and `coverage_asof`.
pub(crate) fn schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("key", false),
        s("source_id", false),
        s("lane", false),
        s("date", false),
        s("status", false),
        Field::new("row_count", DataType::UInt64, true),
        Field::new("rows_held", DataType::UInt64, false),
        Field::new(
            "certified_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        s("partition_path", true),
        s("evidence", false),
    ]))
}

/// Every certificate of every source and lane, as known at `as_of` (the version as it stands
/// when `None`), in `/v1/coverage`'s order within each lane.
pub(crate) fn certificates(manifest: &Manifest, as_of: Option<Instant>) -> Vec<Certificate> {
    let parts: HashMap<_, _> = manifest
        .partitions
        .iter()
        .map(|p| ((p.source_id, p.lane, p.date), p))
        .collect();
    let mut tables = HashMap::new();
    let mut out = Vec::new();
    let held = manifest.held_sources();
    for &lane in Lane::ALL {
        for key in certificate_keys(manifest, &held, None, lane, None, as_of) {
            let table = tables
                .entry((key.0, key.1))
                .or_insert_with(|| DayTable::build(manifest, key.0, key.1));
            out.push(certificate_of(
                manifest,
                table.as_ref(),
                key,
                parts.get(&key).copied(),
                as_of,
            ));
        }
    }
    out
}

fn batch(certs: &[Certificate]) -> Result<RecordBatch> {
    let s = |f: &dyn Fn(&Certificate) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from(certs.iter().map(f).collect::<Vec<_>>()))
    };
    let columns: Vec<ArrayRef> = vec![
        s(&|c| Some(c.key.clone())),
        s(&|c| Some(c.source_id.to_string())),
        s(&|c| Some(c.lane.to_string())),
        s(&|c| Some(c.date.to_string())),
        s(&|c| Some(c.status.to_owned())),
        Arc::new(UInt64Array::from(
            certs.iter().map(|c| c.row_count).collect::<Vec<_>>(),
        )),
        Arc::new(UInt64Array::from(
            certs.iter().map(|c| c.rows_held).collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(
                certs
                    .iter()
                    .map(|c| c.certified_at.map(Instant::micros))
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        ),
        s(&|c| c.partition.as_ref().map(|p| p.path.clone())),
        s(&|c| Some(serde_json::to_string(&c.evidence).unwrap_or_else(|_| "[]".into()))),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// A table of the certificates as known at `as_of`, listed when a query reads it.
pub(crate) fn table(manifest: Arc<Manifest>, as_of: Option<Instant>) -> Lazy {
    let make: Make = Arc::new(move || {
        let manifest = Arc::clone(&manifest);
        async move { batch(&certificates(&manifest, as_of)) }.boxed()
    });
    Lazy::new(schema(), make)
}

/// `coverage_asof(as_of)`: the certificates as the corpus knew them at `as_of` (a day
/// certified later reads `missing`; days after `as_of`'s are not listed), as `/v1/coverage`
/// answers with `as_of`.
#[derive(Debug)]
pub(crate) struct CoverageAsOf(pub(crate) Arc<Manifest>);

impl TableFunctionImpl for CoverageAsOf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let as_of = only_instant(&args, "coverage_asof")?;
        Ok(Arc::new(table(Arc::clone(&self.0), Some(as_of))))
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;

    use crate::model::clock::{Instant, Lane, SourceId};
    use crate::read::corpus::{Corpus, CoverageQuery};
    use crate::testkit::{cert, corpus, edgar, t};

    /// Each certificate as one line, from SQL.
    async fn from_sql(c: &Corpus, table: &str) -> Vec<String> {
        let sql = format!(
            "SELECT key || '|' || lane || '|' || status || '|' || \
             coalesce(CAST(row_count AS VARCHAR), 'null') || '|' || CAST(rows_held AS VARCHAR) \
             || '|' || coalesce(CAST(CAST(certified_at AS BIGINT) AS VARCHAR), 'null') || '|' \
             || coalesce(partition_path, 'null') || '|' || evidence FROM {table}"
        );
        let mut out = Vec::new();
        for b in crate::sql::run_on(c.store(), c.manifest(), &sql)
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

    /// The same lines from the API's listing, every lane, all pages at once.
    fn from_api(c: &Corpus, as_of: Option<Instant>) -> Vec<String> {
        let mut out = Vec::new();
        for &lane in Lane::ALL {
            let (certs, next) = c
                .coverage(&CoverageQuery {
                    source: None,
                    date: None,
                    lane,
                    as_of,
                    after: None,
                    limit: 100_000,
                })
                .unwrap();
            assert!(next.is_none());
            out.extend(certs.iter().map(|c| {
                format!(
                    "{}|{}|{}|{}|{}|{}|{}|{}",
                    c.key,
                    c.lane,
                    c.status,
                    c.row_count.map_or("null".into(), |n| n.to_string()),
                    c.rows_held,
                    c.certified_at
                        .map_or("null".into(), |i| i.micros().to_string()),
                    c.partition.as_ref().map_or("null", |p| p.path.as_str()),
                    serde_json::to_string(&c.evidence).unwrap()
                )
            }));
        }
        out.sort();
        out
    }

    /// `coverage` and `coverage_asof` list what `/v1/coverage` lists: a certified empty day
    /// with 0, a hole with null, a day certified after the cut as missing, both lanes.
    #[tokio::test]
    async fn coverage_tables_list_the_certificates_the_api_lists_holes_and_later_certifications_too()
     {
        let mut forward = edgar(
            "0000000001-26-000002",
            "2",
            Some("2026-01-06T10:00:00Z"),
            "2026-01-07T00:00:00Z",
        );
        forward.lane = Lane::ForwardFirstSeen;
        forward.available_at = Some(t("2026-01-06T10:01:00Z"));
        forward.availability_basis = crate::model::clock::AvailabilityBasis::LocalFirstSeen;
        let rows = vec![
            edgar(
                "0000000001-26-000001",
                "1",
                Some("2026-01-05T09:00:00Z"),
                "2026-01-06T00:00:00Z",
            ),
            // A row on the hole's day: held, never counted.
            edgar(
                "0000000001-26-000003",
                "3",
                Some("2026-01-06T11:00:00Z"),
                "2026-01-07T00:00:00Z",
            ),
            forward,
        ];
        let mut late = cert(
            Lane::CertifiedPit,
            "2026-01-09",
            "2026-01-09",
            "2026-02-01T00:00:00Z",
        );
        late.evidence = vec![crate::model::manifest::Evidence {
            file: "raw/edgar/2026-01-09.idx".into(),
            sha256: "ab".repeat(32),
        }];
        let (_d, _s, c) = corpus(
            rows,
            vec![
                cert(
                    Lane::CertifiedPit,
                    "2026-01-04",
                    "2026-01-05",
                    "2026-01-06T00:00:00Z",
                ),
                cert(
                    Lane::CertifiedPit,
                    "2026-01-07",
                    "2026-01-08",
                    "2026-01-09T00:00:00Z",
                ),
                late,
                cert(
                    Lane::ForwardFirstSeen,
                    "2026-01-06",
                    "2026-01-06",
                    "2026-01-07T00:00:00Z",
                ),
            ],
        )
        .await;
        let latest = from_sql(&c, "coverage").await;
        assert_eq!(latest, from_api(&c, None));
        assert!(
            latest
                .iter()
                .any(|l| l.starts_with("sec.edgar/2026-01-06|certified_pit|missing|null|1|")),
            "the hole holds a row but no count: {latest:?}"
        );
        for at in [
            "2026-01-05T12:00:00Z",
            "2026-01-08T12:00:00Z",
            "2026-01-20T00:00:00Z",
            "2026-03-01T00:00:00Z",
        ] {
            let sql = from_sql(&c, &format!("coverage_asof('{at}')")).await;
            assert_eq!(sql, from_api(&c, Some(t(at))), "as of {at}");
            assert!(!sql.is_empty());
        }
        let before = from_sql(&c, "coverage_asof('2026-01-20T00:00:00Z')").await;
        assert!(
            before
                .iter()
                .any(|l| l.starts_with("sec.edgar/2026-01-09|certified_pit|missing|null|")),
            "certified on Feb 1: missing on Jan 20: {before:?}"
        );
        assert_eq!(SourceId::SecEdgar.to_string(), "sec.edgar");
    }

    #[tokio::test]
    async fn coverage_asof_refuses_what_is_not_an_instant_with_its_usage() {
        let (_d, _s, c) = corpus(vec![], vec![]).await;
        for (sql, says) in [
            ("SELECT * FROM coverage_asof()", "0 arguments"),
            ("SELECT * FROM coverage_asof('2026-01-05')", "as_of"),
            ("SELECT * FROM coverage_asof(5)", "as_of"),
        ] {
            let err = crate::sql::run_on(c.store(), c.manifest(), sql)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(says) && err.contains("usage:"), "{sql}: {err}");
        }
    }
}
