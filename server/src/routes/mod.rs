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

/// The route table, in the order the description lists them.
pub static TABLE: &[Route] = &[
    Route::open(|| routes!(discovery::health)),
    Route::open(|| routes!(discovery::llms_txt)).kind(Kind::Document),
    Route::open(|| routes!(discovery::docs)).kind(Kind::Document),
    Route::open(|| routes!(discovery::openapi_json)).kind(Kind::Document),
    Route::open(|| routes!(discovery::openapi_yaml)).kind(Kind::Document),
    Route::public(|| routes!(discovery::meta)),
    Route::key(Plan::Researcher, || routes!(data::news)),
    Route::key(Plan::Researcher, || routes!(data::diff)),
    Route::key(Plan::Researcher, || routes!(data::record)),
    Route::key(Plan::Researcher, || routes!(data::coverage)),
    Route::key(Plan::Researcher, || routes!(data::mapping_ticker)),
    Route::key(Plan::Researcher, || routes!(data::mapping_cik)),
    // File URLs expire, so a listing's body changes while the corpus version stays.
    Route::key(Plan::Power, || routes!(files::files)).kind(Kind::LiveEnvelope),
    Route::key(Plan::Power, || routes!(files::file)).kind(Kind::LiveEnvelope),
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
        .kind(Kind::Protocol)
        .unreceipted(),
    // An open stream counts as one request; it has no envelope to receipt (counted `skipped`).
    Route::key(Plan::Researcher, || routes!(stream::stream)).kind(Kind::Stream),
    Route::public(|| routes!(sample::sample_news)),
    Route::public(|| routes!(sample::sample_diff)),
    Route::public(|| routes!(sample::sample_coverage)),
    Route::public(|| routes!(sample::sample_mapping)),
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
    Route::open(|| routes!(crate::mcp::post)).kind(Kind::Rpc),
    // The site: pages and their assets are documents; the beacon counts page views only.
    Route::public(|| routes!(site::home)).kind(Kind::Document),
    Route::public(|| routes!(site::sign_in)).kind(Kind::Document),
    // Holds a live token: the handler marks it no-store and sends no Referer.
    Route::public(|| routes!(site::sign_in_confirm)).kind(Kind::Document),
    Route::public(|| routes!(site::account)).kind(Kind::Document),
    Route::public(|| routes!(site::css)).kind(Kind::Document),
    Route::public(|| routes!(site::js)).kind(Kind::Document),
    Route::public(|| routes!(site::beacon))
        .kind(Kind::LiveEnvelope)
        .unreceipted(),
];

/// The entry serving `path` (a request path; `{x}` segments match any one segment).
pub fn route_of(path: &str) -> Option<&'static Route> {
    TABLE.iter().find(|r| r.matches(path))
}
