//! Reading JSON numbers as JSON Schema reads them: `integer` admits `62.0` as well as `62`
//! (a client's JSON library may write either), so the bodies read by hand take both.

use serde_json::Value;

/// A JSON number that is a whole non-negative number, as JSON Schema's `integer` admits it:
/// `62` and `62.0` alike (a client's JSON library may write either), never `62.5` or `-1`.
pub fn whole_number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 9_007_199_254_740_992.0)
            .map(|f| f as u64)
    })
}

/// A JSON number that is a whole number (`created: 1700000000.0` as well as without the
/// fraction), within i64.
pub fn whole_i64(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0)
            .map(|f| f as i64)
    })
}
