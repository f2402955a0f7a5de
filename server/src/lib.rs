//! asof server library: the response envelope now; the HTTP router lands with the API issue.

pub mod envelope;
