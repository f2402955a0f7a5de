//! E-mail sign-in: the one-time link and the SMTP transport that sends it.
//!
//! A link carries 32 random bytes; the store keeps their sha256 with the address, an expiry
//! and the hash of the asking browser's binding cookie, and marks the token used in the same
//! statement that checks it is live and this browser's, so a link signs in once, there. Sending is the same whether or not an account exists for the address (the
//! first sign-in creates it), so the answer tells nobody who has an account.

use std::str::FromStr;
use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::transport::smtp::AsyncSmtpTransport;
use lettre::{Address, AsyncTransport, Message, Tokio1Executor};

use crate::error::{Error, Result};

/// How long a sign-in link works.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);

/// Sign-in links one address may be sent per [`MAIL_WINDOW`].
pub const LINKS_PER_ADDRESS: u32 = 5;
/// Sign-in links one client address may ask for per [`MAIL_WINDOW`].
pub const LINKS_PER_CLIENT: u32 = 20;
/// The window of the two limits above.
pub const MAIL_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Why a link is mailed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Asked for at `POST /v1/auth/email/start`.
    SignIn,
    /// A sign-in with this provider found the address's account made another way: the link
    /// proves the address and joins the provider to the account.
    Join(crate::signin::oidc::ProviderName),
}

/// Where sign-in mail goes out: an SMTP server and the sender address.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: lettre::message::Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The transport holds the SMTP credentials: never printed.
        f.debug_struct("Mailer")
            .field("from", &self.from.to_string())
            .finish()
    }
}

impl Mailer {
    /// A mailer for `smtp_url`, lettre's form: `smtp://[user:pass@]host[:port]` (plain; add
    /// `?tls=required` for STARTTLS, `?tls=opportunistic` to use it when offered) or
    /// `smtps://host[:port]` (TLS from the first byte); `from` is the sender address.
    pub fn new(smtp_url: &str, from: &str) -> Result<Self> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp_url)
            .map_err(|e| Error::Config(format!("--smtp-url: {e}")))?
            .timeout(Some(Duration::from_secs(10)))
            .build();
        let from = lettre::message::Mailbox::from_str(from)
            .map_err(|e| Error::Config(format!("--mail-from {from:?}: {e}")))?;
        Ok(Mailer { transport, from })
    }

    /// Sends a sign-in link to `to`, worded for its purpose.
    pub async fn send_link(&self, to: &Address, link: &str, purpose: Purpose) -> Result<()> {
        let ttl_min = LINK_TTL.as_secs() / 60;
        let (subject, ask) = match purpose {
            Purpose::SignIn => (
                "Your asof sign-in link".to_owned(),
                "Someone (we hope you) asked to sign in to asof with this address.".to_owned(),
            ),
            Purpose::Join(p) => (
                format!("Confirm signing in to asof with {p}"),
                format!(
                    "Someone (we hope you) signed in with {p}, which says this address is \
                     theirs. This address already has an asof account: opening the link \
                     below adds {p} to it as a way to sign in."
                ),
            ),
        };
        let body = format!(
            "{ask}\n\n\
             Open this link in the browser where you asked, and press the button it shows; \
             it works once, within {ttl_min} minutes:\n\n{link}\n\n\
             If you did not ask, ignore this message: nothing happens without the link.\n"
        );
        let msg = Message::builder()
            .from(self.from.clone())
            .to(lettre::message::Mailbox::new(None, to.clone()))
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|e| Error::Config(format!("sign-in message: {e}")))?;
        self.transport
            .send(msg)
            .await
            // The SMTP error names the server, never the link: safe to log.
            .map_err(|e| Error::Mail(e.to_string()))?;
        Ok(())
    }
}

/// An e-mail address as accounts are matched by: syntactically valid (lettre's parser),
/// at most 254 characters, lower-cased.
pub fn parse_address(raw: &str) -> Option<Address> {
    let raw = raw.trim();
    if raw.is_empty() || raw.len() > 254 {
        return None;
    }
    let a = Address::from_str(&raw.to_lowercase()).ok()?;
    // A bare host (`a@localhost`) is valid SMTP but no address anyone signs in with.
    a.domain().contains('.').then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_validated_and_lower_cased() {
        assert_eq!(
            parse_address(" Ana@Example.COM ").unwrap().to_string(),
            "ana@example.com"
        );
        for bad in [
            "",
            "ana",
            "ana@",
            "@example.com",
            "ana@localhost",
            "a b@example.com",
            "ana@@example.com",
        ] {
            assert!(parse_address(bad).is_none(), "{bad:?}");
        }
        assert!(parse_address(&format!("{}@example.com", "a".repeat(250))).is_none());
    }

    #[test]
    fn a_mailer_needs_a_valid_smtp_url_and_sender() {
        assert!(Mailer::new("smtp://127.0.0.1:2525", "asof <no-reply@example.com>").is_ok());
        assert!(Mailer::new("smtp://127.0.0.1:2525?tls=required", "no-reply@example.com").is_ok());
        assert!(Mailer::new("ftp://x", "no-reply@example.com").is_err());
        assert!(Mailer::new("smtp://127.0.0.1:2525", "not an address").is_err());
    }
}
