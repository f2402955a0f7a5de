//! Cursors: the `asof-cursor` tokens (HMAC-signed, any replica verifies them); their refusals
//! become envelopes through `From<asof_cursor::Error> for ApiError` in `error.rs`.

pub use asof_cursor::{CursorSigner, filter_digest};
