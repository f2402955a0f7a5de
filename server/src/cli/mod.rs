//! Subcommands and flags of `asof` (every flag has an `ASOF_*` environment equivalent).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use asof_engine::coverage::Scope;
use asof_engine::{Answer, Corpus, CorpusStore, Instant, Lane, NewsQuery, SourceId};
use asof_server::error::ApiError;
use asof_server::http::envelope::{CoverageBody, Envelope, ErrorBody, NewsRecord, Status};
use asof_server::http::params::{FromQuery, Params, enum_param};
use asof_server::routes::data::{DiffParams, NewsParams};
use clap::{Args, Parser, Subcommand, ValueEnum};

mod files;
mod poll;
mod sql;

/// Exit code when the answer is a coverage hole (409 over HTTP): not an error, not an answer.
const EXIT_HOLE: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "asof",
    version,
    about = "What was knowable then: an as-of information service over public records"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer an as-of query (or a diff with --since) from a corpus on disk.
    Query(QueryArgs),
    /// Run read-only SQL over a corpus's partitions (tables: news, partitions).
    Sql(SqlArgs),
    /// Re-hash every object of the current version against its manifest.
    Verify(CorpusArg),
    /// Rebuild the shipped sample corpus from its raw files (a chain of ordinary ingests, the
    /// last version published alone into an empty --out); prints the corpus_version last.
    BuildSample(BuildSampleArgs),
    /// Ingest agency files of one source as one new corpus version (all or nothing); prints the
    /// corpus_version last.
    Ingest(IngestArgs),
    /// Keep the live lane current: poll EDGAR's current-filings feed and publish each filing
    /// not yet held (forward_first_seen, available_at = the fetch minute).
    Poll(poll::PollArgs),
    /// Write a synthetic EDGAR-like corpus for benchmarks (deterministic by seed); prints the
    /// corpus_version last.
    BenchCorpus(BenchCorpusArgs),
    /// List a corpus's Parquet partitions as files, or download them verified
    /// (`asof files download --out DIR`).
    Files(files::FilesArgs),
    /// Run the HTTP service.
    // Boxed: its many settings would make every other command as large.
    Serve(Box<ServeArgs>),
    /// Manage API keys (operators and tests).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The Delta Lake tables beside the partitions (one per source and lane).
    #[command(subcommand)]
    Delta(DeltaCommand),
}

#[derive(Debug, Subcommand)]
pub enum DeltaCommand {
    /// Write the Delta commits the corpus lacks, replaying its manifest chain oldest first
    /// (a corpus published before the tables existed, or a publisher stopped between its
    /// pointer and its log). Idempotent; prints what it wrote.
    Backfill(CorpusArg),
}

/// The default state store: a SQLite file in `.asof-state/` of the working directory.
const DEFAULT_DATABASE_URL: &str = "sqlite://.asof-state/asof.db";

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
        hide_env_values = true
    )]
    pub database_url: String,
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
    /// Take the client address from X-Forwarded-For (only behind proxies you run): the entry
    /// --trusted-proxies places from the right, never one the client wrote.
    #[arg(long = "trust-forwarded-for", env = "ASOF_TRUST_FORWARDED_FOR")]
    pub trust_forwarded_for: bool,
    /// How many proxies in front of the service append to X-Forwarded-For (a load balancer
    /// alone: 1; a CDN then a load balancer: 2).
    #[arg(
        long = "trusted-proxies",
        env = "ASOF_TRUSTED_PROXIES",
        default_value_t = 1,
        value_parser = clap::value_parser!(u64).range(1..=16)
    )]
    pub trusted_proxies: u64,
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
        default_value_t = asof_engine::scan_pool::DEFAULT_MAX_ROWS,
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
    /// Streams (/v1/stream) one API key may hold open at once on this process.
    #[arg(
        long = "max-streams-per-key",
        env = "ASOF_MAX_STREAMS_PER_KEY",
        default_value_t = 4,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_streams_per_key: u64,
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
    /// E-mail sign-in: the SMTP server sign-in links go out through, in lettre's form
    /// `smtp://[user:pass@]host[:port]` (add `?tls=required` for STARTTLS) or `smtps://...`;
    /// needs --mail-from and --public-url. Unset: e-mail sign-in answers 503.
    #[arg(
        long = "smtp-url",
        env = "ASOF_SMTP_URL",
        requires = "mail_from",
        hide_env_values = true
    )]
    pub smtp_url: Option<String>,
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
        hide_env_values = true
    )]
    pub secret_key: Option<String>,
    /// The signing secret of the webhook endpoint <public-url>/v1/billing/webhook (prefer the
    /// environment variable).
    #[arg(
        long = "billing-webhook-secret",
        env = "ASOF_BILLING_WEBHOOK_SECRET",
        hide_env_values = true
    )]
    pub webhook_secret: Option<String>,
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

/// OpenID Connect settings of sign-in provider A.
#[derive(Debug, Args)]
pub struct ProviderAArgs {
    /// Provider A: the issuer URL (its /.well-known/openid-configuration is read);
    /// unset: provider A sign-in answers 503.
    #[arg(
        id = "provider_a_issuer",
        long = "provider-a-issuer",
        env = "ASOF_PROVIDER_A_ISSUER",
        requires = "provider_a_client_id"
    )]
    pub issuer: Option<String>,
    /// Provider A: the client id registered with the provider.
    #[arg(
        id = "provider_a_client_id",
        long = "provider-a-client-id",
        env = "ASOF_PROVIDER_A_CLIENT_ID"
    )]
    pub client_id: Option<String>,
    /// Provider A: the client secret (prefer the environment variable).
    #[arg(
        id = "provider_a_client_secret",
        long = "provider-a-client-secret",
        env = "ASOF_PROVIDER_A_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// Provider A: the redirect URL registered with the provider; default
    /// <public-url>/v1/auth/provider_a/callback.
    #[arg(
        id = "provider_a_redirect_url",
        long = "provider-a-redirect-url",
        env = "ASOF_PROVIDER_A_REDIRECT_URL"
    )]
    pub redirect_url: Option<String>,
}

/// OpenID Connect settings of sign-in provider B.
#[derive(Debug, Args)]
pub struct ProviderBArgs {
    /// Provider B: the issuer URL (its /.well-known/openid-configuration is read);
    /// unset: provider B sign-in answers 503.
    #[arg(
        id = "provider_b_issuer",
        long = "provider-b-issuer",
        env = "ASOF_PROVIDER_B_ISSUER",
        requires = "provider_b_client_id"
    )]
    pub issuer: Option<String>,
    /// Provider B: the client id registered with the provider.
    #[arg(
        id = "provider_b_client_id",
        long = "provider-b-client-id",
        env = "ASOF_PROVIDER_B_CLIENT_ID"
    )]
    pub client_id: Option<String>,
    /// Provider B: the client secret (prefer the environment variable).
    #[arg(
        id = "provider_b_client_secret",
        long = "provider-b-client-secret",
        env = "ASOF_PROVIDER_B_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// Provider B: the redirect URL registered with the provider; default
    /// <public-url>/v1/auth/provider_b/callback.
    #[arg(
        id = "provider_b_redirect_url",
        long = "provider-b-redirect-url",
        env = "ASOF_PROVIDER_B_REDIRECT_URL"
    )]
    pub redirect_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key (and the user if needed); prints the raw key as the last line.
    Create(KeysCreateArgs),
}

#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    #[arg(
        long = "database-url",
        env = "ASOF_DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL,
        hide_env_values = true
    )]
    pub database_url: String,
    #[arg(long)]
    pub email: String,
    /// researcher, power or desk.
    #[arg(long)]
    pub plan: String,
    #[arg(long, default_value = "default")]
    pub name: Option<String>,
    /// Expiry instant, RFC 3339 UTC with Z, in the future.
    #[arg(long = "expires-at")]
    pub expires_at: Option<String>,
    /// Also write a Delta Sharing profile file holding the new key here (mode 0600), for
    /// `delta_sharing.load_as_pandas("<file>#asof.sec_edgar.certified_pit")` and Spark.
    #[arg(long = "delta-sharing-profile")]
    pub delta_sharing_profile: Option<PathBuf>,
    /// The service's public origin the profile points at (its `/delta-sharing` endpoint).
    #[arg(
        long = "public-url",
        env = "ASOF_PUBLIC_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub public_url: String,
}

/// The shipped sample corpus: the repository root (manifests/ and snapshots/).
fn default_corpus() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/..").to_owned()
}

#[derive(Debug, Args)]
pub struct CorpusArg {
    /// Corpus location: a directory or an object-store URL (s3://, gs://, az://, file://).
    #[arg(long, global = true, env = "ASOF_CORPUS", default_value_t = default_corpus())]
    pub corpus: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Json,
    Csv,
    Table,
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// Ticker, resolved to CIKs through identity as of the cut.
    #[arg(long)]
    pub ticker: Option<String>,
    /// CIK, with or without leading zeros.
    #[arg(long)]
    pub cik: Option<String>,
    /// The cut: RFC 3339 UTC with a literal Z.
    #[arg(long = "as-of")]
    pub as_of: String,
    /// published_at (default), available_at or committed_at.
    #[arg(long = "visible-by")]
    pub visible_by: Option<String>,
    /// certified_pit (default) or forward_first_seen.
    #[arg(long)]
    pub lane: Option<String>,
    /// Source id; defaults to sec.edgar.
    #[arg(long)]
    pub source: Option<String>,
    /// Start of a diff window (exclusive): rows that became visible after it, up to --as-of.
    #[arg(long)]
    pub since: Option<String>,
    /// Rows to print: 1 to 1000, default 100.
    #[arg(long)]
    pub limit: Option<String>,
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    #[command(flatten)]
    pub corpus: CorpusArg,
    /// A read-only SELECT (DDL, DML and other statements are refused). Without one, statements
    /// are read from standard input: at a terminal, a prompt (end each statement with `;`,
    /// `.quit` to leave; arrow keys recall earlier statements, kept in `ASOF_SQL_HISTORY`,
    /// by default `~/.asof_sql_history`); otherwise a script, each statement's answer in turn.
    pub sql: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: SqlFormat,
    /// Write the answer to this file instead of standard output, streamed in bounded memory
    /// (required for parquet). The file appears only once the answer is whole: a failed query
    /// leaves no partial file and never replaces an existing one.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// After the answer, print to standard error the rows written, the wall time and the
    /// process's peak resident memory (where the system reports it).
    #[arg(long)]
    pub stats: bool,
    /// Mebibytes the query's sorts, joins and aggregations may hold before they spill to
    /// temporary files.
    #[arg(
        long = "memory-limit-mb",
        env = "ASOF_SQL_MEMORY_MB",
        default_value_t = (asof_engine::sql::MEMORY_POOL_BYTES >> 20) as u64,
        value_parser = clap::value_parser!(u64).range(16..)
    )]
    pub memory_limit_mb: u64,
    /// Progress of a query that runs longer than a second, on standard error: time, bytes
    /// read, rows answered. `auto`: a live line when standard error is a terminal; `always`:
    /// also a line a second, and a last one, when it is not (a log); `never`.
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: SqlProgress,
}

/// When `asof sql` shows a query's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlProgress {
    Auto,
    Always,
    Never,
}

/// How `asof sql` writes its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SqlFormat {
    /// A text table (reads the whole answer first, to size its columns).
    Table,
    Csv,
    /// One JSON array of objects.
    Json,
    /// A Parquet file (with --out), Snappy-compressed, the answer's Arrow schema.
    Parquet,
}

#[derive(Debug, Args)]
pub struct BuildSampleArgs {
    /// Where to write the corpus (manifests/ and snapshots/ are created under it); a directory
    /// that holds a corpus already is refused.
    #[arg(long)]
    pub out: PathBuf,
    /// The raw input files (defaults to this repository's snapshots/sources).
    #[arg(long, env = "ASOF_SAMPLE_SOURCES")]
    pub sources: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The corpus to publish into: a directory (created when missing) or an object-store URL.
    #[arg(long, env = "ASOF_INGEST_CORPUS")]
    pub corpus: String,
    /// Source namespace of the files (sec.edgar, us.federal_register.pi, us.cftc.cot,
    /// us.ofac.sdn, us.fda.enforcement.drug|device|food, gleif.lei).
    #[arg(long, env = "ASOF_INGEST_SOURCE")]
    pub source: String,
    /// certified_pit (default) or forward_first_seen (the EDGAR current-filings feed).
    #[arg(long, env = "ASOF_INGEST_LANE", default_value = "certified_pit")]
    pub lane: String,
    /// committed_at of the rows added (RFC 3339 UTC with Z; default: now). The same inputs and
    /// commit time give the same corpus_version.
    #[arg(long = "commit-time", env = "ASOF_INGEST_COMMIT_TIME")]
    pub commit_time: Option<String>,
    /// When the files were captured, for sources whose files do not say (list snapshots,
    /// cumulative files); default: the commit time (gleif.lei: none, its files say; a golden
    /// copy named otherwise than GLEIF names it needs this).
    #[arg(long = "captured-at", env = "ASOF_INGEST_CAPTURED_AT")]
    pub captured_at: Option<String>,
    /// Source-days stated complete: YYYY-MM-DD..YYYY-MM-DD (inclusive) or one day, on top of
    /// the whole days the files imply (a daily index's day, a full list's capture day); `none`:
    /// no day at all, not even those (the rows are held, their days stay holes).
    #[arg(long, env = "ASOF_INGEST_CERTIFY")]
    pub certify: Option<String>,
    /// Leave out rows whose day is before this one (YYYY-MM-DD), and certify no day before it.
    #[arg(long, env = "ASOF_INGEST_SINCE")]
    pub since: Option<String>,
    /// Take only the files' identity observations (SEC ticker lists, submissions captures):
    /// no rows, no list change rows, no certification.
    #[arg(long = "identity-only", env = "ASOF_INGEST_IDENTITY_ONLY")]
    pub identity_only: bool,
    /// The source's note in the manifest, shown by `/v1/meta` (what the corpus holds of it).
    #[arg(long, env = "ASOF_INGEST_NOTE")]
    pub note: Option<String>,
    /// A JSON file with the corpus's public sample set (`source_id`, `lane`, `days`,
    /// `examples`), which anonymous callers may query; replaces the one held.
    #[arg(long = "sample-set", env = "ASOF_INGEST_SAMPLE_SET")]
    pub sample_set: Option<PathBuf>,
    /// The files to ingest.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchCorpusArgs {
    /// Filing rows to generate (corrections add about one revision per thousand on top).
    #[arg(long, env = "ASOF_BENCH_ROWS")]
    pub rows: u64,
    /// Consecutive UTC days, ending on --last-day.
    #[arg(long, env = "ASOF_BENCH_DAYS")]
    pub days: u32,
    /// Distinct filers (CIKs), drawn with Zipf skew.
    #[arg(long, env = "ASOF_BENCH_CIKS")]
    pub ciks: u32,
    #[arg(long, env = "ASOF_BENCH_SEED", default_value_t = 1)]
    pub seed: u64,
    /// The last day of the corpus (its last two days are left uncertified).
    #[arg(
        long = "last-day",
        env = "ASOF_BENCH_LAST_DAY",
        default_value = "2026-01-31"
    )]
    pub last_day: String,
    /// When the certified days count as certified (default: the corpus's commit instant,
    /// after its last day, so `committed_at` cuts inside the span are holes); an instant
    /// before the first day makes them answerable, for benchmarks of that clock.
    #[arg(long = "certified-at", env = "ASOF_BENCH_CERTIFIED_AT")]
    pub certified_at: Option<String>,
    /// The last this many days also held in the forward lane (`forward_first_seen`, with
    /// `available_at` the minute the feed showed each filing), for benchmarks of that lane.
    #[arg(
        long = "forward-days",
        env = "ASOF_BENCH_FORWARD_DAYS",
        default_value_t = 0
    )]
    pub forward_days: u32,
    /// Where to write the corpus (an empty directory, or an object-store URL).
    #[arg(long, env = "ASOF_BENCH_OUT")]
    pub out: String,
}

pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Query(a) => query(a).await,
        Command::Sql(a) => sql::run(a).await,
        Command::Verify(a) => verify(a).await,
        Command::BuildSample(a) => build_sample(a).await,
        Command::BenchCorpus(a) => bench_corpus(a).await,
        Command::Ingest(a) => ingest(a).await,
        Command::Files(a) => files::files(a).await,
        Command::Poll(a) => poll::poll(a).await,
        Command::Serve(a) => serve(*a).await,
        Command::Keys(KeysCommand::Create(a)) => keys_create(a).await,
        Command::Delta(DeltaCommand::Backfill(a)) => delta_backfill(a).await,
    };
    match result {
        Ok(code) => code,
        // `asof query ... | head`: the reader left; there is nobody to tell.
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

pub(crate) type CliResult = Result<ExitCode, Box<dyn std::error::Error>>;

/// Whether an error comes from a full disk (`ENOSPC`) anywhere down its chain of causes.
fn disk_full(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && (io.kind() == std::io::ErrorKind::StorageFull || io.raw_os_error() == Some(28))
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// Whether writing the output failed because its reader closed the pipe (through the
/// writers' own error types: JSON, CSV and Arrow wrap the `io::Error`).
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        let kind = if let Some(io) = e.downcast_ref::<std::io::Error>() {
            Some(io.kind())
        } else if let Some(j) = e.downcast_ref::<serde_json::Error>() {
            j.io_error_kind()
        } else if let Some(c) = e.downcast_ref::<csv::Error>() {
            match c.kind() {
                csv::ErrorKind::Io(io) => Some(io.kind()),
                _ => None,
            }
        } else if let Some(arrow::error::ArrowError::IoError(_, io)) =
            e.downcast_ref::<arrow::error::ArrowError>()
        {
            Some(io.kind())
        } else {
            None
        };
        if kind == Some(std::io::ErrorKind::BrokenPipe) {
            return true;
        }
        cur = e.source();
    }
    false
}

pub(crate) async fn open(corpus: &str) -> Result<Corpus, asof_engine::Error> {
    Corpus::open(CorpusStore::open(corpus)?).await
}

/// Each `asof query` flag and the HTTP query parameter it fills: the flags are parsed by the
/// routes' own query structs, so the CLI refuses what the API refuses, with its messages.
const QUERY_FLAGS: &[(&str, &str)] = &[
    ("ticker", "--ticker"),
    ("cik", "--cik"),
    ("as_of", "--as-of"),
    ("as_of_end", "--as-of"),
    ("as_of_start", "--since"),
    ("visible_by", "--visible-by"),
    ("lane", "--lane"),
    ("source", "--source"),
    ("limit", "--limit"),
];

/// An API refusal, said with the flag's name instead of the parameter's.
fn flag_error(e: ApiError) -> Box<dyn std::error::Error> {
    let param = e.param();
    let flag = QUERY_FLAGS
        .iter()
        .find(|(p, _)| Some(*p) == param.as_deref())
        .map_or_else(
            || param.clone().unwrap_or_default(),
            |(_, f)| (*f).to_owned(),
        );
    format!("{flag}: {}", e.message()).into()
}

/// The engine query `asof query` runs: a diff window with `--since`, else a cut.
fn query_of(a: &QueryArgs, corpus: &Corpus) -> Result<NewsQuery, ApiError> {
    let (cut_name, names) = match a.since {
        None => ("as_of", NewsParams::NAMES),
        Some(_) => ("as_of_end", DiffParams::NAMES),
    };
    let pairs = [
        ("ticker", a.ticker.as_ref()),
        ("cik", a.cik.as_ref()),
        (cut_name, Some(&a.as_of)),
        ("as_of_start", a.since.as_ref()),
        ("visible_by", a.visible_by.as_ref()),
        ("lane", a.lane.as_ref()),
        ("source", a.source.as_ref()),
        ("limit", a.limit.as_ref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_owned(), v?.clone())));
    let params = Params::from_pairs(pairs, names)?;
    match a.since {
        None => NewsParams::from_params(&params)?.to_query(corpus),
        Some(_) => {
            let d = DiffParams::from_params(&params)?;
            // The API answers a backwards window as empty (its description cannot relate two
            // parameters); at a terminal a reversed pair is far likelier a slip, so say so.
            if d.as_of_start > d.as_of_end {
                return Err(ApiError::invalid(
                    "as_of_start",
                    "as_of_start must not be after as_of_end",
                ));
            }
            d.to_query(corpus)
        }
    }
}

async fn query(a: QueryArgs) -> CliResult {
    let corpus = open(&a.corpus.corpus).await?;
    let q = query_of(&a, &corpus).map_err(flag_error)?;
    let (as_of, visible_by) = (q.as_of, q.visible_by);
    let answer = corpus.news(&q, Scope::Corpus).await?;
    let (rows, next, coverage, hole) = match answer {
        Answer::Page {
            rows,
            next,
            coverage,
        } => (rows, next, coverage, false),
        Answer::Hole { coverage } => (vec![], None, coverage, true),
    };
    let records: Vec<NewsRecord> = rows
        .into_iter()
        .map(|r| NewsRecord::from_row(r, false))
        .collect();
    let env = Envelope {
        request_id: String::new(),
        corpus_version: corpus.version().to_owned(),
        as_of: Some(as_of),
        visible_by: Some(visible_by.to_string()),
        status: if hole { Status::CoverageMissing } else { Status::Ok },
        count: (!hole).then_some(records.len()),
        results: records,
        next_cursor: None,
        coverage: CoverageBody::from(coverage),
        error: hole.then(|| ErrorBody {
            code: "coverage_missing".into(),
            message: "the cut depends on source-days or identity intervals the corpus does not hold; see coverage.missing".into(),
            param: None,
        }),
        sample: None,
        origin: None,
        cached: None,
    };
    let mut out = std::io::stdout().lock();
    match a.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, &env)?;
            writeln!(out)?;
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut out);
            w.write_record([
                "published_at",
                "id",
                "form",
                "cik",
                "acceptance_at",
                "available_at",
                "committed_at",
                "revision_id",
                "title",
                "source_locator",
            ])?;
            for r in &env.results {
                let s = |i: Option<Instant>| i.map(|i| i.to_string()).unwrap_or_default();
                w.write_record([
                    s(r.published_at),
                    r.id.clone(),
                    r.form.clone().unwrap_or_default(),
                    r.cik.clone().unwrap_or_default(),
                    s(r.acceptance_at),
                    s(r.available_at),
                    s(r.committed_at),
                    r.revision_id.clone(),
                    r.title.clone(),
                    r.source_locator.clone(),
                ])?;
            }
            w.flush()?;
        }
        Format::Table => {
            writeln!(
                out,
                "corpus_version {}  as_of {}  visible_by {}  status {}",
                env.corpus_version,
                as_of,
                visible_by,
                env.status.as_str()
            )?;
            for r in &env.results {
                let p = r
                    .published_at
                    .map(|i| i.to_string())
                    .unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{p:<22} {:<32} {:<10} {}",
                    r.id,
                    r.form.as_deref().unwrap_or("-"),
                    r.title
                )?;
            }
            if hole {
                writeln!(out, "coverage missing: {}", env.coverage.missing.join(", "))?;
            } else {
                writeln!(out, "{} row(s)", env.results.len())?;
            }
        }
    }
    let _ = next;
    Ok(if hole {
        ExitCode::from(EXIT_HOLE)
    } else {
        ExitCode::SUCCESS
    })
}

async fn verify(a: CorpusArg) -> CliResult {
    let store = CorpusStore::open(&a.corpus)?;
    let v = asof_engine::verify::verify(&store, None).await?;
    println!(
        "ok: {} partitions, {} rows, {} other objects",
        v.partitions, v.rows, v.other_objects
    );
    let d = asof_engine::delta::check(&store, &v.version).await?;
    println!(
        "ok: {} Delta tables, {} commits re-derived and equal{}",
        d.tables,
        d.commits,
        if d.behind > 0 {
            format!(
                "; {} commits not written yet (`asof delta backfill` writes them)",
                d.behind
            )
        } else {
            String::new()
        }
    );
    println!("{}", v.version);
    Ok(ExitCode::SUCCESS)
}

async fn delta_backfill(a: CorpusArg) -> CliResult {
    let store = CorpusStore::open(&a.corpus)?;
    let (version, _) = store.current().await?;
    let s = asof_engine::delta::sync(&store, &version).await?;
    println!(
        "wrote {} Delta commits for {} corpus versions",
        s.commits, s.versions
    );
    println!("{version}");
    Ok(ExitCode::SUCCESS)
}

async fn build_sample(a: BuildSampleArgs) -> CliResult {
    let sources = a
        .sources
        .unwrap_or_else(asof_ingest::corpora::sample::default_sources_dir);
    let store = CorpusStore::local(&a.out)?;
    let p = asof_ingest::corpora::sample::build_sample(&sources, &store).await?;
    eprintln!(
        "published {} rows ({} unchanged)",
        p.rows_added, p.rows_unchanged
    );
    println!("{}", p.version);
    Ok(ExitCode::SUCCESS)
}

async fn ingest(a: IngestArgs) -> CliResult {
    use asof_ingest::pipeline::{self, Request, Step};
    let source: SourceId =
        enum_param("--source", &a.source, SourceId::valid_set).map_err(flag_error)?;
    let lane: Lane = enum_param("--lane", &a.lane, Lane::valid_set).map_err(flag_error)?;
    let commit_time = match &a.commit_time {
        Some(t) => Instant::parse_param("commit-time", t)?,
        None => Instant::now(),
    };
    let captured_at = match &a.captured_at {
        Some(t) => Some(Instant::parse_param("captured-at", t)?),
        // GLEIF's files carry their publish instant (API responses in `meta`, golden copies
        // in their name): a default here would contradict a golden copy's name.
        None if source == SourceId::GleifLei => None,
        None => Some(commit_time),
    };
    let no_implied_certification = a.certify.as_deref() == Some("none");
    let certify = a
        .certify
        .as_deref()
        .filter(|c| *c != "none")
        .map(pipeline::parse_day_range)
        .transpose()?;
    let since = a
        .since
        .as_deref()
        .map(|d| {
            d.parse::<asof_engine::clock::Day>()
                .map_err(|()| format!("--since {d:?}: expected one day, YYYY-MM-DD"))
        })
        .transpose()?;
    let sample = match &a.sample_set {
        Some(path) => {
            let bytes =
                std::fs::read(path).map_err(|e| format!("--sample-set {}: {e}", path.display()))?;
            Some(
                serde_json::from_slice::<asof_engine::manifest::SampleSet>(&bytes)
                    .map_err(|e| format!("--sample-set {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    if a.note.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err("--note: give the text of the note (it replaces the source's note)".into());
    }
    if !a.corpus.contains("://") {
        std::fs::create_dir_all(&a.corpus)?;
    }
    let store = CorpusStore::open(&a.corpus)?;
    // Every file is checked to be readable before any is parsed (a missing file fails fast);
    // adapters read them as they parse (a golden copy as a stream, never whole).
    let files = pipeline::read_files(&a.files)?;
    let total_bytes: u64 = a
        .files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .expect("valid template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let req = Request {
        source,
        lane,
        commit_time,
        captured_at,
        certify,
        files,
        options: pipeline::Options {
            since,
            no_implied_certification,
            identity_only: a.identity_only,
            note: a.note,
            sample,
        },
    };
    let progress = |s: Step| match s {
        Step::Parsed(0, total) => bar.set_message(format!(
            "parsing {total} files ({})",
            indicatif::HumanBytes(total_bytes)
        )),
        Step::Parsed(done, total) => bar.set_message(format!("parsed {done}/{total} files")),
        Step::Comparing => bar.set_message("comparing with the current version"),
        Step::Publishing => bar.set_message("publishing partitions, access files and manifest"),
    };
    let before = store.current_version().await.ok().flatten();
    let outcome = pipeline::ingest(&store, req, &progress).await;
    bar.finish_and_clear();
    let outcome = match outcome {
        Err(e) if disk_full(&e) => {
            return Err(format!(
                "the disk holding the corpus ({}) is full: nothing was published, and {} stays current; free space and run the same command again (the objects already written are reused)",
                store.display(),
                before.as_deref().unwrap_or("no version")
            )
            .into());
        }
        r => r?,
    };
    let p = &outcome.published;
    if p.changed {
        eprintln!(
            "published {} new rows ({} unchanged){}{}{}",
            p.rows_added,
            p.rows_unchanged,
            if outcome.observations == 0 {
                String::new()
            } else {
                format!(
                    "; identity: {} new observation(s) folded into the ticker intervals",
                    outcome.observations
                )
            },
            if outcome.changes.is_empty() {
                String::new()
            } else {
                format!(
                    "; list changes: {}",
                    outcome
                        .changes
                        .iter()
                        .map(|(k, n)| format!("{n} {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            if outcome.certified.is_empty() {
                String::new()
            } else {
                format!(
                    "; certified {}",
                    outcome
                        .certified
                        .iter()
                        .map(|(a, b)| if a == b {
                            a.to_string()
                        } else {
                            format!("{a}..{b}")
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    } else {
        eprintln!(
            "nothing new ({} rows already held): no version written",
            p.rows_unchanged
        );
    }
    println!("{}", p.version);
    Ok(ExitCode::SUCCESS)
}

async fn bench_corpus(a: BenchCorpusArgs) -> CliResult {
    let last_day = asof_engine::Day::parse_param("last-day", &a.last_day)?;
    let store = CorpusStore::open(&a.out)?;
    if store.current_version().await?.is_some() {
        return Err(format!("{} already holds a corpus; give an empty --out", a.out).into());
    }
    let spec = asof_ingest::corpora::synthetic::Spec {
        rows: a.rows,
        days: a.days,
        ciks: a.ciks,
        seed: a.seed,
        last_day,
        certified_at: a
            .certified_at
            .as_deref()
            .map(|s| asof_engine::Instant::parse_param("certified-at", s))
            .transpose()?,
        forward_days: a.forward_days,
    };
    let bar = indicatif::ProgressBar::new(a.rows);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})",
        )?
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let built =
        asof_ingest::corpora::synthetic::build(&store, &spec, &|done| bar.set_position(done))
            .await?;
    bar.finish_and_clear();
    eprintln!(
        "wrote {} rows in {} partitions ({} uncertified days, {} certified empty days) in {:.1} s",
        built.rows,
        built.partitions,
        built.hole_days,
        built.empty_certified_days,
        started.elapsed().as_secs_f64()
    );
    println!("{}", built.version);
    Ok(ExitCode::SUCCESS)
}

/// A share of the cores: a decimal in (0, 1].
fn parse_share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!(
            "a share of the cores in (0, 1], such as 0.25, not {s:?}"
        )),
    }
}

/// A `--reload-interval`: decimal seconds, at least 0.1 (a pointer check is cheap, but a
/// tighter loop would only burn a core).
fn interval_seconds(s: &str) -> Result<std::time::Duration, String> {
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

async fn serve(a: ServeArgs) -> CliResult {
    let cfg =
        asof_server::serve::ServeConfig {
            listen: a.listen,
            corpus: a.corpus.corpus,
            database_url: a.database_url,
            reload_interval: a.reload_interval,
            trust_forwarded_for: a.trust_forwarded_for,
            trusted_proxies: a.trusted_proxies as usize,
            public_requests_per_minute: a.public_rate_limit,
            request_timeout: std::time::Duration::from_secs(a.request_timeout),
            max_concurrent_scans: a.max_scans as usize,
            scan_wait: std::time::Duration::from_millis(a.scan_wait_ms),
            scan_threads: a.scan_threads as usize,
            scan_cpu_share: a.scan_cpu_share,
            max_walk_rows: a.max_walk_rows,
            file_url_ttl: std::time::Duration::from_secs(a.file_url_ttl),
            file_requests_per_minute: a.file_rate_limit,
            public_url: a.public_url.clone(),
            max_streams_per_key: a.max_streams_per_key as usize,
            shutdown_grace: std::time::Duration::from_secs(a.shutdown_grace),
            header_read_timeout: std::time::Duration::from_secs(a.header_read_timeout),
            max_connections: a.max_connections as usize,
            sign_in: asof_server::signin::SignInConfig {
                mail: a.smtp_url.zip(a.mail_from),
                provider_a: provider(
                    "provider_a",
                    a.provider_a.issuer,
                    a.provider_a.client_id,
                    a.provider_a.client_secret,
                    a.provider_a.redirect_url,
                    a.public_url.as_deref(),
                )?,
                provider_b: provider(
                    "provider_b",
                    a.provider_b.issuer,
                    a.provider_b.client_id,
                    a.provider_b.client_secret,
                    a.provider_b.redirect_url,
                    a.public_url.as_deref(),
                )?,
            },
            secure_cookies: !a.insecure_cookies,
            billing: asof_server::billing::BillingConfig {
                api_url: a.billing.api_url,
                secret_key: a.billing.secret_key,
                webhook_secret: a.billing.webhook_secret,
                prices: [
                    a.billing.price_researcher,
                    a.billing.price_power,
                    a.billing.price_desk,
                ],
                license_contact: a.billing.license_contact,
            },
            connector: asof_server::connector::ConnectorConfig {
                vendor_a: a.connector.vendor_a_url.map(|url| {
                    asof_server::connector::VendorConfig {
                        url,
                        license_class: a.connector.vendor_a_license_class,
                    }
                }),
                vendor_b: a.connector.vendor_b_url.map(|url| {
                    asof_server::connector::VendorConfig {
                        url,
                        license_class: a.connector.vendor_b_license_class,
                    }
                }),
                ..Default::default()
            },
        };
    asof_server::serve::serve(cfg).await?;
    Ok(ExitCode::SUCCESS)
}

/// One provider's settings from its flags: none without an issuer; the redirect URL defaults
/// to the public URL's callback path.
fn provider(
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

async fn keys_create(a: KeysCreateArgs) -> CliResult {
    let plan: asof_server::plan::Plan = a.plan.parse().map_err(|()| {
        asof_engine::Error::invalid(
            "--plan",
            format!("{:?} is not one of: researcher, power, desk", a.plan),
        )
    })?;
    if !a.email.contains('@') {
        return Err(asof_engine::Error::invalid("--email", "not an e-mail address").into());
    }
    let expires_at = a
        .expires_at
        .as_deref()
        .map(|s| Instant::parse_param("--expires-at", s))
        .transpose()?;
    if expires_at.is_some_and(|e| e <= Instant::now()) {
        return Err(asof_engine::Error::invalid("--expires-at", "must be in the future").into());
    }
    let store = asof_server::state::open(&a.database_url).await?;
    let user = store.upsert_user(&a.email, plan).await?;
    let (key, raw) = store
        .create_key(&user.id, a.name.as_deref().unwrap_or("default"), expires_at)
        .await?;
    eprintln!(
        "created {} ({}) for {} on plan {}",
        key.id, key.prefix, user.email, user.plan
    );
    if let Some(path) = &a.delta_sharing_profile {
        write_profile(path, &a.public_url, &raw, expires_at)?;
        eprintln!("wrote the Delta Sharing profile {}", path.display());
    }
    println!("{raw}");
    Ok(ExitCode::SUCCESS)
}

/// A Delta Sharing profile file (`shareCredentialsVersion` 1): the endpoint, the key as its
/// bearer token and, when the key expires, when. Written owner-readable only: it is a secret.
fn write_profile(
    path: &std::path::Path,
    public_url: &str,
    key: &str,
    expires_at: Option<Instant>,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = url::Url::parse(public_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            asof_engine::Error::invalid(
                "--public-url",
                "an http(s) origin such as https://asof.example",
            )
        })?;
    let mut profile = serde_json::json!({
        "shareCredentialsVersion": 1,
        "endpoint": format!("{}/delta-sharing", url.as_str().trim_end_matches('/')),
        "bearerToken": key,
    });
    if let Some(e) = expires_at {
        profile["expirationTime"] = serde_json::Value::String(e.to_string());
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts
        .open(path)
        .map_err(|e| format!("--delta-sharing-profile {}: {e}", path.display()))?;
    writeln!(f, "{}", serde_json::to_string_pretty(&profile)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_defaults_to_loopback_8080_the_shipped_corpus_and_a_local_sqlite_file() {
        // The defaults only: an operator's ASOF_* variables would override them.
        if std::env::vars().any(|(k, _)| k.starts_with("ASOF_")) {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: serve defaults (ASOF_* variables are set in this environment)"
            );
            return;
        }
        let Command::Serve(a) = Cli::try_parse_from(["asof", "serve"]).unwrap().command else {
            panic!("serve parses as serve");
        };
        assert_eq!(a.listen, "127.0.0.1:8080");
        assert_eq!(a.database_url, "sqlite://.asof-state/asof.db");
        assert_eq!(a.corpus.corpus, default_corpus());
        assert!(
            std::path::Path::new(&a.corpus.corpus)
                .join("manifests/CURRENT")
                .is_file(),
            "the default corpus is the shipped sample"
        );
        assert_eq!(a.reload_interval, std::time::Duration::from_secs(1));
        assert_eq!(a.max_streams_per_key, 4);
        assert_eq!(a.public_rate_limit, 120);
        assert_eq!(a.request_timeout, 30);
        assert_eq!(a.max_scans, 8);
        assert_eq!(a.scan_wait_ms, 2000);
        assert_eq!(a.scan_cpu_share, 0.25);
        assert!(!a.trust_forwarded_for);
        assert!(Cli::try_parse_from(["asof", "serve", "--public-rate-limit", "0"]).is_err());
        for bad in ["0", "-0.5", "1.5", "NaN", "half"] {
            assert!(
                Cli::try_parse_from(["asof", "serve", "--scan-cpu-share", bad]).is_err(),
                "--scan-cpu-share {bad} is refused"
            );
        }
    }

    #[test]
    fn the_reload_interval_takes_decimal_seconds_from_a_tenth_up() {
        assert_eq!(
            interval_seconds("0.25"),
            Ok(std::time::Duration::from_millis(250))
        );
        assert_eq!(interval_seconds("2"), Ok(std::time::Duration::from_secs(2)));
        for bad in ["0.05", "0", "-1", "1e9", "soon", ""] {
            assert!(interval_seconds(bad).is_err(), "{bad}");
        }
    }
}
