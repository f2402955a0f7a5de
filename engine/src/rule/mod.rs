//! The as-of rule exported to other engines (Spark, DuckDB, Polars): the tables its inputs
//! are in, derived at publish beside each record table (`tables.rs`: supersessions and
//! coverage per source-lane, listed in the manifest and checked by `asof verify`), and the SQL
//! of a cut over them, unparsed from the one plan of the rule ([`crate::model::cut::Cut::plan`];
//! `sql.rs`). `asof sql --emit-sql`, the Python package's `asof.spark` and `docs/spark.md`
//! are built on these.

pub mod sql;
pub mod tables;

pub use sql::{CutArgs, Dialect, Emitted, EmittedSql, Holds, Names, View, cut_sql, emit_cut};
