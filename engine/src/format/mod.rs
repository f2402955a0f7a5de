//! Every stored object's layout, as bytes: the partitions' Parquet settings and the derived
//! objects a version lists beside them (access files, late rows, id runs, list states, rule
//! tables, the identity object, Delta logs): what each holds, where it lives, and its
//! encoding and decoding. The write side derives their contents at publish, the read side
//! loads them; both meet here, so a layout is stated once.

pub mod access;
pub mod delta;
pub mod identity;
pub mod ids;
pub mod late;
pub mod lists;
pub mod partition;
pub mod rule;
