//! The identity object as bytes: the intervals of [`IdentityFile`] as a Parquet table (one row
//! per interval, the evidence in the footer), which is also the identity intervals' Delta
//! table, and its hash-checked reading.

use crate::error::{Error, Result};
use crate::model::clock::{Day, Instant};
use crate::model::identity::{EvidenceFile, IdentityFile, NameInterval, TickerInterval};
use crate::model::manifest::ObjectEntry;
use crate::store::CorpusStore;

/// The columns of the identity object's Parquet encoding ([`IdentityFile::to_parquet`]), for
/// readers that need them before reading a file (its Delta table's schema). Every column is
/// declared nullable: the encoding marks a column required only when no row leaves it empty.
pub fn intervals_schema() -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    let s = |n: &str| Field::new(n, DataType::Utf8, true);
    let d = |n: &str| Field::new(n, DataType::Int32, true);
    let t = |n: &str| Field::new(n, crate::model::record::ts_type(), true);
    std::sync::Arc::new(Schema::new(vec![
        s("kind"),
        s("ticker"),
        s("cik"),
        s("name"),
        t("valid_from"),
        t("valid_to"),
        d("from_day"),
        d("to_day"),
        s("evidence"),
    ]))
}

impl IdentityFile {
    /// Encodes as Parquet: one row per interval (`kind` = `ticker` or `name`), the evidence
    /// table as JSON in the file's key-value metadata (`asof.identity.evidence`).
    pub fn to_parquet(&self) -> Result<Vec<u8>> {
        use arrow::array::{
            ArrayRef, Int32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
        };
        use parquet::arrow::ArrowWriter;
        use parquet::file::metadata::KeyValue;
        use std::sync::Arc;
        let n = self.tickers.len() + self.names.len();
        let mut kind = Vec::with_capacity(n);
        let (mut ticker, mut cik, mut name) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut from, mut to, mut from_day, mut to_day, mut ev) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let join = |e: &[u32]| e.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for t in &self.tickers {
            kind.push("ticker");
            ticker.push(Some(t.ticker.clone()));
            cik.push(t.cik.clone());
            name.push(None);
            from.push(Some(t.valid_from.micros()));
            to.push(Some(t.valid_to.micros()));
            from_day.push(None);
            to_day.push(None);
            ev.push(join(&t.evidence));
        }
        for nm in &self.names {
            kind.push("name");
            ticker.push(None);
            cik.push(nm.cik.clone());
            name.push(Some(nm.name.clone()));
            from.push(None);
            to.push(None);
            from_day.push(Some(nm.from.days()));
            to_day.push(Some(nm.to.days()));
            ev.push(join(&nm.evidence));
        }
        let ts = |v: Vec<Option<i64>>| -> ArrayRef {
            Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC"))
        };
        let batch = RecordBatch::try_from_iter(vec![
            ("kind", Arc::new(StringArray::from(kind)) as ArrayRef),
            ("ticker", Arc::new(StringArray::from(ticker)) as ArrayRef),
            ("cik", Arc::new(StringArray::from(cik)) as ArrayRef),
            ("name", Arc::new(StringArray::from(name)) as ArrayRef),
            ("valid_from", ts(from)),
            ("valid_to", ts(to)),
            ("from_day", Arc::new(Int32Array::from(from_day)) as ArrayRef),
            ("to_day", Arc::new(Int32Array::from(to_day)) as ArrayRef),
            ("evidence", Arc::new(StringArray::from(ev)) as ArrayRef),
        ])?;
        let meta = vec![
            KeyValue::new("asof.identity.format".into(), self.format.clone()),
            KeyValue::new(
                "asof.identity.evidence".into(),
                serde_json::to_string(&self.evidence)?,
            ),
        ];
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .set_created_by("asof".into())
            .set_key_value_metadata(Some(meta))
            .build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
        w.write(&batch)?;
        w.close()?;
        Ok(buf)
    }

    pub fn from_parquet(path: &str, bytes: bytes::Bytes) -> Result<Self> {
        use arrow::array::{Array, Int32Array, StringArray, TimestampMicrosecondArray};
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let bad = |d: &str| Error::integrity(path, d.to_owned());
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| bad(&format!("not parquet: {e}")))?;
        let meta = builder.metadata().clone();
        let get = crate::store::objects::footer_value(&meta);
        let format = get("asof.identity.format").ok_or_else(|| bad("no identity format"))?;
        let evidence: Vec<EvidenceFile> = serde_json::from_str(
            &get("asof.identity.evidence").ok_or_else(|| bad("no evidence table"))?,
        )?;
        let mut file = IdentityFile {
            format,
            evidence,
            tickers: vec![],
            names: vec![],
        };
        for batch in builder.build()? {
            let b = batch?;
            let s = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
                    .ok_or_else(|| bad(n))
            };
            let t = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| {
                        c.as_any()
                            .downcast_ref::<TimestampMicrosecondArray>()
                            .cloned()
                    })
                    .ok_or_else(|| bad(n))
            };
            let d = |n: &str| {
                b.column_by_name(n)
                    .and_then(|c| c.as_any().downcast_ref::<Int32Array>().cloned())
                    .ok_or_else(|| bad(n))
            };
            let (kind, ticker, cik, name, ev) = (
                s("kind")?,
                s("ticker")?,
                s("cik")?,
                s("name")?,
                s("evidence")?,
            );
            let (from, to, from_day, to_day) = (
                t("valid_from")?,
                t("valid_to")?,
                d("from_day")?,
                d("to_day")?,
            );
            for i in 0..b.num_rows() {
                let evidence: Vec<u32> = ev
                    .value(i)
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().map_err(|_| bad("evidence index")))
                    .collect::<Result<_>>()?;
                match kind.value(i) {
                    "ticker" if !ticker.is_null(i) && !from.is_null(i) && !to.is_null(i) => {
                        file.tickers.push(TickerInterval {
                            ticker: ticker.value(i).to_owned(),
                            cik: cik.value(i).to_owned(),
                            valid_from: Instant::from_micros(from.value(i)),
                            valid_to: Instant::from_micros(to.value(i)),
                            evidence,
                        })
                    }
                    "name" if !name.is_null(i) && !from_day.is_null(i) && !to_day.is_null(i) => {
                        file.names.push(NameInterval {
                            cik: cik.value(i).to_owned(),
                            name: name.value(i).to_owned(),
                            from: Day::from_days(from_day.value(i)),
                            to: Day::from_days(to_day.value(i)),
                            evidence,
                        })
                    }
                    other => return Err(bad(&format!("row {i}: bad interval of kind {other:?}"))),
                }
            }
        }
        Ok(file)
    }
}

/// Reads the identity file `e` names, hash-checked.
pub async fn read_identity(store: &CorpusStore, e: &ObjectEntry) -> Result<IdentityFile> {
    let bytes = crate::store::objects::get_checked(store, &e.path, &e.sha256).await?;
    IdentityFile::from_parquet(&e.path, bytes)
}
