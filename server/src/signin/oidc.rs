//! Sign-in through an OpenID Connect provider (providers A and B): authorization code flow
//! with PKCE, `state` and `nonce`, by the `openidconnect` crate.
//!
//! The flow's secrets (state, PKCE verifier, nonce) live in a short-lived HttpOnly cookie
//! (`__Host-svc_oauth`) sealed with an HMAC the state store keeps, not on the server: any
//! replica can finish a flow another started. The flow is bound to the browser that started
//! it twice over: a callback URL made elsewhere (login CSRF) finds no matching cookie, and a
//! flow cookie planted in the browser (a sibling subdomain can set a cookie without the
//! `__Host-` prefix) names the planter's browser binding (`__Host-svc_signin`, which no
//! sibling can set), not the victim's, so its callback signs nobody in. The ID token is checked by the
//! crate against the provider's JWKS (signature), `iss`, `aud`, `exp` and the flow's nonce;
//! only an e-mail the provider says is verified signs anyone in, and the account is found by
//! the token's `(iss, sub)` (routes/auth.rs).

use std::fmt;
use std::time::{Duration, Instant as Clock};

use hmac::{Hmac, Mac};
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    TokenResponse,
};
use sha2::Sha256;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::state::store::Identity;

/// How long a started flow may take.
pub const FLOW_TTL: Duration = Duration::from_secs(10 * 60);
/// Provider metadata and keys are fetched again after this long (key rotation).
const DISCOVERY_TTL: Duration = Duration::from_secs(10 * 60);

/// The two provider slots of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderName {
    A,
    B,
}

impl ProviderName {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderName::A => "provider_a",
            ProviderName::B => "provider_b",
        }
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One provider's settings (flags of `asof serve`).
#[derive(Clone)]
pub struct ProviderConfig {
    /// The issuer URL; its `/.well-known/openid-configuration` is the discovery document.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: this service's
    /// `/v1/auth/provider_x/callback`, registered with the provider.
    pub redirect_url: String,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client secret is never printed.
        f.debug_struct("ProviderConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("redirect_url", &self.redirect_url)
            .finish()
    }
}

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a callback signed nobody in (the sign-in page's `error=` reason, and the log line).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("token exchange failed: {0}")]
    Exchange(String),
    #[error("the provider sent no ID token")]
    NoIdToken,
    #[error("ID token rejected: {0}")]
    IdToken(String),
    #[error("the ID token has no verified e-mail")]
    NoVerifiedEmail,
    #[error("provider unreachable: {0}")]
    Unreachable(String),
}

impl Refused {
    /// The reason the sign-in page shows.
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::NoVerifiedEmail => "email_unverified",
            Refused::IdToken(_) | Refused::NoIdToken => "provider_token",
            Refused::Exchange(_) | Refused::Unreachable(_) => "provider_failed",
        }
    }
}

/// A configured provider, its discovery document fetched on first use and then every
/// [`DISCOVERY_TTL`].
pub struct Provider {
    name: ProviderName,
    cfg: ProviderConfig,
    http: reqwest::Client,
    client: Mutex<Option<(Clock, Client)>>,
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl Provider {
    pub fn new(name: ProviderName, cfg: ProviderConfig) -> Result<Self> {
        IssuerUrl::new(cfg.issuer.clone())
            .map_err(|e| Error::Config(format!("{name} issuer {:?}: {e}", cfg.issuer)))?;
        RedirectUrl::new(cfg.redirect_url.clone()).map_err(|e| {
            Error::Config(format!("{name} redirect URL {:?}: {e}", cfg.redirect_url))
        })?;
        let http = reqwest::Client::builder()
            // Following redirects would let a provider's answer point the service elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Config(format!("{name} HTTP client: {e}")))?;
        Ok(Provider {
            name,
            cfg,
            http,
            client: Mutex::new(None),
        })
    }

    async fn client(&self) -> std::result::Result<Client, Refused> {
        let mut held = self.client.lock().await;
        if let Some((at, c)) = held.as_ref()
            && at.elapsed() < DISCOVERY_TTL
        {
            return Ok(c.clone());
        }
        let issuer = IssuerUrl::new(self.cfg.issuer.clone())
            .map_err(|e| Refused::Unreachable(e.to_string()))?;
        let meta = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|e| Refused::Unreachable(format!("discovery: {e}")))?;
        let c = CoreClient::from_provider_metadata(
            meta,
            ClientId::new(self.cfg.client_id.clone()),
            self.cfg.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(
            RedirectUrl::new(self.cfg.redirect_url.clone())
                .map_err(|e| Refused::Unreachable(e.to_string()))?,
        );
        *held = Some((Clock::now(), c.clone()));
        Ok(c)
    }

    /// The provider's authorization URL for a new flow, and the flow to seal in the cookie.
    pub async fn start(&self) -> std::result::Result<(url::Url, Flow), Refused> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("email".into()))
            .set_pkce_challenge(challenge)
            .url();
        let expires = unix_now() + FLOW_TTL.as_secs() as i64;
        Ok((
            url,
            Flow {
                provider: self.name,
                state: state.secret().clone(),
                verifier: verifier.secret().clone(),
                nonce: nonce.secret().clone(),
                binding: String::new(),
                expires,
            },
        ))
    }

    /// Exchanges the code (with the flow's PKCE verifier), verifies the ID token (signature,
    /// issuer, audience, expiry, nonce) and answers its verified e-mail, lower-cased.
    pub async fn finish(&self, code: &str, flow: &Flow) -> std::result::Result<Verified, Refused> {
        let client = self.client().await?;
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| Refused::Exchange(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| Refused::Exchange(e.to_string()))?;
        let id_token = token.id_token().ok_or(Refused::NoIdToken)?;
        let claims = id_token
            .claims(&client.id_token_verifier(), &Nonce::new(flow.nonce.clone()))
            .map_err(|e| Refused::IdToken(e.to_string()))?;
        if claims.email_verified() != Some(true) {
            return Err(Refused::NoVerifiedEmail);
        }
        let email = claims.email().ok_or(Refused::NoVerifiedEmail)?;
        let email = crate::signin::mail::parse_address(email.as_str())
            .map(|a| a.to_string())
            .ok_or(Refused::NoVerifiedEmail)?;
        Ok(Verified {
            identity: Identity {
                issuer: claims.issuer().as_str().to_owned(),
                subject: claims.subject().as_str().to_owned(),
            },
            email,
        })
    }
}

fn unix_now() -> i64 {
    asof_engine::Instant::now().micros().div_euclid(1_000_000)
}

/// What a provider's verified ID token says: who (issuer and subject, the account's key) and
/// the address the provider verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub identity: Identity,
    pub email: String,
}

/// A started flow, as sealed in the `__Host-svc_oauth` cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub provider: ProviderName,
    state: String,
    verifier: String,
    nonce: String,
    /// The hash of the starting browser's binding cookie
    /// (`crate::signin::session::binding_hash`).
    binding: String,
    /// Unix seconds.
    expires: i64,
}

fn mac(key: &[u8], payload: &str) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(payload.as_bytes());
    m
}

impl Flow {
    /// The flow, bound to the browser whose binding cookie hashes to `binding`.
    pub fn bound_to(self, binding: String) -> Self {
        Flow { binding, ..self }
    }

    /// `provider.state.verifier.nonce.binding.expires.signature`: the parts are base64url or
    /// hex, so `.` never occurs inside one.
    pub fn seal(&self, key: &[u8]) -> String {
        let payload = format!(
            "{}.{}.{}.{}.{}.{}",
            self.provider, self.state, self.verifier, self.nonce, self.binding, self.expires
        );
        let sig = hex::encode(mac(key, &payload).finalize().into_bytes());
        format!("{payload}.{sig}")
    }

    /// The flow a cookie holds, when its seal is this service's, it is for `provider` and it
    /// has not expired.
    pub fn open(sealed: &str, key: &[u8], provider: ProviderName) -> Option<Flow> {
        let (payload, sig) = sealed.rsplit_once('.')?;
        mac(key, payload)
            .verify_slice(&hex::decode(sig).ok()?)
            .ok()?;
        let mut parts = payload.split('.');
        let (p, state, verifier, nonce, binding, expires) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?.parse::<i64>().ok()?,
        );
        if parts.next().is_some() || p != provider.as_str() || expires <= unix_now() {
            return None;
        }
        Some(Flow {
            provider,
            state: state.into(),
            verifier: verifier.into(),
            nonce: nonce.into(),
            binding: binding.into(),
            expires,
        })
    }

    /// Whether the callback's `state` is this flow's (constant time).
    pub fn state_matches(&self, got: &str) -> bool {
        same(&self.state, got)
    }

    /// Whether the callback comes from the browser that started the flow: its binding
    /// cookie's hash is the one sealed in (constant time). A flow sealed with no binding
    /// matches no browser.
    pub fn browser_matches(&self, binding_hash: &str) -> bool {
        !self.binding.is_empty() && same(&self.binding, binding_hash)
    }
}

fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(expires: i64) -> Flow {
        Flow {
            provider: ProviderName::A,
            state: "st_ate-1".into(),
            verifier: "ver_ifier".into(),
            nonce: "non-ce".into(),
            binding: "b1nd".into(),
            expires,
        }
    }

    #[test]
    fn a_sealed_flow_opens_only_with_its_key_provider_and_before_expiry() {
        let f = flow(unix_now() + 60);
        let sealed = f.seal(b"k1");
        assert_eq!(Flow::open(&sealed, b"k1", ProviderName::A), Some(f.clone()));
        assert_eq!(
            Flow::open(&sealed, b"k2", ProviderName::A),
            None,
            "another key"
        );
        assert_eq!(
            Flow::open(&sealed, b"k1", ProviderName::B),
            None,
            "another provider"
        );
        let tampered = sealed.replacen("st_ate-1", "st_ate-2", 1);
        assert_eq!(
            Flow::open(&tampered, b"k1", ProviderName::A),
            None,
            "tampered"
        );
        let old = flow(unix_now() - 1).seal(b"k1");
        assert_eq!(Flow::open(&old, b"k1", ProviderName::A), None, "expired");
        assert_eq!(Flow::open("garbage", b"k1", ProviderName::A), None);
        assert!(
            f.state_matches("st_ate-1") && !f.state_matches("st_ate-2") && !f.state_matches("")
        );
        let rebound = sealed.replacen(".b1nd.", ".b2nd.", 1);
        assert_eq!(
            Flow::open(&rebound, b"k1", ProviderName::A),
            None,
            "the binding is sealed"
        );
        assert!(f.browser_matches("b1nd") && !f.browser_matches("b2nd"));
        assert!(
            !flow(unix_now() + 60)
                .bound_to(String::new())
                .browser_matches(""),
            "a flow bound to no browser matches none"
        );
    }
}
