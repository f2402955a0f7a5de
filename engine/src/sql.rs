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

use crate::corpus::Corpus;
use crate::error::{Error, Result};

pub async fn run(corpus: &Corpus, sql: &str) -> Result<Vec<RecordBatch>> {
    let ctx = SessionContext::new();
    ctx.register_object_store(corpus.store().url(), corpus.store().object_store());
    let schema = corpus.arc_schema();
    let files = corpus.partition_urls(|_| true);
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
    ctx.register_table("partitions", Arc::new(partitions_table(corpus)?))?;
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

fn partitions_table(corpus: &Corpus) -> Result<MemTable> {
    let p = corpus.partitions();
    let schema = Arc::new(Schema::new(vec![
        Field::new("source_id", DataType::Utf8, false),
        Field::new("lane", DataType::Utf8, false),
        Field::new("date", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("row_count", DataType::UInt64, false),
        Field::new("sha256", DataType::Utf8, false),
    ]));
    let s = |f: &dyn Fn(&crate::manifest::PartitionEntry) -> String| -> ArrayRef {
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
