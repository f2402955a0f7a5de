//! Query-string parsing with the service's common rules: only declared parameters, each at most
//! once; typed values refused with `invalid_request` (or `invalid_clock`) naming the parameter.

use std::collections::BTreeMap;

use asof_engine::{Day, Entity, Instant, Lane, SourceId, VisibleBy, normalize_cik};

use crate::error::ApiError;

#[derive(Debug, Default)]
pub struct Params {
    map: BTreeMap<String, String>,
}

pub const MAX_LIMIT: usize = 1000;
pub const DEFAULT_LIMIT: usize = 100;

impl Params {
    /// Parses `raw` (the query string, percent-encoded) against the route's declared names.
    pub fn parse(raw: Option<&str>, declared: &[&str]) -> Result<Self, ApiError> {
        let mut map = BTreeMap::new();
        for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            if !declared.contains(&k.as_ref()) {
                let valid = if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                };
                return Err(ApiError::invalid(
                    k.as_ref(),
                    format!("undeclared query parameter {k:?}; this route takes: {valid}"),
                ));
            }
            if map.insert(k.to_string(), v.into_owned()).is_some() {
                return Err(ApiError::invalid(
                    k.as_ref(),
                    format!("query parameter {k:?} was sent more than once"),
                ));
            }
        }
        Ok(Params { map })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// A clock parameter per the spec's pattern; `None` when absent.
    pub fn clock(&self, name: &str) -> Result<Option<Instant>, ApiError> {
        self.get(name)
            .map(|s| Instant::parse_param(name, s).map_err(ApiError::from))
            .transpose()
    }

    pub fn required_clock(&self, name: &str) -> Result<Instant, ApiError> {
        self.clock(name)?.ok_or_else(|| {
            ApiError::invalid(
                name,
                format!(
                    "{name} is required (RFC 3339 UTC with a literal Z, e.g. 2026-01-29T12:00:00Z)"
                ),
            )
        })
    }

    pub fn visible_by(&self) -> Result<VisibleBy, ApiError> {
        enum_param(self.get("visible_by"), "visible_by", VisibleBy::valid_set)
    }

    pub fn lane(&self) -> Result<Lane, ApiError> {
        enum_param(self.get("lane"), "lane", Lane::valid_set)
    }

    /// `source`, which must be one the corpus holds; `None` when absent.
    pub fn source(&self, held: &[SourceId]) -> Result<Option<SourceId>, ApiError> {
        let Some(s) = self.get("source") else {
            return Ok(None);
        };
        let held_list = || {
            held.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match s.parse::<SourceId>() {
            Ok(id) if held.contains(&id) => Ok(Some(id)),
            Ok(_) => Err(ApiError::invalid(
                "source",
                format!(
                    "source {s:?} is not held by this deployment; held sources: {}",
                    held_list()
                ),
            )),
            Err(()) => Err(ApiError::invalid(
                "source",
                format!("unknown source {s:?}; valid sources: {}", held_list()),
            )),
        }
    }

    pub fn limit(&self) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(DEFAULT_LIMIT),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
                _ => Err(ApiError::invalid(
                    "limit",
                    format!("limit must be an integer from 1 to {MAX_LIMIT}, got {s:?}"),
                )),
            },
        }
    }

    /// A UTC day parameter (`YYYY-MM-DD`) named `name`; `None` when absent.
    pub fn day(&self, name: &str) -> Result<Option<Day>, ApiError> {
        self.get(name)
            .map(|s| {
                s.parse::<Day>().map_err(|()| {
                    ApiError::invalid(
                        name,
                        format!("{name} must be a UTC day YYYY-MM-DD, got {s:?}"),
                    )
                })
            })
            .transpose()
    }

    /// `ticker` or `cik` (at most one); neither means every row of the selected source.
    pub fn entity(&self) -> Result<Entity, ApiError> {
        match (self.get("ticker"), self.get("cik")) {
            (Some(_), Some(_)) => Err(ApiError::invalid("cik", "send ticker or cik, not both")),
            (Some(t), None) => Ok(Entity::Ticker(ticker(t, "ticker")?)),
            (None, Some(c)) => Ok(Entity::Cik(cik(c, "cik")?)),
            (None, None) => Ok(Entity::All),
        }
    }
}

fn enum_param<T: std::str::FromStr + Default>(
    v: Option<&str>,
    name: &str,
    valid: fn() -> String,
) -> Result<T, ApiError> {
    match v {
        None => Ok(T::default()),
        Some(s) => s.parse().map_err(|_| {
            ApiError::invalid(
                name,
                format!("{name} must be one of: {}; got {s:?}", valid()),
            )
        }),
    }
}

/// A ticker: 1 to 16 of letters, digits, `.`, `-`; matched case-insensitively (stored upper).
pub fn ticker(s: &str, param: &str) -> Result<String, ApiError> {
    if s.is_empty()
        || s.len() > 16
        || !s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
    {
        return Err(ApiError::invalid(
            param,
            format!("ticker must be 1 to 16 letters, digits, '.' or '-'; got {s:?}"),
        ));
    }
    Ok(s.to_ascii_uppercase())
}

/// A CIK with or without leading zeros.
pub fn cik(s: &str, param: &str) -> Result<String, ApiError> {
    normalize_cik(s).ok_or_else(|| {
        ApiError::invalid(
            param,
            format!("cik must be 1 to 10 digits (leading zeros allowed), not all zero; got {s:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_and_repeated_parameters_are_refused_by_name() {
        let e = Params::parse(Some("as_of=x&colour=red"), &["as_of"]).unwrap_err();
        assert_eq!(e.param().as_deref(), Some("colour"));
        let e = Params::parse(Some("as_of=a&as_of=b"), &["as_of"]).unwrap_err();
        assert_eq!(e.param().as_deref(), Some("as_of"));
    }

    #[test]
    fn limit_outside_one_to_a_thousand_is_refused_not_clamped() {
        for bad in ["0", "1001", "-1", "ten", ""] {
            let p = Params::parse(Some(&format!("limit={bad}")), &["limit"]).unwrap();
            assert_eq!(
                p.limit().unwrap_err().param().as_deref(),
                Some("limit"),
                "{bad}"
            );
        }
        assert_eq!(
            Params::parse(Some("limit=1000"), &["limit"])
                .unwrap()
                .limit()
                .unwrap(),
            1000
        );
    }

    #[test]
    fn clock_faults_name_the_parameter_and_the_fault() {
        let p = Params::parse(
            Some("as_of=2026-01-01T00:00:00%2B01:00&as_of_end=2026-01-01"),
            &["as_of", "as_of_end"],
        )
        .unwrap();
        let e = p.clock("as_of").unwrap_err();
        assert!(
            matches!(&e, ApiError::InvalidClock { param, message } if param == "as_of" && message.contains("offset"))
        );
        let e = p.clock("as_of_end").unwrap_err();
        assert!(
            matches!(&e, ApiError::InvalidClock { message, .. } if message.contains("bare date"))
        );
    }

    #[test]
    fn ticker_with_cik_and_unknown_sources_are_invalid_requests() {
        let p = Params::parse(Some("ticker=TSLA&cik=1318605"), &["ticker", "cik"]).unwrap();
        assert!(p.entity().is_err());
        let p = Params::parse(Some("source=us.cftc.cot"), &["source"]).unwrap();
        let e = p.source(&[SourceId::SecEdgar]).unwrap_err();
        assert!(e.message().contains("not held") && e.message().contains("sec.edgar"));
        let p = Params::parse(Some("source=nasdaq"), &["source"]).unwrap();
        assert!(
            p.source(&[SourceId::SecEdgar])
                .unwrap_err()
                .message()
                .contains("unknown source")
        );
    }
}
