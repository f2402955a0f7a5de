//! JSON request bodies of the `POST` routes: read at most [`MAX_BODY`] bytes of
//! `application/json`, one object, every field declared by the route's body type; any fault is
//! a `400 invalid_request` naming the field (or `body`), and a body past [`MAX_BODY`] bytes is
//! `413 payload_too_large` (read no further than the limit, whatever `Content-Length` says).
//!
//! Why not axum's `Json`: its rejections are plain text and name no field, and it accepts
//! fields a route does not know, which would let a typo (`expire_at`) pass silently.

use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The largest body a route reads.
pub const MAX_BODY: usize = 16 * 1024;

/// A body type: the fields it declares and how it reads them from the object.
pub trait FromJson: Sized {
    const FIELDS: &'static [&'static str];
    fn from_object(o: &Map<String, Value>) -> Result<Self, ApiError>;
}

/// The extractor: `Json(body): Json<KeyCreate>`.
#[derive(Debug, Clone)]
pub struct Json<T>(pub T);

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::invalid("body", message)
}

impl<T: FromJson, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        if !sent_as(req.headers(), "application/json") {
            return Err(bad(
                "the body must be JSON, sent with Content-Type: application/json",
            ));
        }
        let bytes = read_limited(req.into_body(), MAX_BODY).await?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("the body is not valid JSON: {e}")))?;
        let Value::Object(o) = v else {
            return Err(bad("the body must be a JSON object"));
        };
        declared::<T>(&o).map(Json)
    }
}

/// Whether a request's `Content-Type` is `media_type` (parameters such as `charset` aside).
pub fn sent_as(headers: &axum::http::HeaderMap, media_type: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(media_type))
}

/// `T` read from an object whose every field `T` declares.
fn declared<T: FromJson>(o: &Map<String, Value>) -> Result<T, ApiError> {
    if let Some(k) = o.keys().find(|k| !T::FIELDS.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            k.as_str(),
            format!(
                "undeclared field {k:?}; this body takes: {}",
                T::FIELDS.join(", ")
            ),
        ));
    }
    T::from_object(o)
}

/// The extractor of an HTML form's body (`application/x-www-form-urlencoded`, what a page's
/// `<form method="post">` sends without script): the same declared fields as a JSON body,
/// every value a string, a field given twice refused.
#[derive(Debug, Clone)]
pub struct Form<T>(pub T);

impl<T: FromJson, S: Send + Sync> FromRequest<S> for Form<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        if !sent_as(req.headers(), "application/x-www-form-urlencoded") {
            return Err(bad(
                "the body must be a form, sent with Content-Type: application/x-www-form-urlencoded",
            ));
        }
        let bytes = read_limited(req.into_body(), MAX_BODY).await?;
        let mut o = Map::new();
        for (k, v) in url::form_urlencoded::parse(&bytes) {
            if o.insert(k.to_string(), Value::String(v.into_owned()))
                .is_some()
            {
                return Err(ApiError::invalid(k.as_ref(), format!("{k} is given twice")));
            }
        }
        declared::<T>(&o).map(Form)
    }
}

/// The bytes of `body`, at most `limit` of them: a longer body is `413 payload_too_large`
/// as soon as the limit is passed (or at once, when `Content-Length` says so), never read
/// whole; a body the client stops sending part-way is `400 invalid_request`.
pub async fn read_limited(body: axum::body::Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_long = e
            .into_inner()
            .downcast_ref::<http_body_util::LengthLimitError>()
            .is_some();
        if too_long {
            ApiError::PayloadTooLarge { limit }
        } else {
            bad("the body could not be read whole (the client stopped sending it)")
        }
    })
}

/// A string field: `Ok(None)` when absent or null.
pub fn string(o: &Map<String, Value>, name: &str) -> Result<Option<String>, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(name, format!("{name} must be a string"))),
    }
}

/// A string field that must be present.
pub fn required_string(o: &Map<String, Value>, name: &str, what: &str) -> Result<String, ApiError> {
    string(o, name)?.ok_or_else(|| ApiError::invalid(name, format!("{name} is required ({what})")))
}

/// A boolean field: `Ok(None)` when absent or null.
pub fn boolean(o: &Map<String, Value>, name: &str) -> Result<Option<bool>, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(ApiError::invalid(
            name,
            format!("{name} must be true or false"),
        )),
    }
}
