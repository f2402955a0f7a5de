//! Signing users in from a browser: one-time e-mail links, OpenID Connect providers A and B,
//! and the sessions both start. Routes are in `crate::routes::auth`; the session check of
//! cookie-authenticated routes is in `crate::http::middleware`. Nothing here holds a secret in
//! clear beyond one request: the store keeps hashes, flows travel sealed in the browser.

pub mod mail;
pub mod oidc;
pub mod session;

/// Sign-in settings of one server process (flags of `asof serve`); each way is off until
/// configured.
#[derive(Debug, Clone, Default)]
pub struct SignInConfig {
    /// `--smtp-url` (its password never prints), with `--mail-from`.
    pub mail: Option<(crate::secret::SecretUrl, String)>,
    pub provider_a: Option<oidc::ProviderConfig>,
    pub provider_b: Option<oidc::ProviderConfig>,
}
