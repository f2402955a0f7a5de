//! `asof verify`: re-hash every object of a version against its manifest.

use crate::error::{Error, Result};
use crate::read::{decode_parquet, get_checked};
use crate::store::CorpusStore;

/// What a successful verification checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub version: String,
    pub partitions: usize,
    pub rows: u64,
    pub other_objects: usize,
}

/// Checks the pointer's manifest hash, then every partition's sha256 and row count, then every
/// identity and access object. Stops at the first fault, naming the object.
pub async fn verify(store: &CorpusStore, version: Option<&str>) -> Result<Verified> {
    let version = match version {
        Some(v) => v.to_owned(),
        None => store
            .current_version()
            .await?
            .ok_or_else(|| Error::NoCorpus(store.display().to_owned()))?,
    };
    let m = store.manifest(&version).await?;
    let mut out = Verified {
        version,
        ..Default::default()
    };
    for p in &m.partitions {
        let bytes = get_checked(store, &p.path, &p.sha256).await?;
        if bytes.len() as u64 != p.bytes {
            return Err(Error::integrity(
                &p.path,
                format!("{} bytes, manifest says {}", bytes.len(), p.bytes),
            ));
        }
        let rows = decode_parquet(&p.path, bytes)?.len() as u64;
        if rows != p.row_count {
            return Err(Error::integrity(
                &p.path,
                format!("{rows} rows, manifest says {}", p.row_count),
            ));
        }
        out.partitions += 1;
        out.rows += rows;
    }
    for o in m.identity.iter().chain(m.access.iter()) {
        get_checked(store, &o.path, &o.sha256).await?;
        out.other_objects += 1;
    }
    Ok(out)
}
