//! Read-only SQL for offline analysts: DataFusion over the snapshot's partitions.
//!
//! Tables: `news` (every row of every partition, all revisions, all lanes) and `partitions`
//! (the manifest's partition list). DDL, DML and other statements are refused by DataFusion's
//! `SQLOptions`, so a query can never write or register anything.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::options::ParquetReadOptions;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::SessionContext;

use crate::error::{Error, Result};
use crate::manifest::{Manifest, PartitionEntry};
use crate::store::CorpusStore;

/// Runs `sql` over the version whose `manifest` is given, reading its partitions from `store`.
/// Only the manifest is needed: an `asof sql` process opens no index, identity file or
/// supersession map (the service's load of a version), which at 20M rows took seconds and
/// most of a gigabyte before the first row was read.
pub async fn run_on(
    store: &CorpusStore,
    manifest: &Manifest,
    sql: &str,
) -> Result<Vec<RecordBatch>> {
    let ctx = SessionContext::new();
    ctx.register_object_store(store.url(), store.object_store());
    let schema = crate::record::schema();
    let files: Vec<String> = manifest
        .partitions
        .iter()
        .map(|p| format!("{}{}", store.url(), p.path))
        .collect();
    if files.is_empty() {
        ctx.register_table(
            "news",
            Arc::new(MemTable::try_new(schema.clone(), vec![vec![]])?),
        )?;
    } else {
        let df = ctx
            .read_parquet(files, ParquetReadOptions::default().schema(&schema))
            .await?;
        ctx.register_table("news", df.into_view())?;
    }
    ctx.register_table(
        "partitions",
        Arc::new(partitions_table(&manifest.partitions)?),
    )?;
    let opts = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let df = ctx.sql_with_options(sql, opts).await.map_err(|e| match e {
        datafusion::error::DataFusionError::Plan(m)
            if m.contains("not supported") || m.contains("DDL") || m.contains("DML") =>
        {
            Error::Refused(format!("only read-only queries are allowed: {m}"))
        }
        other => Error::from(other),
    })?;
    Ok(df.collect().await?)
}

fn partitions_table(p: &[PartitionEntry]) -> Result<MemTable> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("source_id", DataType::Utf8, false),
        Field::new("lane", DataType::Utf8, false),
        Field::new("date", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("row_count", DataType::UInt64, false),
        Field::new("sha256", DataType::Utf8, false),
    ]));
    let s = |f: &dyn Fn(&PartitionEntry) -> String| -> ArrayRef {
        Arc::new(StringArray::from(p.iter().map(f).collect::<Vec<_>>()))
    };
    let cols: Vec<ArrayRef> = vec![
        s(&|e| e.source_id.to_string()),
        s(&|e| e.lane.to_string()),
        s(&|e| e.date.to_string()),
        s(&|e| e.path.clone()),
        Arc::new(UInt64Array::from(
            p.iter().map(|e| e.row_count).collect::<Vec<_>>(),
        )),
        s(&|e| e.sha256.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols)?;
    Ok(MemTable::try_new(schema, vec![vec![batch]])?)
}
