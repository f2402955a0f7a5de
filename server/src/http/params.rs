//! Query strings under the service's common rules: the answer layer's typed query structs
//! ([`asof_answer::params`]), read from a request by the [`Q`] extractor.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

pub use asof_answer::params::*;
pub use asof_answer::query;

use crate::error::ApiError;

/// The extractor handlers take: `Q(query): Q<NewsParams>`. A refusal is the route's answer.
#[derive(Debug, Clone)]
pub struct Q<T>(pub T);

impl<T: FromQuery, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        T::parse(parts.uri.query()).map(Q).map_err(ApiError::from)
    }
}
