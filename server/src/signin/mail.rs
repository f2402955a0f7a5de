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

/// Sign-in links one client address may ask for one e-mail address per [`MAIL_WINDOW`]
/// (`429` beyond, for that client only).
pub const LINKS_PER_ADDRESS: u32 = 5;
/// Sign-in links one client address may ask for per [`MAIL_WINDOW`], all e-mail addresses.
pub const LINKS_PER_CLIENT: u32 = 20;
/// Sign-in links mailed to one e-mail address per [`MAIL_WINDOW`], all clients together. Past
/// it a request is still accepted and its link is mailed once the address is under the
/// ceiling again: the ceiling keeps an inbox from being flooded by many clients, and only
/// slows delivery, so nobody can lock the owner out by spending the address's links (the
/// owner's own ask is delivered, late at worst). Why not refuse: a refusal per address is a
/// lock anyone can turn.
pub const LINKS_PER_ADDRESS_CEILING: u32 = 20;
/// The window of the limits above.
pub const MAIL_WINDOW: Duration = Duration::from_secs(15 * 60);

/// The two fixed [`MAIL_WINDOW`]s a sign-in mail limit reads at one instant: the current one and
/// the one before it.
///
/// The limits hold over the sliding 15 minutes before each request, estimated from the two
/// fixed windows as `current + previous × (share of the previous window still inside the
/// sliding one)`. A fixed window alone would let a client ask for twice its limit in a second
/// across a window's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailWindows {
    /// Start of the window `now` is in (µs since the epoch).
    pub current: i64,
    /// Start of the window before it.
    pub previous: i64,
    /// How far into the current window `now` is (µs).
    elapsed: i64,
}

impl MailWindows {
    /// The windows at `now`.
    pub fn at(now: asof_engine::Instant) -> Self {
        let len = window_micros();
        let current = now.micros().div_euclid(len) * len;
        Self {
            current,
            previous: current - len,
            elapsed: now.micros() - current,
        }
    }

    /// Whether a request counted as the `current`-th of the current window, after `previous`
    /// in the window before, goes over `limit`: `None` if it does not, else the whole seconds
    /// until one more request would not (a refusal's `Retry-After`). Refused requests stay
    /// counted.
    pub fn refusal(&self, previous: i64, current: i64, limit: u32) -> Option<u64> {
        let len = i128::from(window_micros());
        let (previous, current, limit) = (
            i128::from(previous.max(0)),
            i128::from(current.max(0)),
            i128::from(limit),
        );
        let elapsed = i128::from(self.elapsed);
        // current + previous × (len − elapsed) / len > limit, in integers.
        if current * len + previous * (len - elapsed) <= limit * len {
            return None;
        }
        // The next request counts current + 1. Within this window it passes once the previous
        // window's share has shrunk enough; else in the next window, where this one is the
        // previous and the request is its first.
        let wait = if current < limit {
            // previous × (len − e) ≤ (limit − current − 1) × len
            let e = len - (limit - current - 1) * len / previous;
            e - elapsed
        } else {
            // 1 × len + current × (len − g) ≤ limit × len
            let g = len - (limit - 1) * len / current;
            len - elapsed + g
        };
        Some(
            u64::try_from((wait + 999_999) / 1_000_000)
                .unwrap_or(u64::MAX)
                .max(1),
        )
    }
}

fn window_micros() -> i64 {
    i64::try_from(MAIL_WINDOW.as_micros()).unwrap_or(i64::MAX)
}

/// Why a link is mailed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Asked for at `POST /v1/auth/email/start`.
    SignIn,
    /// A sign-in with this provider (its name, `provider_a`) found the address's account
    /// made another way: the link proves the address and joins the provider to the account.
    Join(&'static str),
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
        let sent = self.transport.send(msg).await;
        let outcome = if sent.is_ok() { "sent" } else { "failed" };
        metrics::counter!(crate::obs::SIGNIN_MAILS, "outcome" => outcome).increment(1);
        // The SMTP error names the server, never the link: safe to log.
        sent.map_err(|e| Error::Mail(e.to_string()))?;
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

    fn at_second(s: i64) -> MailWindows {
        MailWindows::at(asof_engine::Instant::from_micros(
            1_800_000_000_000_000 + s * 1_000_000,
        ))
    }

    #[test]
    fn the_mail_limit_slides_so_a_windows_end_does_not_double_it() {
        // 1_800_000_000 s is a multiple of 900: second 0 starts a window.
        let start = at_second(0);
        assert_eq!(start.elapsed, 0);
        assert_eq!(start.previous, start.current - 900_000_000);
        // Twenty asks just before a window ends, the twenty-first just after: refused.
        let after = at_second(1);
        assert_eq!(after.refusal(20, 1, 20).map(|s| s > 0), Some(true));
        // Within the limit in one window: allowed; one over: refused until the next window,
        // where the twenty-one weigh less and less.
        assert_eq!(start.refusal(0, 20, 20), None);
        let wait = start.refusal(0, 21, 20).unwrap();
        assert!(wait > 900, "{wait}");
        let later = at_second(wait as i64);
        assert_eq!(later.refusal(21, 1, 20), None, "allowed after Retry-After");
        assert!(at_second(wait as i64 - 2).refusal(21, 1, 20).is_some());
        // Half of the previous window's twenty still inside the sliding one: ten more pass.
        let half = at_second(450);
        assert_eq!(half.refusal(20, 10, 20), None);
        let wait = half.refusal(20, 11, 20).unwrap();
        assert_eq!(at_second(450 + wait as i64).refusal(20, 12, 20), None);
        assert!(
            at_second(450 + wait as i64 - 2)
                .refusal(20, 12, 20)
                .is_some()
        );
    }

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
