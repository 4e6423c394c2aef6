//! `settings.oauth` in a build without the `tls` feature: the identity provider's tokens
//! cannot be checked (no crypto, no https), so `serve` refuses to start with it
//! (`cli/serve.rs`) and nothing here ever accepts a token.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::HeaderValue;

/// Who a valid token stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: Arc<str>,
    pub groups: Box<[Arc<str>]>,
}

/// Why a token does not stand for an identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    Invalid(String),
    Keys(String),
    Scope(String),
}

impl Rejection {
    pub fn reason(&self) -> String {
        "this mcpwall was built without the `tls` feature: access tokens are not accepted".into()
    }
}

/// Never constructed in this build.
pub enum OAuth {}

impl OAuth {
    pub fn metadata_at(&self, _path: &str) -> Option<Bytes> {
        match *self {}
    }

    pub fn challenge(&self, _rejection: Option<&Rejection>) -> HeaderValue {
        match *self {}
    }

    pub fn expired(&self) -> Vec<Arc<str>> {
        match *self {}
    }

    pub fn looks_like_jwt(_token: &str) -> bool {
        false
    }

    pub async fn verify(
        &self,
        _token: &str,
        _is_token_file_name: impl Fn(&str) -> bool,
    ) -> Result<Principal, Rejection> {
        match *self {}
    }
}
