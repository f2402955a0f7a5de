//! The as-of model: instants and the closed vocabularies, the record, the cut (the as-of rule,
//! written once), the manifest of a version, coverage and identity. Pure values and rules: no
//! module here reads or writes the store, except the identity object's own small reader.

pub mod clock;
pub mod coverage;
pub mod cut;
pub mod identity;
pub mod manifest;
pub mod record;
