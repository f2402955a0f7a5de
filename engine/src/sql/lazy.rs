//! A table whose rows are made when a query reads it (the identity object read, the coverage
//! certificates listed), so a session that never names it pays nothing: every `asof sql`
//! process registers every table, and most queries read one.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::MemTable;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use futures::future::BoxFuture;

/// Makes a lazy table's rows (one batch in the table's schema).
pub(crate) type Make = Arc<dyn Fn() -> BoxFuture<'static, Result<RecordBatch>> + Send + Sync>;

/// A table of rows made on first scan (each scan makes them again: a query scans once).
pub(crate) struct Lazy {
    schema: SchemaRef,
    make: Make,
}

impl Lazy {
    pub(crate) fn new(schema: SchemaRef, make: Make) -> Self {
        Lazy { schema, make }
    }
}

impl std::fmt::Debug for Lazy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy")
            .field("schema", &self.schema)
            .finish()
    }
}

#[async_trait]
impl TableProvider for Lazy {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = (self.make)().await?;
        MemTable::try_new(Arc::clone(&self.schema), vec![vec![batch]])?
            .scan(state, projection, filters, limit)
            .await
    }
}
