//! Settings that carry a secret (a database or SMTP URL with its password, an API key), whose
//! `Debug` never prints it: a configuration logged by `{:?}`, a panic message or an error
//! report shows where a setting points, never what unlocks it.
//!
//! Why types and not care: `ServeConfig`, `Options` and the CLI's arguments derive `Debug`,
//! and a field added next year would print in clear the day someone logs the whole config.
//! With the secret in its own type, the only way out is [`Secret::expose`] /
//! [`SecretUrl::expose`], at the one place that hands it to the driver.

use std::fmt;

/// A secret with no printable part (an API key, a signing secret, a client secret).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn into_inner(self) -> String {
        self.0
    }

    /// For clap's `value_parser`.
    pub fn parse(s: &str) -> Result<Self, std::convert::Infallible> {
        Ok(Secret(s.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

/// A URL that may carry a password (`postgres://user:pass@host/db`, `smtp://user:pass@host`):
/// printed with the password replaced by `***`, the rest kept (which host, which database).
/// A value that does not parse as a URL with a host prints as redacted entirely: it may be a secret in
/// some other form.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(String);

impl SecretUrl {
    pub fn new(value: impl Into<String>) -> Self {
        SecretUrl(value.into())
    }

    /// The URL, password included, for the driver that connects with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// For clap's `value_parser`.
    pub fn parse(s: &str) -> Result<Self, std::convert::Infallible> {
        Ok(SecretUrl(s.to_owned()))
    }

    /// The URL with its password (and any query, where drivers take `password=`) hidden.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.0) {
            // `user:pass` alone parses as a scheme and a path: only a URL with a host has a
            // place for a password that can be hidden.
            Ok(mut u) if u.has_host() || u.scheme() == "sqlite" => {
                if u.password().is_some() {
                    let _ = u.set_password(Some("***"));
                }
                if u.query().is_some() {
                    u.set_query(Some("***"));
                }
                u.to_string()
            }
            _ => "<redacted>".to_owned(),
        }
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_url_prints_where_it_points_never_its_password() {
        let u = SecretUrl::new(
            "postgres://asof:hunter2@db.internal:5432/asof?sslmode=require&password=hunter3",
        );
        let shown = format!("{u:?} {u}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("hunter3"),
            "{shown}"
        );
        assert!(shown.contains("db.internal:5432/asof"), "{shown}");
        assert_eq!(
            u.expose(),
            "postgres://asof:hunter2@db.internal:5432/asof?sslmode=require&password=hunter3"
        );
        let not_a_url = SecretUrl::new("user:hunter2 at somewhere");
        assert_eq!(format!("{not_a_url:?}"), "\"<redacted>\"");
        assert_eq!(
            format!("{:?}", Secret::new("sk_live_hunter2")),
            "Secret(redacted)"
        );
        let local = SecretUrl::new("sqlite://.asof-state/asof.db");
        assert!(format!("{local:?}").contains("asof.db"), "{local:?}");
    }
}
