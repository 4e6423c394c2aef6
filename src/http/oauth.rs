//! Identities from the identity provider (`settings.oauth`): OAuth 2.1 bearer access
//! tokens, signed JWTs, checked against the provider's published keys (a JWK set), as the
//! MCP authorization specification asks of a protected resource; and that resource's
//! metadata document (RFC 9728), which tells a client where to get a token.
//!
//! **What a token must be** to stand for an identity, in the order checked (the first
//! failure is the reason, in the audit log and on stderr; the client learns only
//! `invalid_token`):
//! 1. at most `max_token_bytes`, three base64url parts, a header of at most
//!    [`MAX_HEADER_BYTES`] whose `alg` is one of the pinned `algorithms` (never `none` or
//!    HS*: refused when the policy loads) and whose `kid` names a key of the set, no `crit`;
//! 2. the key's type fits the algorithm (RSA for RS*/PS*, P-256 for ES256, P-384 for ES384,
//!    Ed25519 for EdDSA) and the key's own `alg`, if it names one, is the header's: a
//!    token cannot pick how the key is used (the RSA-as-HMAC confusion), and keys of type
//!    `oct` in the set are never used;
//! 3. the signature verifies (jsonwebtoken, over ring);
//! 4. `iss` equals `issuer`; `aud` (a string or a list) names `resource`; `exp` is a
//!    number and not past (plus `leeway_seconds`); `nbf` and `iat`, when present, are
//!    numbers and not in the future (minus the leeway). A claim of the wrong type is a
//!    refusal, never "absent";
//! 5. the identity claim is a string of at most [`MAX_NAME_BYTES`] visible characters and
//!    is not the name of a token-file identity (that name is the token file's); with
//!    `identity_claim: email`, `email_verified: false` is refused; the groups claim is a
//!    list of at most [`MAX_GROUPS`] such strings (or one string);
//! 6. every `required_scopes` entry is in `scope` (space-separated) or `scp` (a list):
//!    otherwise 403 `insufficient_scope`.
//!
//! **The key set** is fetched from `jwks_url` when first needed, kept, and fetched again
//! when it is older than `jwks_max_age_seconds` or a token names a `kid` it lacks (a key
//! rotation), but never more than once per `jwks_min_refresh_seconds` (a stream of tokens
//! with made-up `kid`s cannot make the gateway hammer the provider). One fetch at a time;
//! each bounded by `fetch_timeout_seconds`, [`MAX_JWKS_BYTES`] and [`MAX_KEYS`]. A set that
//! cannot be fetched or read refuses every token once no set younger than
//! `jwks_max_age_seconds` is in force (or none was ever fetched), until a later fetch
//! succeeds: fail closed.
//!
//! **Without `jwks_url`**, the set's URL is found by OpenID Connect discovery before each
//! fetch of the set: the `jwks_uri` of `<issuer>/.well-known/openid-configuration`, a
//! document that must name exactly the configured `issuer` (OpenID Connect Discovery
//! §4.3: a provider cannot speak for another) and a `jwks_uri` that is https (http only
//! on loopback). Both fetches share one `fetch_timeout_seconds`, and
//! [`MAX_JWKS_BYTES`] bounds each. `jwks_ca_file` names the CAs both are verified against.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::HeaderValue;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use sha2::Digest as _;

use crate::config::policy::OAuthSettings;

/// The well-known path of the protected-resource metadata (RFC 9728).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
/// The well-known path of an OpenID provider's configuration, under its issuer.
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";
/// Longest token header (base64url) read before the signature is checked.
pub const MAX_HEADER_BYTES: usize = 2048;
/// Largest key set read.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Most keys in a key set.
pub const MAX_KEYS: usize = 64;
/// Longest `kid`.
const MAX_KID_BYTES: usize = 256;
/// Longest identity or group name taken from a token.
pub const MAX_NAME_BYTES: usize = 256;
/// Most groups one token may carry.
pub const MAX_GROUPS: usize = 256;

/// Who a valid token stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: Arc<str>,
    pub groups: Box<[Arc<str>]>,
}

/// Why a token does not stand for an identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The token is not valid (401 `invalid_token`): why, for the audit log.
    Invalid(String),
    /// The key set cannot be had: every token is refused until it can (401).
    Keys(String),
    /// Valid, but without a required scope (403 `insufficient_scope`).
    Scope(String),
}

impl Rejection {
    pub fn reason(&self) -> String {
        match self {
            Rejection::Invalid(why) => format!("invalid access token: {why}"),
            Rejection::Keys(why) => format!(
                "the identity provider's key set cannot be had, so no access token is accepted: {why}"
            ),
            Rejection::Scope(why) => format!("access token lacks a required scope: {why}"),
        }
    }
}

/// A key of the set, with what it may verify.
#[derive(Clone)]
struct Key {
    decoding: DecodingKey,
    /// The algorithms its type fits.
    fits: &'static [Algorithm],
    /// The key's own `alg`, if it names one.
    alg: Option<Algorithm>,
}

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Key>,
    /// When the keys in `keys` were fetched (`None`: none usable).
    fetched: Option<Instant>,
    /// When a fetch was last tried.
    tried: Option<Instant>,
    /// Why the last fetch failed, if it did.
    failure: Option<String>,
    /// Fetches made (tests read it through [`OAuth::fetches`]).
    fetches: u64,
}

/// The identity provider as `mcpwall serve` uses it. Shared by a listener's gateways.
pub struct OAuth {
    settings: OAuthSettings,
    algorithms: Vec<Algorithm>,
    source: KeySource,
    cache: tokio::sync::Mutex<Cache>,
    /// The metadata document, and the paths it is served at.
    metadata: Bytes,
    metadata_paths: Vec<String>,
    /// Where the metadata document is, for `WWW-Authenticate`.
    metadata_url: String,
    /// A failed fetch is said on stderr (fetches are rate-limited, so these lines are).
    chatter: crate::io::Chatter,
    /// When each identity's latest access token expires (plus the leeway): its open
    /// sessions end then, unless a later token came ([`OAuth::expired`]).
    expiries: std::sync::Mutex<HashMap<Arc<str>, f64>>,
    /// Tokens that passed every check, by SHA-256, until they expire: a client sends the
    /// same token with every request, and checking its signature again each time cost
    /// 1.65× a token-file request's time (ES256, 300 authenticated requests per round, 3
    /// rounds, debug build with optimised dependencies, one run); remembered, 1.08×.
    /// Emptied whenever the key set is fetched (a key gone from the set takes its tokens
    /// along), and a token is remembered no longer than its key set is in force.
    verified: std::sync::Mutex<HashMap<[u8; 32], Verified>>,
}

/// Where the key set is fetched from.
enum KeySource {
    /// `jwks_url`, as configured.
    Fixed {
        url: String,
        client: Arc<crate::upstream::Upstream>,
    },
    /// OpenID Connect discovery: the issuer's configuration document, and a client for
    /// the `jwks_uri` it named last.
    Discovered {
        document: Box<crate::upstream::Upstream>,
        keys: std::sync::Mutex<Option<(String, Arc<crate::upstream::Upstream>)>>,
    },
}

/// A token that passed, and the times it is good between (the leeway applied).
struct Verified {
    principal: Principal,
    not_before: f64,
    until: f64,
    /// When the key set it was checked against was fetched: it is remembered no longer
    /// than that set is in force (`jwks_max_age_seconds`).
    keys_fetched: Instant,
}

/// Most tokens remembered as verified; past it the memory starts again.
const MAX_VERIFIED: usize = 4096;

/// Why `settings.oauth` cannot be used (said at start).
#[derive(Debug, thiserror::Error)]
#[error("settings.oauth: {0}")]
pub struct SetupError(String);

fn algorithm(name: &str) -> Option<Algorithm> {
    Some(match name {
        "RS256" => Algorithm::RS256,
        "RS384" => Algorithm::RS384,
        "RS512" => Algorithm::RS512,
        "PS256" => Algorithm::PS256,
        "PS384" => Algorithm::PS384,
        "PS512" => Algorithm::PS512,
        "ES256" => Algorithm::ES256,
        "ES384" => Algorithm::ES384,
        "EdDSA" => Algorithm::EdDSA,
        _ => return None,
    })
}

const RSA_ALGS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

impl OAuth {
    /// Check the settings and set up the key set's client (nothing is fetched yet).
    pub fn new(settings: &OAuthSettings, chatter: crate::io::Chatter) -> Result<OAuth, SetupError> {
        let algorithms = settings
            .algorithms
            .iter()
            .map(|a| algorithm(a).ok_or_else(|| SetupError(format!("unknown algorithm {a}"))))
            .collect::<Result<Vec<_>, _>>()?;
        if algorithms.is_empty() {
            return Err(SetupError("no algorithm is accepted".into()));
        }
        let source = match &settings.jwks_url {
            Some(url) => KeySource::Fixed {
                url: url.clone(),
                client: Arc::new(client(url, settings, "jwks_url")?),
            },
            None => KeySource::Discovered {
                document: Box::new(client(
                    &discovery_url(&settings.issuer),
                    settings,
                    "issuer",
                )?),
                keys: std::sync::Mutex::new(None),
            },
        };
        let resource: hyper::Uri = settings
            .resource
            .parse()
            .map_err(|_| SetupError("resource is not a URL".into()))?;
        let origin = format!(
            "{}://{}",
            resource.scheme_str().unwrap_or("https"),
            resource.authority().map_or("", |a| a.as_str())
        );
        let path = resource.path().trim_end_matches('/');
        let mut metadata_paths = vec![METADATA_PATH.to_string()];
        if !path.is_empty() {
            metadata_paths.insert(0, format!("{METADATA_PATH}{path}"));
        }
        let metadata_url = format!("{origin}{}", metadata_paths[0]);
        let mut doc = serde_json::json!({
            "resource": settings.resource,
            "authorization_servers": [settings.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !settings.required_scopes.is_empty() {
            doc["scopes_supported"] = serde_json::json!(settings.required_scopes);
        }
        Ok(OAuth {
            settings: settings.clone(),
            algorithms,
            source,
            cache: tokio::sync::Mutex::new(Cache::default()),
            metadata: Bytes::from(doc.to_string()),
            metadata_paths,
            metadata_url,
            chatter,
            expiries: Default::default(),
            verified: Default::default(),
        })
    }

    /// The metadata document, if `path` is one of its paths.
    pub fn metadata_at(&self, path: &str) -> Option<Bytes> {
        self.metadata_paths
            .iter()
            .any(|p| p == path)
            .then(|| self.metadata.clone())
    }

    /// `WWW-Authenticate` for a refusal: `error` is `None` when no token was presented
    /// (RFC 6750 §3.1: then no error code).
    pub fn challenge(&self, rejection: Option<&Rejection>) -> HeaderValue {
        let mut value = String::from("Bearer");
        match rejection {
            None => {}
            Some(Rejection::Scope(_)) => {
                value.push_str(" error=\"insufficient_scope\",");
            }
            Some(Rejection::Invalid(_) | Rejection::Keys(_)) => value.push_str(
                " error=\"invalid_token\", error_description=\"the access token is not valid here\",",
            ),
        }
        if !self.settings.required_scopes.is_empty() {
            // Scope tokens are visible ASCII without `"` or `\` (RFC 6749 §3.3); any
            // other is left out of the header rather than break its quoting.
            let scopes: Vec<&str> = self
                .settings
                .required_scopes
                .iter()
                .map(String::as_str)
                .filter(|s| {
                    s.bytes()
                        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
                })
                .collect();
            value.push_str(&format!(" scope=\"{}\",", scopes.join(" ")));
        }
        value.push_str(&format!(
            " resource_metadata=\"{}\"",
            self.metadata_url.replace(['"', '\\'], "")
        ));
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// Whether a presented bearer token is meant for this check (a JWS in compact form),
    /// not a token-file token.
    pub fn looks_like_jwt(token: &str) -> bool {
        token.bytes().filter(|&b| b == b'.').count() == 2
    }

    /// How many times the key set was fetched.
    pub async fn fetches(&self) -> u64 {
        self.cache.lock().await.fetches
    }

    /// Who `token` stands for. `is_token_file_name`: whether a name belongs to the token
    /// file (such a name is refused).
    pub async fn verify(
        &self,
        token: &str,
        is_token_file_name: impl Fn(&str) -> bool,
    ) -> Result<Principal, Rejection> {
        let invalid = |why: &str| Rejection::Invalid(why.to_string());
        let max = self.settings.max_token_bytes as usize;
        if token.len() > max {
            return Err(Rejection::Invalid(format!(
                "{} bytes, more than max_token_bytes ({max})",
                token.len()
            )));
        }
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let max_age = Duration::from_secs(u64::from(self.settings.jwks_max_age_seconds));
        let remembered = self.lock_verified().get(&digest).and_then(|v| {
            let now = unix_now();
            let in_force = v.keys_fetched.elapsed() < max_age;
            (in_force && v.not_before <= now && now <= v.until).then(|| v.principal.clone())
        });
        if let Some(principal) = remembered {
            // The token file may have gained the name since.
            if is_token_file_name(&principal.name) {
                return Err(Rejection::Invalid(format!(
                    "its identity {} is a name of the token file",
                    principal.name
                )));
            }
            return Ok(principal);
        }
        let mut parts = token.split('.');
        let (Some(head), Some(_), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid("not three dot-separated parts"));
        };
        if head.len() > MAX_HEADER_BYTES {
            return Err(invalid("its header is too long"));
        }
        let header = b64_json(head).ok_or_else(|| invalid("its header is not base64url JSON"))?;
        let alg_name = header["alg"]
            .as_str()
            .ok_or_else(|| invalid("its header names no `alg`"))?;
        let alg = algorithm(alg_name)
            .filter(|a| self.algorithms.contains(a))
            .ok_or_else(|| {
                Rejection::Invalid(format!(
                    "alg {} is not one of the pinned algorithms",
                    bounded(alg_name)
                ))
            })?;
        if header.get("crit").is_some() {
            return Err(invalid("its header has `crit` extensions"));
        }
        let kid = header["kid"]
            .as_str()
            .filter(|k| k.len() <= MAX_KID_BYTES)
            .ok_or_else(|| invalid("its header names no usable `kid`"))?;
        let (key, keys_fetched) = self.key(kid).await?;
        if !key.fits.contains(&alg) || key.alg.is_some_and(|a| a != alg) {
            return Err(Rejection::Invalid(format!(
                "alg {alg_name} does not fit key {}",
                bounded(kid)
            )));
        }
        let mut validation = Validation::new(alg);
        validation.leeway = u64::from(self.settings.leeway_seconds);
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key.decoding, &validation)
            .map_err(|e| Rejection::Invalid(describe(&e)))?
            .claims;
        self.check_claims(&claims)?;
        let principal = self.principal(&claims)?;
        if is_token_file_name(&principal.name) {
            return Err(Rejection::Invalid(format!(
                "its identity {} is a name of the token file",
                principal.name
            )));
        }
        self.check_scopes(&claims)?;
        let leeway = f64::from(self.settings.leeway_seconds);
        if let Some(exp) = claims["exp"].as_f64() {
            let until = exp + leeway;
            {
                let mut expiries = self.expiries.lock().unwrap_or_else(|e| e.into_inner());
                let latest = expiries.entry(principal.name.clone()).or_insert(until);
                *latest = latest.max(until);
            }
            let not_before = claims["nbf"].as_f64().map_or(f64::MIN, |nbf| nbf - leeway);
            let mut verified = self.lock_verified();
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
            verified.insert(
                digest,
                Verified {
                    principal: principal.clone(),
                    not_before,
                    until,
                    keys_fetched,
                },
            );
        }
        Ok(principal)
    }

    fn lock_verified(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Verified>> {
        self.verified.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The identities whose latest access token has expired since the last call: their
    /// open sessions (streams, WebSockets) end, as a removed token's do. A client that
    /// renews its token before then keeps them.
    pub fn expired(&self) -> Vec<Arc<str>> {
        let now = unix_now();
        let mut expiries = self.expiries.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<Arc<str>> = expiries
            .iter()
            .filter(|(_, until)| now > **until)
            .map(|(name, _)| name.clone())
            .collect();
        for name in &gone {
            expiries.remove(name);
        }
        gone
    }

    /// The registered claims, by our own strictly typed reading.
    fn check_claims(&self, claims: &Value) -> Result<(), Rejection> {
        let now = unix_now();
        let leeway = f64::from(self.settings.leeway_seconds);
        let number = |name: &str, required: bool| -> Result<Option<f64>, Rejection> {
            match claims.get(name) {
                None if !required => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                _ => Err(Rejection::Invalid(format!(
                    "`{name}` is missing or not a number"
                ))),
            }
        };
        if number("exp", true)?.is_none_or(|exp| now > exp + leeway) {
            return Err(Rejection::Invalid("expired".into()));
        }
        if number("nbf", false)?.is_some_and(|nbf| now + leeway < nbf) {
            return Err(Rejection::Invalid("not valid yet (nbf)".into()));
        }
        if number("iat", false)?.is_some_and(|iat| now + leeway < iat) {
            return Err(Rejection::Invalid("issued in the future (iat)".into()));
        }
        if claims["iss"].as_str() != Some(self.settings.issuer.as_str()) {
            return Err(Rejection::Invalid("wrong issuer".into()));
        }
        let audience = &self.settings.resource;
        let for_us = match &claims["aud"] {
            Value::String(a) => a == audience,
            Value::Array(list) => list.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !for_us {
            return Err(Rejection::Invalid("wrong audience".into()));
        }
        Ok(())
    }

    fn principal(&self, claims: &Value) -> Result<Principal, Rejection> {
        let claim = &self.settings.identity_claim;
        let name = claims
            .get(claim)
            .and_then(Value::as_str)
            .filter(|n| usable_name(n))
            .ok_or_else(|| {
                Rejection::Invalid(format!(
                    "the identity claim `{claim}` is missing, not a string, or not a usable name"
                ))
            })?;
        if claim == "email" && claims.get("email_verified") == Some(&Value::Bool(false)) {
            return Err(Rejection::Invalid("its email is not verified".into()));
        }
        let mut groups = Vec::new();
        if let Some(claim) = &self.settings.groups_claim {
            let bad = || {
                Rejection::Invalid(format!(
                    "the groups claim `{claim}` is not a list of at most {MAX_GROUPS} usable names"
                ))
            };
            match claims.get(claim) {
                None => {}
                Some(Value::String(g)) if usable_name(g) => groups.push(Arc::from(g.as_str())),
                Some(Value::Array(list)) if list.len() <= MAX_GROUPS => {
                    for g in list {
                        match g.as_str() {
                            Some(g) if usable_name(g) => groups.push(Arc::from(g)),
                            _ => return Err(bad()),
                        }
                    }
                }
                Some(_) => return Err(bad()),
            }
        }
        groups.sort();
        groups.dedup();
        Ok(Principal {
            name: Arc::from(name),
            groups: groups.into(),
        })
    }

    fn check_scopes(&self, claims: &Value) -> Result<(), Rejection> {
        let mut held: Vec<&str> = Vec::new();
        if let Some(scope) = claims["scope"].as_str() {
            held.extend(scope.split(' ').filter(|s| !s.is_empty()));
        }
        if let Some(list) = claims["scp"].as_array() {
            held.extend(list.iter().filter_map(Value::as_str));
        }
        let missing: Vec<&str> = self
            .settings
            .required_scopes
            .iter()
            .map(String::as_str)
            .filter(|s| !held.contains(s))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Rejection::Scope(format!("missing {}", missing.join(" "))))
        }
    }

    /// The key named `kid`: from the set as kept, or from a fresh fetch when the set is
    /// too old or lacks it (at most one fetch per `jwks_min_refresh_seconds`). A failed
    /// fetch leaves a set younger than `jwks_max_age_seconds` in force (a stream of made-up
    /// `kid`s during a provider hiccup does not lock everyone out); past that age, or with
    /// no set ever fetched, every token is refused.
    async fn key(&self, kid: &str) -> Result<(Key, Instant), Rejection> {
        let mut cache = self.cache.lock().await;
        let max_age = Duration::from_secs(u64::from(self.settings.jwks_max_age_seconds));
        let fresh = |cache: &Cache| {
            cache
                .fetched
                .is_some_and(|t| Instant::now().duration_since(t) < max_age)
        };
        if fresh(&cache)
            && let (Some(key), Some(at)) = (cache.keys.get(kid), cache.fetched)
        {
            return Ok((key.clone(), at));
        }
        let min_gap = Duration::from_secs(u64::from(self.settings.jwks_min_refresh_seconds));
        let now = Instant::now();
        if cache.tried.is_none_or(|t| now.duration_since(t) >= min_gap) {
            cache.tried = Some(now);
            cache.fetches += 1;
            // Whatever the fetch brings, tokens are checked against it from now on.
            self.lock_verified().clear();
            match self.fetch().await {
                Ok(keys) => {
                    cache.keys = keys;
                    cache.fetched = Some(Instant::now());
                    cache.failure = None;
                }
                Err(why) => {
                    self.chatter.log(
                        crate::io::LogLevel::Error,
                        format_args!(
                            "the identity provider's key set cannot be had (access tokens are refused once the set in force, if any, is older than jwks_max_age_seconds): {why}"
                        ),
                    );
                    cache.failure = Some(why);
                }
            }
        }
        if !fresh(&cache) {
            cache.keys.clear();
            cache.fetched = None;
            let why = cache.failure.clone().unwrap_or_else(|| {
                "the key set is older than jwks_max_age_seconds and was not fetched again yet"
                    .into()
            });
            return Err(Rejection::Keys(why));
        }
        match (cache.keys.get(kid), &cache.failure) {
            (Some(key), _) => Ok((key.clone(), cache.fetched.unwrap_or_else(Instant::now))),
            (None, Some(why)) => Err(Rejection::Keys(format!(
                "unknown key id {} and the set could not be fetched again: {why}",
                bounded(kid)
            ))),
            (None, None) => Err(Rejection::Invalid(format!(
                "unknown key id {}",
                bounded(kid)
            ))),
        }
    }

    /// One fetch of the key set (after discovering where it is, without `jwks_url`),
    /// bounded in time and size.
    async fn fetch(&self) -> Result<HashMap<String, Key>, String> {
        let timeout = Duration::from_secs(u64::from(self.settings.fetch_timeout_seconds));
        tokio::time::timeout(timeout, async {
            let (url, client) = match &self.source {
                KeySource::Fixed { url, client } => (url.clone(), client.clone()),
                KeySource::Discovered { document, keys } => {
                    let url = self.discover(document).await?;
                    let mut known = keys.lock().unwrap_or_else(|e| e.into_inner());
                    let client = match &*known {
                        Some((at, client)) if *at == url => client.clone(),
                        _ => {
                            let client = Arc::new(
                                client(&url, &self.settings, "jwks_uri")
                                    .map_err(|e| e.0.clone())?,
                            );
                            *known = Some((url.clone(), client.clone()));
                            client
                        }
                    };
                    (url, client)
                }
            };
            let body = get_json(&client, &url).await?;
            parse_key_set(&body).map_err(|why| format!("{url}: {why}"))
        })
        .await
        .map_err(|_| {
            format!(
                "the identity provider did not answer within {} s",
                timeout.as_secs()
            )
        })?
    }

    /// The `jwks_uri` of the issuer's OpenID configuration, if the document is the
    /// issuer's own and the URI is one mcpwall may fetch.
    async fn discover(&self, document: &crate::upstream::Upstream) -> Result<String, String> {
        let url = discovery_url(&self.settings.issuer);
        let body = get_json(document, &url).await?;
        let doc: Value = serde_json::from_slice(&body).map_err(|_| format!("{url}: not JSON"))?;
        if !doc.is_object() {
            return Err(format!("{url}: not a JSON object"));
        }
        match doc["issuer"].as_str() {
            Some(issuer) if issuer == self.settings.issuer => {}
            Some(other) => {
                return Err(format!(
                    "{url} names the issuer {}, not {}: a provider's configuration is trusted only for its own issuer",
                    bounded(other),
                    self.settings.issuer
                ));
            }
            None => return Err(format!("{url}: no `issuer`")),
        }
        let jwks_uri = doc["jwks_uri"]
            .as_str()
            .ok_or_else(|| format!("{url}: no `jwks_uri`"))?;
        crate::config::check_oauth_url(jwks_uri).map_err(|why| {
            format!(
                "{url}: its `jwks_uri` {} is not usable: {why}",
                bounded(jwks_uri)
            )
        })?;
        Ok(jwks_uri.to_string())
    }
}

/// `<issuer>/.well-known/openid-configuration` (OpenID Connect Discovery §4: the issuer's
/// trailing `/` removed first).
fn discovery_url(issuer: &str) -> String {
    format!("{}{DISCOVERY_PATH}", issuer.trim_end_matches('/'))
}

/// A client for a URL of the identity provider (`what`: the setting it comes from), with
/// `jwks_ca_file`'s CAs.
fn client(
    url: &str,
    settings: &OAuthSettings,
    what: &str,
) -> Result<crate::upstream::Upstream, SetupError> {
    crate::upstream::Upstream::new(&crate::upstream::Settings {
        url: url.to_string(),
        ca_file: settings.jwks_ca_file.clone(),
        ..Default::default()
    })
    .map_err(|e| match e {
        crate::upstream::UpstreamError::CaFile { path, why } => SetupError(format!(
            "jwks_ca_file {}: {why}; give a readable PEM file, or remove the key to verify the provider against the public roots",
            path.display()
        )),
        other => SetupError(format!("{what}: {other}")),
    })
}

/// GET a JSON document of at most [`MAX_JWKS_BYTES`].
async fn get_json(client: &crate::upstream::Upstream, url: &str) -> Result<Bytes, String> {
    let accept = (
        hyper::header::ACCEPT,
        HeaderValue::from_static("application/json"),
    );
    let response = client
        .send(hyper::Method::GET, &[accept], Bytes::new())
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if response.status() != hyper::StatusCode::OK {
        return Err(format!("{url} answered {}", response.status()));
    }
    http_body_util::Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|_| format!("{url}: the document is unreadable or over {MAX_JWKS_BYTES} bytes"))
}

/// The usable signing keys of a JWK set (RFC 7517), by `kid`. Keys of other uses or types
/// (`oct`, P-521) are left out; a set over [`MAX_KEYS`] is refused.
fn parse_key_set(body: &[u8]) -> Result<HashMap<String, Key>, String> {
    let set: Value = serde_json::from_slice(body).map_err(|_| "not JSON".to_string())?;
    let keys = set["keys"]
        .as_array()
        .ok_or("not a JWK set (no `keys` list)")?;
    if keys.len() > MAX_KEYS {
        return Err(format!("{} keys, more than {MAX_KEYS}", keys.len()));
    }
    let mut out = HashMap::new();
    for jwk in keys {
        let text = |k: &str| jwk.get(k).and_then(Value::as_str);
        let Some(kid) = text("kid").filter(|k| k.len() <= MAX_KID_BYTES) else {
            continue;
        };
        if text("use").is_some_and(|u| u != "sig") || out.contains_key(kid) {
            continue;
        }
        let alg = match text("alg") {
            None => None,
            Some(a) => match algorithm(a) {
                Some(a) => Some(a),
                None => continue,
            },
        };
        let key = match (text("kty"), text("crv")) {
            (Some("RSA"), _) => match (text("n"), text("e")) {
                (Some(n), Some(e)) => DecodingKey::from_rsa_components(n, e)
                    .ok()
                    .map(|k| (k, RSA_ALGS)),
                _ => None,
            },
            (Some("EC"), Some(crv @ ("P-256" | "P-384"))) => match (text("x"), text("y")) {
                (Some(x), Some(y)) => DecodingKey::from_ec_components(x, y).ok().map(|k| {
                    let fits: &'static [Algorithm] = if crv == "P-256" {
                        &[Algorithm::ES256]
                    } else {
                        &[Algorithm::ES384]
                    };
                    (k, fits)
                }),
                _ => None,
            },
            (Some("OKP"), Some("Ed25519")) => text("x")
                .and_then(|x| DecodingKey::from_ed_components(x).ok())
                .map(|k| (k, &[Algorithm::EdDSA][..])),
            _ => None,
        };
        if let Some((decoding, fits)) = key {
            out.insert(
                kid.to_string(),
                Key {
                    decoding,
                    fits,
                    alg,
                },
            );
        }
    }
    Ok(out)
}

/// Seconds since the Unix epoch, as JWT times count.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn b64_json(part: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A name from a token: 1 to [`MAX_NAME_BYTES`] bytes, no control characters or spaces.
fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// At most 64 characters of attacker-chosen text, for a log line.
fn bounded(text: &str) -> String {
    text.chars().take(64).collect()
}

fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => "bad signature".into(),
        K::ExpiredSignature => "expired".into(),
        K::ImmatureSignature => "not valid yet (nbf)".into(),
        K::InvalidIssuer => "wrong issuer".into(),
        K::InvalidAudience => "wrong audience".into(),
        K::InvalidAlgorithm => "algorithm does not fit the key".into(),
        K::MissingRequiredClaim(c) => format!("claim `{c}` is missing"),
        _ => "malformed token".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_keeps_only_signing_keys_that_fit_and_is_bounded() {
        let set = serde_json::json!({"keys": [
            {"kty": "oct", "kid": "shared", "k": "c2VjcmV0"},
            {"kty": "EC", "crv": "P-521", "kid": "big", "x": "AA", "y": "AA"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "enc", "use": "enc", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
        ]});
        let keys = parse_key_set(set.to_string().as_bytes()).unwrap();
        assert_eq!(keys.keys().collect::<Vec<_>>(), ["ed"]);
        assert_eq!(keys["ed"].fits, [Algorithm::EdDSA]);
        let many: Vec<Value> = (0..=MAX_KEYS)
            .map(|i| serde_json::json!({"kty": "OKP", "crv": "Ed25519", "kid": i.to_string(), "x": "AA"}))
            .collect();
        let too_many = serde_json::json!({ "keys": many }).to_string();
        assert!(parse_key_set(too_many.as_bytes()).is_err());
        assert!(parse_key_set(b"[]").is_err());
    }

    #[test]
    fn names_from_tokens_are_bounded_and_visible() {
        assert!(usable_name("auth0|abc"));
        assert!(usable_name("alice@example.com"));
        for bad in [
            "",
            "a b",
            "a\nb",
            "a\u{7f}",
            &"x".repeat(MAX_NAME_BYTES + 1),
        ] {
            assert!(!usable_name(bad), "{bad:?}");
        }
    }
}
