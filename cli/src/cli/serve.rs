//! `asof serve`: its flags (listening, state, limits, sign-in ways, billing, connectors) and
//! how they become the server's configuration.

use std::process::ExitCode;

use asof_server::secret::{Secret, SecretUrl};
use clap::Args;

use super::CliResult;
use super::flags::CorpusArg;

/// The default state store: a SQLite file in `.asof-state/` of the working directory.
pub(crate) const DEFAULT_DATABASE_URL: &str = "sqlite://.asof-state/asof.db";

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[arg(long, env = "ASOF_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// State store: sqlite://PATH (default) or postgres://...
    #[arg(
        long = "database-url",
        env = "ASOF_DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL,
        hide_env_values = true,
        value_parser = SecretUrl::parse
    )]
    pub database_url: SecretUrl,
    /// Seconds between checks of the corpus pointer, decimals allowed (0.1 at least): one
    /// small read; a new version is then verified (its new objects only) and loaded, and its
    /// new rows reach /v1/stream. It bounds how late a stream client learns of a publish.
    #[arg(
        long = "reload-interval",
        env = "ASOF_RELOAD_INTERVAL",
        default_value = "1",
        value_parser = interval_seconds
    )]
    pub reload_interval: std::time::Duration,
    /// A proxy in front of the service (the load balancer; a CDN's edge network), by address
    /// or network (10.0.0.5, 10.0.0.0/24); repeat the flag or separate with commas. From these
    /// peers, and only from them, X-Forwarded-For (its first entry from the right that is not
    /// one of them) and X-Forwarded-Proto are believed; a client that reaches a replica
    /// directly is its socket address whatever it writes. Unset: nothing forwarded is believed.
    #[arg(
        long = "trusted-proxy",
        env = "ASOF_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = asof_server::http::client::parse_proxy
    )]
    pub trusted_proxies: Vec<asof_server::http::client::IpNet>,
    /// Replaced by --trusted-proxy (forwarded headers are believed by sender, not by
    /// count): refused without it, so an old configuration cannot silently change whom the
    /// limits count.
    #[arg(
        long = "trust-forwarded-for",
        env = "ASOF_TRUST_FORWARDED_FOR",
        hide = true
    )]
    pub trust_forwarded_for: bool,
    /// The IPv6 prefix length one client counts as in every per-address limit (an ordinary
    /// subscriber holds a /64 and could send each request from a new address in it).
    #[arg(
        long = "ipv6-prefix",
        env = "ASOF_IPV6_PREFIX",
        default_value_t = asof_server::http::client::DEFAULT_IPV6_PREFIX,
        value_parser = clap::value_parser!(u8).range(16..=128)
    )]
    pub ipv6_prefix: u8,
    /// Refused keys and session cookies one client address may present per minute (on each
    /// replica); past it, any key this replica has not verified before is answered 429
    /// without a state-store lookup until the minute ends.
    #[arg(
        long = "bad-credential-limit",
        env = "ASOF_BAD_CREDENTIAL_LIMIT",
        default_value_t = asof_server::plan::BAD_CREDENTIALS_PER_MINUTE,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub bad_credential_limit: u32,
    /// Requests per minute one client address may make to the public rate-limited routes
    /// (`/v1/meta`, `/v1/sample/*`).
    #[arg(
        long = "public-rate-limit",
        env = "ASOF_PUBLIC_RATE_LIMIT",
        default_value_t = asof_server::plan::PUBLIC_REQUESTS_PER_MINUTE,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub public_rate_limit: u32,
    /// Seconds a request may take before it is answered `503 timeout`.
    #[arg(
        long = "request-timeout",
        env = "ASOF_REQUEST_TIMEOUT",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub request_timeout: u64,
    /// Walks and scans (pages the access index cannot answer: all rows of a source, the
    /// sample) allowed at once; more wait up to --scan-wait-ms, then get `503 overloaded`
    /// with Retry-After.
    #[arg(
        long = "max-scans",
        env = "ASOF_MAX_SCANS",
        default_value_t = 8,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_scans: u64,
    /// Milliseconds a scan waits for a free slot.
    #[arg(
        long = "scan-wait-ms",
        env = "ASOF_SCAN_WAIT_MS",
        default_value_t = 2000
    )]
    pub scan_wait_ms: u64,
    /// Threads running walks and scans, at a lower priority than the serving threads
    /// (0: half the cores, at least one).
    #[arg(long = "scan-threads", env = "ASOF_SCAN_THREADS", default_value_t = 0)]
    pub scan_threads: u64,
    /// The share of the machine's cores the scan threads may keep busy together, in (0, 1]:
    /// past it a walk pauses between blocks, so broad questions cannot take the cores the
    /// by-filer path serves from (1: bounded only by --scan-threads).
    #[arg(
        long = "scan-cpu-share",
        env = "ASOF_SCAN_CPU_SHARE",
        default_value_t = asof_server::http::state::DEFAULT_SCAN_CPU_SHARE,
        value_parser = parse_share
    )]
    pub scan_cpu_share: f64,
    /// Rows one walk or scan may look at; a page that would read more is answered
    /// `400 query_too_broad`.
    #[arg(
        long = "max-walk-rows",
        env = "ASOF_MAX_WALK_ROWS",
        default_value_t = asof_engine::read::scan_pool::DEFAULT_MAX_ROWS,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_walk_rows: u64,
    /// Seconds a file URL from /v1/files stays valid (the object store's presigned URL, or
    /// the service's own for a local corpus).
    #[arg(
        long = "file-url-ttl",
        env = "ASOF_FILE_URL_TTL",
        default_value_t = 900,
        value_parser = clap::value_parser!(u64).range(1..=604_800)
    )]
    pub file_url_ttl: u64,
    /// Pinned reads (`corpus_version=`) answer only from the newest this many published
    /// versions, the served one included (default: no count bound; `--retain-days` bounds).
    #[arg(
        long = "retain-versions",
        env = "ASOF_RETAIN_VERSIONS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub retain_versions: Option<u64>,
    /// Pinned reads answer only from versions served within this many days (superseded at
    /// most this long ago); 0: the served version alone. Default seven years (2,557 days),
    /// what books-and-records rules ask a decision's evidence to be kept.
    #[arg(
        long = "retain-days",
        env = "ASOF_RETAIN_DAYS",
        default_value_t = asof_answer::versions::DEFAULT_RETAIN_DAYS
    )]
    pub retain_days: u32,
    /// Pinned versions kept loaded besides the served one; the least recently asked is
    /// dropped past it (and loaded again when asked).
    #[arg(
        long = "version-cache-versions",
        env = "ASOF_VERSION_CACHE_VERSIONS",
        default_value_t = asof_answer::versions::DEFAULT_CACHE_VERSIONS as u64,
        value_parser = clap::value_parser!(u64).range(1..=1024)
    )]
    pub version_cache_versions: u64,
    /// Requests per minute one client address may make to the service's signed file URLs.
    #[arg(
        long = "file-rate-limit",
        env = "ASOF_FILE_RATE_LIMIT",
        default_value_t = asof_server::http::state::FILE_REQUESTS_PER_MINUTE,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub file_rate_limit: u32,
    /// The origin clients reach the service at (e.g. https://api.example.com), used in the
    /// file URLs it signs; default: the request's Host.
    #[arg(long = "public-url", env = "ASOF_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Streams (/v1/stream) one account may hold open at once on this process, whichever of
    /// its keys opened them.
    #[arg(
        long = "max-streams-per-user",
        alias = "max-streams-per-key",
        env = "ASOF_MAX_STREAMS_PER_USER",
        default_value_t = 4,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_streams_per_user: u64,
    /// Streams all accounts together may hold open on this process; must be below
    /// --max-connections, whose rest is kept for ordinary requests. Default: three quarters of
    /// --max-connections.
    #[arg(
        long = "max-streams",
        env = "ASOF_MAX_STREAMS",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_streams: Option<u64>,
    /// Seconds the process waits, after SIGTERM, for open connections to finish before it
    /// exits anyway (streams end at once; this bounds clients that stopped reading).
    #[arg(
        long = "shutdown-grace",
        env = "ASOF_SHUTDOWN_GRACE",
        default_value_t = 10
    )]
    pub shutdown_grace: u64,
    /// Seconds a client may take to send a request's headers (counted from the connection's
    /// start, or from the end of its previous response, so it also closes idle keep-alive
    /// connections); a slower client's connection is closed.
    #[arg(
        long = "header-read-timeout",
        env = "ASOF_HEADER_READ_TIMEOUT",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub header_read_timeout: u64,
    /// Connections served at once by this process; more wait in the listen backlog.
    #[arg(
        long = "max-connections",
        env = "ASOF_MAX_CONNECTIONS",
        default_value_t = 2048,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000)
    )]
    pub max_connections: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics, on a listener of their own (loopback
    /// addresses only, e.g. 127.0.0.1:9464). Unset: no metrics are kept.
    #[arg(long = "metrics-listen", env = "ASOF_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Seconds between SIGTERM and closing the listener, during which `GET /ready` answers 503
    /// and every other request is still served: set it above the balancer's health-check
    /// interval times its fall count, so it stops sending before connections close.
    #[arg(
        long = "drain-delay",
        env = "ASOF_DRAIN_DELAY",
        default_value = "0",
        value_parser = drain_seconds
    )]
    pub drain_delay: std::time::Duration,
    /// E-mail sign-in: the SMTP server sign-in links go out through, in lettre's form
    /// `smtp://[user:pass@]host[:port]` (add `?tls=required` for STARTTLS) or `smtps://...`;
    /// needs --mail-from and --public-url. Unset: e-mail sign-in answers 503.
    #[arg(
        long = "smtp-url",
        env = "ASOF_SMTP_URL",
        requires = "mail_from",
        hide_env_values = true,
        value_parser = SecretUrl::parse
    )]
    pub smtp_url: Option<SecretUrl>,
    /// The sender of sign-in e-mail, e.g. "asof <no-reply@example.com>".
    #[arg(long = "mail-from", env = "ASOF_MAIL_FROM", requires = "smtp_url")]
    pub mail_from: Option<String>,
    #[command(flatten)]
    pub provider_a: ProviderAArgs,
    #[command(flatten)]
    pub provider_b: ProviderBArgs,
    /// Send the session cookie without `Secure`: only for a local deployment over plain HTTP
    /// on a host other than localhost (browsers drop Secure cookies set over plain HTTP).
    #[arg(long = "insecure-cookies", env = "ASOF_INSECURE_COOKIES")]
    pub insecure_cookies: bool,
    #[command(flatten)]
    pub billing: BillingArgs,
    #[command(flatten)]
    pub connector: ConnectorArgs,
}

/// Bring-your-own-key daily bars (`/v1/connectors/{vendor}/bars`): each vendor is off (503)
/// until its base URL is given.
#[derive(Debug, Args)]
pub struct ConnectorArgs {
    /// Vendor A's API base URL (an aggregates API: /v2/aggs/ticker/...).
    #[arg(long = "vendor-a-url", env = "ASOF_VENDOR_A_URL")]
    pub vendor_a_url: Option<String>,
    /// The license class in force for vendor A's data, named in each answer's origin.
    #[arg(
        long = "vendor-a-license-class",
        env = "ASOF_VENDOR_A_LICENSE_CLASS",
        default_value = "caller_licensed_internal_use"
    )]
    pub vendor_a_license_class: String,
    /// Vendor B's API base URL (a daily-prices API: /daily/{ticker}/prices).
    #[arg(long = "vendor-b-url", env = "ASOF_VENDOR_B_URL")]
    pub vendor_b_url: Option<String>,
    /// The license class in force for vendor B's data, named in each answer's origin.
    #[arg(
        long = "vendor-b-license-class",
        env = "ASOF_VENDOR_B_LICENSE_CLASS",
        default_value = "caller_licensed_internal_use"
    )]
    pub vendor_b_license_class: String,
}

/// Payment processing (Stripe's API shape). All settings or none: with any missing, checkout,
/// portal and webhook answer 503 billing_not_configured. Needs --public-url.
#[derive(Debug, Args)]
pub struct BillingArgs {
    /// The processor's API base URL, e.g. https://api.stripe.com.
    #[arg(long = "billing-api-url", env = "ASOF_BILLING_API_URL")]
    pub api_url: Option<String>,
    /// The processor's secret API key (prefer the environment variable).
    #[arg(
        long = "billing-secret-key",
        env = "ASOF_BILLING_SECRET_KEY",
        hide_env_values = true,
        value_parser = Secret::parse
    )]
    pub secret_key: Option<Secret>,
    /// The signing secret of the webhook endpoint <public-url>/v1/billing/webhook (prefer the
    /// environment variable).
    #[arg(
        long = "billing-webhook-secret",
        env = "ASOF_BILLING_WEBHOOK_SECRET",
        hide_env_values = true,
        value_parser = Secret::parse
    )]
    pub webhook_secret: Option<Secret>,
    /// The processor's price id of the researcher plan.
    #[arg(
        long = "billing-price-researcher",
        env = "ASOF_BILLING_PRICE_RESEARCHER"
    )]
    pub price_researcher: Option<String>,
    /// The processor's price id of the power plan.
    #[arg(long = "billing-price-power", env = "ASOF_BILLING_PRICE_POWER")]
    pub price_power: Option<String>,
    /// The processor's price id of the desk plan.
    #[arg(long = "billing-price-desk", env = "ASOF_BILLING_PRICE_DESK")]
    pub price_desk: Option<String>,
    /// Where to ask for a commercial license (URL or mailto:), named when a checkout comes
    /// without the internal-use attestation; default: <public-url>/#licensing.
    #[arg(long = "license-contact", env = "ASOF_LICENSE_CONTACT")]
    pub license_contact: Option<String>,
}

/// The OpenID Connect flags of one sign-in provider slot. clap takes each flag's id, long
/// name and variable as a whole string, so the two slots' structs come from one macro rather
/// than from one struct flattened twice (which would give both the same flag names).
macro_rules! provider_args {
    ($ty:ident, $name:literal, $slot:literal, $flag:literal, $env:literal) => {
        #[doc = concat!("OpenID Connect settings of sign-in provider ", $name, ".")]
        #[derive(Debug, Args)]
        pub struct $ty {
            #[arg(
                id = concat!($slot, "_issuer"),
                long = concat!($flag, "-issuer"),
                env = concat!($env, "_ISSUER"),
                requires = concat!($slot, "_client_id"),
                help = concat!("Provider ", $name, ": the issuer URL (its /.well-known/openid-configuration is read); unset: provider ", $name, " sign-in answers 503")
            )]
            pub issuer: Option<String>,
            #[arg(
                id = concat!($slot, "_client_id"),
                long = concat!($flag, "-client-id"),
                env = concat!($env, "_CLIENT_ID"),
                help = concat!("Provider ", $name, ": the client id registered with the provider")
            )]
            pub client_id: Option<String>,
            #[arg(
                id = concat!($slot, "_client_secret"),
                long = concat!($flag, "-client-secret"),
                env = concat!($env, "_CLIENT_SECRET"),
                hide_env_values = true,
                value_parser = Secret::parse,
                help = concat!("Provider ", $name, ": the client secret (prefer the environment variable)")
            )]
            pub client_secret: Option<Secret>,
            #[arg(
                id = concat!($slot, "_redirect_url"),
                long = concat!($flag, "-redirect-url"),
                env = concat!($env, "_REDIRECT_URL"),
                help = concat!("Provider ", $name, ": the redirect URL registered with the provider; default <public-url>/v1/auth/", $slot, "/callback")
            )]
            pub redirect_url: Option<String>,
        }

        impl $ty {
            /// The slot's provider, `None` when no issuer is set.
            fn config(
                self,
                public_url: Option<&str>,
            ) -> Result<Option<asof_server::signin::oidc::ProviderConfig>, Box<dyn std::error::Error>> {
                provider(
                    $slot,
                    self.issuer,
                    self.client_id,
                    self.client_secret.map(Secret::into_inner),
                    self.redirect_url,
                    public_url,
                )
            }
        }
    };
}

provider_args!(
    ProviderAArgs,
    "A",
    "provider_a",
    "provider-a",
    "ASOF_PROVIDER_A"
);
provider_args!(
    ProviderBArgs,
    "B",
    "provider_b",
    "provider-b",
    "ASOF_PROVIDER_B"
);

/// A share of the cores: a decimal in (0, 1].
pub(crate) fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!(
            "a share of the cores in (0, 1], such as 0.25, not {s:?}"
        )),
    }
}

/// A `--reload-interval`: decimal seconds, at least 0.1 (a pointer check is cheap, but a
/// tighter loop would only burn a core).
pub(crate) fn interval_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds (e.g. 1 or 0.25)"))?;
    if !(0.1..=86_400.0).contains(&secs) {
        return Err(format!(
            "`{s}`: the interval must lie between 0.1 and 86400 seconds"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// `--drain-delay`: seconds, decimals allowed, 0 to 600.
fn drain_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds (e.g. 5 or 0.5)"))?;
    if !(0.0..=600.0).contains(&secs) {
        return Err(format!(
            "`{s}`: the drain delay must lie between 0 and 600 seconds"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

pub(crate) async fn serve(a: ServeArgs) -> CliResult {
    asof_server::serve::serve(config(a)?).await?;
    Ok(ExitCode::SUCCESS)
}

/// The server's configuration from the flags.
fn config(a: ServeArgs) -> Result<asof_server::serve::ServeConfig, Box<dyn std::error::Error>> {
    use asof_server::connector::{ConnectorConfig, VendorConfig};
    use std::time::Duration;
    let max_streams = match a.max_streams {
        None => a.max_connections as usize * 3 / 4,
        Some(n) if n < a.max_connections => n as usize,
        Some(n) => {
            return Err(format!(
                "--max-streams {n} must be below --max-connections {}: the connections streams cannot take are what ordinary requests are answered on",
                a.max_connections
            )
            .into());
        }
    };
    if a.trust_forwarded_for && a.trusted_proxies.is_empty() {
        return Err("--trust-forwarded-for (ASOF_TRUST_FORWARDED_FOR) was replaced by --trusted-proxy (ASOF_TRUSTED_PROXIES): name the proxies in front of the service by address or network, e.g. --trusted-proxy 10.0.0.5; forwarded headers are believed only from them".into());
    }
    let options = asof_server::http::Options {
        trusted_proxies: a.trusted_proxies.clone(),
        ipv6_prefix: a.ipv6_prefix,
        bad_credentials_per_minute: a.bad_credential_limit,
        public_requests_per_minute: a.public_rate_limit,
        request_timeout: Duration::from_secs(a.request_timeout),
        max_concurrent_scans: a.max_scans as usize,
        scan_wait: Duration::from_millis(a.scan_wait_ms),
        scan_threads: a.scan_threads as usize,
        scan_cpu_share: a.scan_cpu_share,
        max_walk_rows: a.max_walk_rows,
        file_url_ttl: Duration::from_secs(a.file_url_ttl),
        file_requests_per_minute: a.file_rate_limit,
        public_url: a.public_url.clone(),
        stream: asof_server::http::stream::StreamOptions {
            max_per_user: a.max_streams_per_user as usize,
            max_total: max_streams,
            ..Default::default()
        },
        sessions: asof_server::signin::session::SessionOptions {
            secure: !a.insecure_cookies,
            ..Default::default()
        },
        sign_in: asof_server::signin::SignInConfig {
            mail: a.smtp_url.zip(a.mail_from),
            provider_a: a.provider_a.config(a.public_url.as_deref())?,
            provider_b: a.provider_b.config(a.public_url.as_deref())?,
        },
        billing: asof_server::billing::BillingConfig {
            api_url: a.billing.api_url,
            secret_key: a.billing.secret_key.map(Secret::into_inner),
            webhook_secret: a.billing.webhook_secret.map(Secret::into_inner),
            prices: [
                a.billing.price_researcher,
                a.billing.price_power,
                a.billing.price_desk,
            ],
            license_contact: a.billing.license_contact,
        },
        connector: ConnectorConfig {
            vendor_a: a.connector.vendor_a_url.map(|url| VendorConfig {
                url,
                license_class: a.connector.vendor_a_license_class,
            }),
            vendor_b: a.connector.vendor_b_url.map(|url| VendorConfig {
                url,
                license_class: a.connector.vendor_b_license_class,
            }),
            ..Default::default()
        },
        retention: asof_answer::versions::Retention {
            versions: a.retain_versions.map(|n| n as usize),
            days: Some(a.retain_days),
        },
        version_cache: asof_answer::versions::CacheBounds {
            versions: a.version_cache_versions as usize,
        },
        ..Default::default()
    };
    let cfg = asof_server::serve::ServeConfig {
        listen: a.listen,
        corpus: a.corpus.corpus,
        database_url: a.database_url,
        reload_interval: a.reload_interval,
        shutdown_grace: Duration::from_secs(a.shutdown_grace),
        header_read_timeout: Duration::from_secs(a.header_read_timeout),
        max_connections: a.max_connections as usize,
        metrics_listen: a.metrics_listen,
        drain_delay: a.drain_delay,
        options,
    };
    Ok(cfg)
}

/// One provider's settings from its flags: none without an issuer; the redirect URL defaults
/// to the public URL's callback path.
pub(crate) fn provider(
    slot: &str,
    issuer: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    redirect_url: Option<String>,
    public_url: Option<&str>,
) -> Result<Option<asof_server::signin::oidc::ProviderConfig>, Box<dyn std::error::Error>> {
    let Some(issuer) = issuer else {
        return Ok(None);
    };
    let flag = slot.replace('_', "-");
    let client_id = client_id.ok_or_else(|| format!("--{flag}-issuer needs --{flag}-client-id"))?;
    let redirect_url = match (redirect_url, public_url) {
        (Some(r), _) => r,
        (None, Some(p)) => format!("{}/v1/auth/{slot}/callback", p.trim_end_matches('/')),
        (None, None) => {
            return Err(
                format!("--{flag}-issuer needs --{flag}-redirect-url or --public-url").into(),
            );
        }
    };
    Ok(Some(asof_server::signin::oidc::ProviderConfig {
        issuer,
        client_id,
        client_secret,
        redirect_url,
    }))
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::cli::{Cli, Command};

    /// Flags whose value is a secret or may hold one (a URL with a password).
    fn carries_a_secret(long: &str) -> bool {
        ["secret", "password", "token", "database-url", "smtp-url"]
            .iter()
            .any(|w| long.contains(w))
    }

    #[test]
    fn every_flag_that_carries_a_secret_hides_its_environment_value() {
        let cmd = Cli::command();
        let serve = cmd.find_subcommand("serve").expect("serve");
        let secret: Vec<_> = serve
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| (l, a)))
            .filter(|(l, _)| carries_a_secret(l))
            .collect();
        assert_eq!(
            secret.len(),
            6,
            "database, smtp, billing key and webhook secret, two client secrets"
        );
        for (long, arg) in secret {
            assert!(
                arg.is_hide_env_values_set(),
                "--{long} shows its value in --help"
            );
        }
    }

    /// The whole configuration, flags and the server's settings alike, prints (`{:?}`, as a
    /// log line or a panic would) without any secret it holds.
    #[test]
    fn a_logged_configuration_names_no_secret() {
        let args = [
            "asof",
            "serve",
            "--database-url",
            "postgres://asof:secret-1@db.internal/asof",
            "--smtp-url",
            "smtp://mailer:secret-2@mail.internal:587",
            "--mail-from",
            "no-reply@example.com",
            "--public-url",
            "https://api.example.com",
            "--billing-api-url",
            "https://billing.example",
            "--billing-secret-key",
            "sk_live_secret-3",
            "--billing-webhook-secret",
            "whsec_secret-4",
            "--provider-a-issuer",
            "https://id.example",
            "--provider-a-client-id",
            "asof",
            "--provider-a-client-secret",
            "secret-5",
            "--provider-b-issuer",
            "https://id-b.example",
            "--provider-b-client-id",
            "asof",
            "--provider-b-client-secret",
            "secret-6",
        ];
        let Command::Serve(a) = Cli::try_parse_from(args).unwrap().command else {
            panic!("serve parses as serve");
        };
        let flags = format!("{a:?}");
        let cfg = config(*a).unwrap();
        let settings = format!("{cfg:?} {:?} {:?}", cfg.options, cfg.options.sign_in);
        for text in [&flags, &settings] {
            for n in 1..=6 {
                assert!(
                    !text.contains(&format!("secret-{n}")),
                    "secret-{n} printed: {text}"
                );
            }
            assert!(
                text.contains("db.internal"),
                "where the store is still shows: {text}"
            );
        }
        // The values still reach what uses them.
        assert_eq!(
            cfg.database_url.expose(),
            "postgres://asof:secret-1@db.internal/asof"
        );
        let (smtp, _) = cfg.options.sign_in.mail.as_ref().unwrap();
        assert!(smtp.expose().contains("secret-2"));
        assert_eq!(
            cfg.options.billing.secret_key.as_deref(),
            Some("sk_live_secret-3")
        );
    }
}
