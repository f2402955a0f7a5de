//! What the service measures about itself: every metric's name, help text and bounded label
//! values, in one place, so the code that records a metric and the exposition that describes
//! it cannot name it differently.
//!
//! The code records through the `metrics` facade; with no recorder installed (no
//! `--metrics-listen`, the CLI, the Python package) every record is a no-op. Two kinds of
//! metric, by where their value lives:
//!
//! - counters and histograms are recorded where the event happens (a request answered, a
//!   reload refused, a scan waiting for a slot);
//! - gauges are snapshots of state the service keeps anyway (the served version, the audit
//!   queue, open streams), set by `crate::ops::collect` just before each scrape renders. The
//!   exporter forgets a gauge not set by the last scrape, which is how a replaced
//!   `corpus_version` leaves `asof_corpus_info` instead of staying at 0 for ever.
//!
//! Every label value comes from a closed set (route table entries, error codes, plans, tool
//! names, outcome words): nothing a client sends reaches a label, so the number of series does
//! not grow with traffic (`server/tests/metrics.rs` sends 10,000 random requests to check).
//! Keys, tokens and paths as sent never do either.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

// ---- HTTP --------------------------------------------------------------------------------

/// Requests answered, by route entry (the table's path pattern, `unmatched` for none), method,
/// status class and the caller's plan (`none` without a key).
pub const HTTP_REQUESTS: &str = "asof_http_requests_total";
/// Time from the request's arrival to its response head, by route entry and method.
pub const HTTP_DURATION: &str = "asof_http_request_duration_seconds";
/// Error envelopes sent, by `error.code` and status class.
pub const HTTP_ERRORS: &str = "asof_http_errors_total";
/// Requests refused before their handler, by reason: `rate_limited`, `plan`, `unauthenticated`.
pub const HTTP_REFUSALS: &str = "asof_http_refusals_total";

// ---- scan pool -----------------------------------------------------------------------------

/// Walks and scans waiting for a slot of the scan pool (gauge).
pub const SCAN_QUEUED: &str = "asof_scan_queue_depth";
/// Walks and scans running on the pool (gauge).
pub const SCAN_RUNNING: &str = "asof_scan_running";
/// Time a walk or scan waited for a slot (refused ones included).
pub const SCAN_WAIT: &str = asof_engine::read::scan_pool::METRIC_WAIT;
/// Walks and scans refused, by reason: `busy` (no slot in time), `too_broad` (row budget).
pub const SCAN_REJECTED: &str = asof_engine::read::scan_pool::METRIC_REJECTED;
/// Rows walks and scans looked at.
pub const SCAN_ROWS: &str = asof_engine::read::scan_pool::METRIC_ROWS;
/// Partitions walks opened (each read from its page index on, never whole).
pub const SCAN_PARTITIONS: &str = asof_engine::read::scan_pool::METRIC_PARTITIONS;

// ---- corpus --------------------------------------------------------------------------------

/// The served version (gauge, 1, label `corpus_version`).
pub const CORPUS_INFO: &str = "asof_corpus_info";
/// When the served version was published (its manifest's `created_at`).
pub const CORPUS_CREATED: &str = "asof_corpus_created_timestamp_seconds";
/// Seconds since the served version was published: how long the pointer has not moved, as
/// far as this replica knows.
pub const CORPUS_AGE: &str = "asof_corpus_age_seconds";
/// The replica's `--reload-interval`, for rules that compare replicas over it.
pub const CORPUS_RELOAD_INTERVAL: &str = "asof_corpus_reload_interval_seconds";
/// New versions taken in.
pub const CORPUS_RELOADS: &str = "asof_corpus_reloads_total";
/// Pointer checks or new versions refused, by reason: `pointer_unreadable`,
/// `pointer_missing`, `manifest`, `verification`, `open`.
pub const CORPUS_RELOAD_FAILURES: &str = "asof_corpus_reload_failures_total";
/// Time to verify and open a new version.
pub const CORPUS_RELOAD_DURATION: &str = "asof_corpus_reload_duration_seconds";

// ---- audit receipts ------------------------------------------------------------------------

/// Receipts waiting to be written (gauge).
pub const AUDIT_QUEUED: &str = "asof_audit_queue_depth";
/// Receipts by what became of them: `written`, `dropped` (queue full), `failed` (write error).
pub const AUDIT_RECEIPTS: &str = "asof_audit_receipts_total";
/// Receipts asked for and never written: `dropped + failed`.
pub const AUDIT_LOST: &str = "asof_audit_lost_total";

// ---- stream and MCP ------------------------------------------------------------------------

/// `/v1/stream` connections open on this process (gauge).
pub const STREAMS_OPEN: &str = "asof_streams_open";
/// Row events sent to stream clients.
pub const STREAM_EVENTS: &str = "asof_stream_events_total";
/// Stream clients disconnected, by reason: `behind` (too far behind), `evicted` (position no
/// longer held), `shutdown`.
pub const STREAM_CLOSED: &str = "asof_stream_clients_closed_total";
/// MCP sessions begun (`initialize` answered).
pub const MCP_SESSIONS: &str = "asof_mcp_sessions_total";
/// MCP tool calls, by tool (`unknown` for a name the server does not offer) and outcome
/// (`ok`, `error`).
pub const MCP_TOOL_CALLS: &str = "asof_mcp_tool_calls_total";

// ---- state store and outbound calls --------------------------------------------------------

/// Time of the state store's work, by operation: the store method's name (`key_by_hash`,
/// `hit_many`, `add_usage`, `append_receipt`, `purge_windows`, `ping`, ...), whatever number of
/// statements it runs (see [`store_op`]).
pub const STATE_DURATION: &str = "asof_state_operation_duration_seconds";
/// State store errors, by operation (as above).
pub const STATE_ERRORS: &str = "asof_state_errors_total";
/// Failed statements of the state store, whatever the operation (sign-in, keys, billing
/// included), by kind: `database`, `io`, `tls`, `protocol`, `row_not_found`,
/// `pool_timed_out`, `pool_closed`, `decode`, `other`.
pub const STATE_STATEMENT_ERRORS: &str = "asof_state_statement_errors_total";
/// Sign-in mails, by outcome: `sent`, `failed`.
pub const SIGNIN_MAILS: &str = "asof_signin_mails_total";
/// Payment processor notifications, by outcome: `applied`, `replayed`, `ignored`,
/// `bad_signature`, `invalid`, `error`.
pub const BILLING_WEBHOOKS: &str = "asof_billing_webhooks_total";
/// Connector calls to market-data vendors, by vendor and outcome: `ok`, `refused`,
/// `rate_limited`, `not_found`, `error`.
pub const CONNECTOR_CALLS: &str = "asof_connector_calls_total";

// ---- process -------------------------------------------------------------------------------

/// 1 while the replica is ready for traffic (`GET /ready` answers 200), else 0 (gauge).
pub const READY: &str = "asof_ready";

// ---- asof poll -----------------------------------------------------------------------------

/// When the last poll round finished without error.
pub const POLL_LAST_SUCCESS: &str = asof_ingest::poll::METRIC_LAST_SUCCESS;
/// Poll rounds, by outcome: `ok`, `failed`.
pub const POLL_ROUNDS: &str = asof_ingest::poll::METRIC_ROUNDS;
/// Filings seen for the first time (published into the forward lane).
pub const POLL_FIRST_SEEN: &str = asof_ingest::poll::METRIC_FIRST_SEEN;
/// Seconds between a filing's acceptance by EDGAR and the poller's first sight of it.
pub const POLL_LAG: &str = asof_ingest::poll::METRIC_LAG;
/// Source-days certified as wholly held (one per day).
pub const POLL_CERTIFIED_DAYS: &str = asof_ingest::poll::METRIC_CERTIFIED_DAYS;
/// Waits the poller made after EDGAR refused or failed a request.
pub const POLL_BACKOFFS: &str = asof_ingest::poll::METRIC_BACKOFFS;

/// Whether this process installed its recorder (`crate::ops::Exporter::install`). Without
/// one every metric is a no-op, and the per-request ones are skipped before their keys are
/// built (a key with runtime labels is a vector and a hash of every label).
static RECORDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks the recorder installed (once per process, by the exporter).
pub(crate) fn set_recording() {
    RECORDING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether metrics are kept in this process.
pub fn recording() -> bool {
    RECORDING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Histogram buckets for request and operation latencies: from 100 µs, so the by-filer hot
/// path (a fraction of a millisecond) is resolved, to the 30 s request timeout.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Buckets for the poller's first-sight lag: seconds to a day.
pub const LAG_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0,
];

/// Describes every metric of `asof serve` to the installed recorder (help text and unit).
pub fn describe_serve() {
    describe_counter!(
        HTTP_REQUESTS,
        "Requests answered, by route entry, method, status class and plan."
    );
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "Time to the response head, by route entry and method."
    );
    describe_counter!(
        HTTP_ERRORS,
        "Error envelopes sent, by error code and status class."
    );
    describe_counter!(
        HTTP_REFUSALS,
        "Requests refused before their handler, by reason."
    );
    describe_gauge!(
        SCAN_QUEUED,
        "Walks and scans waiting for a slot of the scan pool."
    );
    describe_gauge!(SCAN_RUNNING, "Walks and scans running on the scan pool.");
    describe_histogram!(
        SCAN_WAIT,
        Unit::Seconds,
        "Time a walk or scan waited for a slot of the scan pool."
    );
    describe_counter!(
        SCAN_REJECTED,
        "Walks and scans refused, by reason (busy, too_broad)."
    );
    describe_counter!(SCAN_ROWS, "Rows walks and scans looked at.");
    describe_counter!(SCAN_PARTITIONS, "Partitions walks opened.");
    describe_gauge!(
        CORPUS_INFO,
        "The corpus version this replica serves (value 1)."
    );
    describe_gauge!(
        CORPUS_CREATED,
        Unit::Seconds,
        "When the served corpus version was published (Unix seconds)."
    );
    describe_gauge!(
        CORPUS_AGE,
        Unit::Seconds,
        "Seconds since the served corpus version was published."
    );
    describe_gauge!(
        CORPUS_RELOAD_INTERVAL,
        Unit::Seconds,
        "Seconds between this replica's checks of the corpus pointer."
    );
    describe_counter!(CORPUS_RELOADS, "New corpus versions taken in.");
    describe_counter!(
        CORPUS_RELOAD_FAILURES,
        "Pointer checks or new versions refused, by reason."
    );
    describe_histogram!(
        CORPUS_RELOAD_DURATION,
        Unit::Seconds,
        "Time to verify and open a new corpus version."
    );
    describe_gauge!(AUDIT_QUEUED, "Audit receipts waiting to be written.");
    describe_counter!(
        AUDIT_RECEIPTS,
        "Audit receipts, by outcome (written, dropped, failed)."
    );
    describe_counter!(
        AUDIT_LOST,
        "Audit receipts asked for and never written (dropped + failed)."
    );
    describe_gauge!(STREAMS_OPEN, "Stream connections open.");
    describe_counter!(STREAM_EVENTS, "Row events sent to stream clients.");
    describe_counter!(
        STREAM_CLOSED,
        "Stream clients disconnected by the server, by reason."
    );
    describe_counter!(MCP_SESSIONS, "MCP sessions begun.");
    describe_counter!(MCP_TOOL_CALLS, "MCP tool calls, by tool and outcome.");
    describe_histogram!(
        STATE_DURATION,
        Unit::Seconds,
        "Time of state store work, by operation."
    );
    describe_counter!(STATE_ERRORS, "State store errors, by operation.");
    describe_counter!(
        STATE_STATEMENT_ERRORS,
        "Failed state store statements, by kind."
    );
    describe_counter!(SIGNIN_MAILS, "Sign-in mails, by outcome.");
    describe_counter!(
        BILLING_WEBHOOKS,
        "Payment processor notifications, by outcome."
    );
    describe_counter!(
        CONNECTOR_CALLS,
        "Connector calls to market-data vendors, by vendor and outcome."
    );
    describe_gauge!(READY, "1 while the replica is ready for traffic, else 0.");
}

/// Describes every metric of `asof poll`.
pub fn describe_poll() {
    describe_gauge!(
        POLL_LAST_SUCCESS,
        Unit::Seconds,
        "When the last poll round finished without error (Unix seconds)."
    );
    describe_counter!(POLL_ROUNDS, "Poll rounds, by outcome.");
    describe_counter!(POLL_FIRST_SEEN, "Filings seen for the first time.");
    describe_histogram!(
        POLL_LAG,
        Unit::Seconds,
        "Seconds between a filing's acceptance and the poller's first sight of it."
    );
    describe_counter!(POLL_CERTIFIED_DAYS, "Days certified as wholly held.");
    describe_counter!(
        POLL_BACKOFFS,
        "Waits after EDGAR refused or failed a request."
    );
}

/// The status class label of `status`: `2xx` … `5xx`.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// The method label: the methods the service has, and `other` for any extension method a
/// client invents (hyper accepts them), so a client cannot mint series.
pub fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        _ => "other",
    }
}

/// Runs one state store method (`op`, its name): its time, and its error if it failed, by
/// operation. Every method of both backends goes through here (`crate::state::store`), so
/// the label set is the store's method names, fixed at compile time. Generic over the error
/// so this module stays below `error` (which counts failed statements here).
pub async fn store_op<T, E>(
    op: &'static str,
    work: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let started = std::time::Instant::now();
    let result = work.await;
    metrics::histogram!(STATE_DURATION, "operation" => op).record(started.elapsed());
    if result.is_err() {
        metrics::counter!(STATE_ERRORS, "operation" => op).increment(1);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_label() {
        assert_eq!(method_label("GET"), "GET");
        assert_eq!(method_label("BREW"), "other");
        assert_eq!(method_label("get"), "other");
    }

    #[test]
    fn status_classes_cover_every_status() {
        assert_eq!(status_class(200), "2xx");
        assert_eq!(status_class(304), "3xx");
        assert_eq!(status_class(409), "4xx");
        assert_eq!(status_class(503), "5xx");
        assert_eq!(status_class(101), "1xx");
    }

    #[test]
    fn buckets_rise_and_start_at_a_tenth_of_a_millisecond() {
        assert_eq!(LATENCY_BUCKETS[0], 0.0001);
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        assert!(LAG_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
