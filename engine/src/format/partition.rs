//! The partition as bytes: the Parquet writer settings every partition shares, whose page
//! size is also the block the ordered walk reads by (`crate::read::corpus`'s walk), so the
//! reader's assumption and the writer's setting are one constant.

use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

/// Low-cardinality columns: the only ones written with dictionaries (unique columns read
/// slower with them and grow the files).
pub const DICTIONARY_COLUMNS: [&str; 6] = [
    "source_id",
    "lane",
    "form",
    "availability_basis",
    "cik",
    "entity_id",
];

/// Turns dictionaries on for [`DICTIONARY_COLUMNS`] only.
fn with_dictionaries(
    b: parquet::file::properties::WriterPropertiesBuilder,
) -> parquet::file::properties::WriterPropertiesBuilder {
    DICTIONARY_COLUMNS
        .iter()
        .fold(b.set_dictionary_enabled(false), |b, c| {
            b.set_column_dictionary_enabled(ColumnPath::from(*c), true)
        })
}

/// Rows of a partition's data pages: every page of every column holds [`PAGE_ROWS`] rows from
/// a multiple of it (the last page of a row group fewer), so a block of the ordered walk
/// (`corpus/walk.rs`, the same size) is one page of each column read and decompressed, and
/// the page index (each page's clock range) tells which blocks a cut needs before any is read.
pub const PAGE_ROWS: usize = 1024;

/// Parquet writer settings shared by partitions: snappy, statistics per page, the offset index,
/// pages of [`PAGE_ROWS`] rows, and dictionaries only on low-cardinality columns (unique
/// columns read slower with them).
///
/// Why pages are cut by rows alone: the writer decides a page boundary after each mini-batch of
/// `write_batch_size` values, and closes a page at `data_page_row_count_limit` rows or at the
/// byte limit, whichever comes first. Both counts are [`PAGE_ROWS`] and the byte limit is far
/// above what 1,024 rows of any column hold, so pages start at multiples of [`PAGE_ROWS`] (row
/// groups close between batches of [`PARTITION_BATCH`], a multiple of it).
pub fn writer_properties() -> WriterProperties {
    with_dictionaries(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_write_batch_size(PAGE_ROWS)
            .set_data_page_row_count_limit(PAGE_ROWS)
            .set_data_page_size_limit(64 << 20)
            .set_created_by("asof".into()),
    )
    .build()
}
