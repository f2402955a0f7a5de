//! Every route of the service, one entry each, and their handlers by area.
//!
//! An entry names who may call the route and how its answers are cached; its handler's
//! `#[utoipa::path]` gives the path, the methods, the typed query and the description. The
//! router, `OPTIONS`/405, the per-route guard, the OpenAPI paths, `/v1/meta`'s route lists and
//! the MCP tool schemas are all derived from [`TABLE`] (see `crate::http::route`). Adding a
//! route is one entry here and one handler.

pub mod account;
pub mod audit;
pub mod auth;
pub mod billing;
pub mod connector;
pub mod data;
pub mod discovery;
pub mod files;
pub mod meta;
pub mod sample;
pub mod sharing;
pub mod site;
pub mod stream;

use utoipa_axum::routes;

use crate::http::route::{Kind, Route};
use crate::plan::Plan;

/// The MCP endpoint's four read-only tools, each naming the table entries it calls (with a
/// key, and the sample tier without one).
pub static TOOLS: &[crate::mcp::Tool] = &[
    crate::mcp::Tool {
        name: "svc_query",
        title: "As-of record query",
        description: "Records (SEC filings and other public records) that were knowable at `as_of` by the chosen clock, oldest first, paged. Same answer as GET /v1/news. status `coverage_missing` (isError) means the corpus has a hole this cut depends on: that is NOT an empty answer; count 0 with status ok is a true empty answer. Without an API key it answers from the public sample (three companies, a few days) and takes only ticker (or example), as_of and visible_by.",
        keyed: || routes!(data::news),
        sample: || routes!(sample::sample_news),
    },
    crate::mcp::Tool {
        name: "svc_diff",
        title: "Became-knowable diff",
        description: "Records that became knowable in the window (as_of_start, as_of_end]: visible at the end and not at the start. Same answer as GET /v1/news/diff. Without an API key: the public sample, taking only ticker (or example), as_of_start, as_of_end and visible_by.",
        keyed: || routes!(data::diff),
        sample: || routes!(sample::sample_diff),
    },
    crate::mcp::Tool {
        name: "svc_coverage",
        title: "Coverage certificates",
        description: "Per source-day certificates: whether a day is certified complete, its row count (null for a missing day), and the evidence. Same answer as GET /v1/coverage. Without an API key: the public sample's certificates.",
        keyed: || routes!(data::coverage),
        sample: || routes!(sample::sample_coverage),
    },
    crate::mcp::Tool {
        name: "svc_meta",
        title: "Service metadata",
        description: "The corpus version, clocks, lanes, plans, held sources with their certified spans and last partition dates. Same answer as GET /v1/meta (watermarked sample: true without an API key). Call it first to learn what can be asked.",
        keyed: || routes!(discovery::meta),
        sample: || routes!(discovery::meta),
    },
];

/// The route table, in the order the description lists them.
pub static TABLE: &[Route] = &[
    Route::open(|| routes!(discovery::health)).unreceipted(),
    // Its answer changes while the version stays (draining, the state store): a body ETag.
    Route::open(|| routes!(discovery::ready))
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
    Route::open(|| routes!(discovery::llms_txt))
        .kind(Kind::Document)
        .unreceipted(),
    Route::open(|| routes!(discovery::docs))
        .kind(Kind::Document)
        .unreceipted(),
    Route::open(|| routes!(discovery::openapi_json)).kind(Kind::Document),
    Route::open(|| routes!(discovery::openapi_yaml)).kind(Kind::Document),
    // The data answers, also answered in-process (`asof_answer::local`, `asof.open()`), and to
    // a signed-in browser's session (the explorer, `/explore`).
    Route::public(|| routes!(discovery::meta))
        .in_process()
        .pinned(),
    Route::key(Plan::Researcher, || routes!(data::news))
        .in_process()
        .pinned()
        .browser(),
    Route::key(Plan::Researcher, || routes!(data::diff))
        .in_process()
        .pinned()
        .browser(),
    Route::key(Plan::Researcher, || routes!(data::record))
        .in_process()
        .pinned()
        .browser(),
    Route::key(Plan::Researcher, || routes!(data::coverage))
        .in_process()
        .pinned()
        .browser(),
    Route::key(Plan::Researcher, || routes!(data::mapping_ticker))
        .in_process()
        .pinned()
        .browser(),
    Route::key(Plan::Researcher, || routes!(data::mapping_cik))
        .in_process()
        .pinned()
        .browser(),
    // File URLs expire, so a listing's body changes while the corpus version stays.
    Route::key(Plan::Power, || routes!(files::files))
        .kind(Kind::LiveEnvelope)
        .pinned(),
    Route::key(Plan::Power, || routes!(files::file))
        .kind(Kind::LiveEnvelope)
        .pinned(),
    Route::signed(|| routes!(files::file_bytes)),
    // The Delta Sharing protocol: the same files and plans as /v1/files, read by the
    // protocol's clients (URLs in answers expire, so nothing is cached).
    Route::key(Plan::Power, || routes!(sharing::list_shares))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::get_share))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::list_schemas))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::list_tables))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::list_all_tables))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::table_version))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::table_metadata))
        .kind(Kind::Protocol)
        .unreceipted(),
    Route::key(Plan::Power, || routes!(sharing::table_query))
        .body(sharing::query_body_schema)
        .kind(Kind::Protocol)
        .unreceipted(),
    // An open stream counts as one request; it has no envelope to receipt (counted `skipped`).
    Route::key(Plan::Researcher, || routes!(stream::stream)).kind(Kind::Stream),
    Route::public(|| routes!(sample::sample_news)).sample(),
    Route::public(|| routes!(sample::sample_diff)).sample(),
    Route::public(|| routes!(sample::sample_coverage)).sample(),
    Route::public(|| routes!(sample::sample_mapping)).sample(),
    Route::redirect(|| routes!(auth::provider_a_start)),
    Route::redirect(|| routes!(auth::provider_a_callback)),
    Route::redirect(|| routes!(auth::provider_b_start)),
    Route::redirect(|| routes!(auth::provider_b_callback)),
    // Sign-in asks are limited per client address (the public window) and, inside the
    // handler, per recipient and per client over 15 minutes.
    Route::public(|| routes!(auth::email_start)).kind(Kind::LiveEnvelope),
    Route::redirect(|| routes!(auth::email_callback)),
    Route::redirect(|| routes!(auth::email_confirm)),
    Route::session(|| routes!(auth::logout)),
    Route::key_or_session(|| routes!(account::me)),
    Route::key_or_session(|| routes!(account::list_keys)),
    Route::session(|| routes!(account::create_key)),
    Route::session(|| routes!(account::revoke_key)),
    Route::session(|| routes!(billing::checkout)),
    Route::session(|| routes!(billing::portal)),
    Route::key_or_session(|| routes!(billing::usage)),
    // The signature is the credential; never rate-limited (the processor retries on 429 and
    // its bursts would be refused) and never receipted (no key).
    Route::open(|| routes!(billing::webhook))
        .body(crate::billing::webhook::event_schema)
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
    // Third-party data for this caller alone: never cached (the answer says `no-store`).
    Route::key(Plan::Desk, || routes!(connector::bars)).kind(Kind::LiveEnvelope),
    Route::key(Plan::Desk, || routes!(audit::audit_log))
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
    Route::key(Plan::Desk, || routes!(audit::audit_stats))
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
    Route::rpc(|| routes!(crate::mcp::post)).body(crate::mcp::message_schema),
    // The site: pages and their assets are documents; the beacon counts page views only.
    Route::public(|| routes!(site::home))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::explore))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::sign_in))
        .kind(Kind::Document)
        .unreceipted(),
    // Holds a live token: the handler marks it no-store and sends no Referer.
    Route::public(|| routes!(site::sign_in_confirm))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::account))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::css))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::js))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::explore_js))
        .kind(Kind::Document)
        .unreceipted(),
    Route::public(|| routes!(site::beacon))
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
];

/// Each entry's path pattern, in table order, computed once per process (the router and the
/// metrics name an entry by it).
pub fn paths() -> &'static [String] {
    static PATHS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PATHS.get_or_init(|| TABLE.iter().map(Route::path).collect())
}

/// The entry serving `path` (a request path; `{x}` segments match any one segment).
pub fn route_of(path: &str) -> Option<&'static Route> {
    TABLE.iter().find(|r| r.matches(path))
}
