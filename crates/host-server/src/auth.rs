//! Who is calling: personal access tokens and service-principal tokens (`ats_…`, stored as
//! SHA-256 only), and short-lived JWTs exchanged from a user's token, whose holder's role and
//! active flag are read again (cached for 30 seconds) on every use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use auto_swe_store::{PlatformRole, SecretString, Store, TOKEN_PREFIX, TokenOwner};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::{JwtAlgorithm, JwtConfig};
use crate::error::{ApiError, ApiResult};

/// How long a user's role and active flag, read for a JWT, are trusted before reading them
/// again.
pub const IDENTITY_CACHE_TTL: Duration = Duration::from_secs(30);

const ISSUER: &str = "auto-swe";
const AUDIENCE: &str = "auto-swe-api";

/// What a person may do across the platform, lowest first: every signed-in user is at least
/// an engineer; the store's platform roles map onto it (`LEAD` → lead, `PLATFORM_OPERATOR` →
/// lead who sees every run, `PLATFORM_ADMIN` → admin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum AccessLevel {
    /// Everyone signed in.
    Engineer,
    /// Team leads.
    Lead,
    /// Platform admins.
    Admin,
}

impl AccessLevel {
    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AccessLevel::Engineer => "ENGINEER",
            AccessLevel::Lead => "LEAD",
            AccessLevel::Admin => "ADMIN",
        }
    }
}

/// A signed-in person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIdentity {
    /// User id.
    pub id: String,
    /// Their email.
    pub email: String,
    /// Their platform role now.
    pub role: AccessLevel,
    /// Whether they see every run (platform admins and operators).
    pub sees_everything: bool,
}

/// A team's non-human caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceIdentity {
    /// Principal id.
    pub id: String,
    /// Its team.
    pub team_id: String,
    /// Connections it may launch on (empty: none).
    pub allowed_connection_ids: Vec<String>,
    /// Templates it may launch (empty: none).
    pub allowed_template_ids: Vec<String>,
}

/// Whoever presented a credential that authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A person.
    User(UserIdentity),
    /// A service principal: only on routes that declare service scopes.
    Service(ServiceIdentity),
}

impl Caller {
    /// The id runs and answers are recorded under.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Caller::User(user) => &user.id,
            Caller::Service(service) => &service.id,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    role: AccessLevel,
    iss: String,
    aud: String,
    iat: u64,
    exp: u64,
    /// The token's own id: what a browser session's CSRF token is bound to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    jti: String,
}

struct Keys {
    algorithm: Algorithm,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// Checks credentials against the store and issues JWTs.
pub struct Authenticator {
    store: Store,
    keys: Keys,
    /// Keys the browser session's CSRF tokens; derived from the signing key, so every server
    /// that accepts a session also accepts its forms.
    csrf_key: hmac::Hmac<sha2::Sha256>,
    ttl: Duration,
    cache: IdentityCache,
    /// What token holders' roles were read as: kept apart from the JWT cache, so a token's use
    /// never vouches for a JWT first used later.
    token_roles: IdentityCache,
}

type IdentityCache = Mutex<HashMap<String, (Instant, Option<UserIdentity>)>>;

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("algorithm", &self.keys.algorithm)
            .finish_non_exhaustive()
    }
}

/// Why the JWT keys cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[error("JWT keys: {0}")]
pub struct KeyError(String);

impl Authenticator {
    /// Loads the signing keys `config` names; `env_secret` is `AUTO_SWE_JWT_SECRET`.
    pub fn new(
        store: Store,
        config: &JwtConfig,
        env_secret: Option<SecretString>,
    ) -> Result<Self, KeyError> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| KeyError(format!("{}: {e}", path.display())))
        };
        let mut material = Vec::new();
        let keys = match config.algorithm {
            JwtAlgorithm::HS256 => {
                let secret = match (&config.secret_file, env_secret) {
                    (Some(path), _) => read(path)?,
                    (None, Some(secret)) => secret.expose().as_bytes().to_vec(),
                    (None, None) => {
                        tracing::warn!(
                            "no JWT secret configured: JWTs are signed with a random key and \
                             stop working when this process ends"
                        );
                        let mut bytes = vec![0_u8; 32];
                        getrandom::getrandom(&mut bytes)
                            .map_err(|e| KeyError(format!("random key: {e}")))?;
                        bytes
                    }
                };
                if secret.len() < 32 {
                    return Err(KeyError(
                        "an HS256 secret needs at least 32 bytes".to_owned(),
                    ));
                }
                material.clone_from(&secret);
                Keys {
                    algorithm: Algorithm::HS256,
                    encoding: EncodingKey::from_secret(&secret),
                    decoding: DecodingKey::from_secret(&secret),
                }
            }
            JwtAlgorithm::RS256 => {
                let (Some(private), Some(public)) =
                    (&config.private_key_file, &config.public_key_file)
                else {
                    return Err(KeyError("RS256 needs both key files".to_owned()));
                };
                let private = read(private)?;
                material.clone_from(&private);
                Keys {
                    algorithm: Algorithm::RS256,
                    encoding: EncodingKey::from_rsa_pem(&private)
                        .map_err(|e| KeyError(format!("private key: {e}")))?,
                    decoding: DecodingKey::from_rsa_pem(&read(public)?)
                        .map_err(|e| KeyError(format!("public key: {e}")))?,
                }
            }
        };
        let csrf_key = {
            use hmac::Mac as _;
            use sha2::Digest as _;
            let mut hash = sha2::Sha256::new();
            hash.update(b"auto-swe viewer csrf\0");
            hash.update(&material);
            hmac::Hmac::<sha2::Sha256>::new_from_slice(&hash.finalize())
                .map_err(|e| KeyError(format!("CSRF key: {e}")))?
        };
        Ok(Self {
            store,
            keys,
            csrf_key,
            ttl: Duration::from_secs(config.ttl_seconds),
            cache: Mutex::new(HashMap::new()),
            token_roles: Mutex::new(HashMap::new()),
        })
    }

    /// Who the `Authorization` header names.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn authenticate(&self, authorization: Option<&str>) -> ApiResult<Caller> {
        let Some(value) = authorization else {
            return Err(ApiError::unauthenticated(
                "send Authorization: Bearer <token>",
            ));
        };
        let Some(credential) = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
        else {
            return Err(ApiError::unauthenticated(
                "the Authorization header is not a Bearer credential",
            ));
        };
        if credential.starts_with(TOKEN_PREFIX) {
            return self.token_caller(credential).await;
        }
        if credential.starts_with("eyJ") {
            return self.jwt_caller(credential).await.map(Caller::User);
        }
        Err(ApiError::unauthenticated(
            "the credential is not recognised",
        ))
    }

    async fn token_caller(&self, credential: &str) -> ApiResult<Caller> {
        let token = self
            .store
            .authenticate_token(&SecretString::new(credential))
            .await
            .map_err(|e| ApiError::from_store(&e, "token"))?
            .ok_or_else(|| ApiError::unauthenticated("the token is unknown, expired or revoked"))?;
        match token.owner {
            // The token's row was read just now (revoked, expired or inactive-owner tokens
            // never authenticate); the owner's role is read at most `IDENTITY_CACHE_TTL` ago,
            // as for a JWT.
            TokenOwner::User(id) => self
                .identity(&self.token_roles, &id)
                .await?
                .map(Caller::User)
                .ok_or_else(|| ApiError::unauthenticated("the token's user is not active")),
            TokenOwner::ServicePrincipal(id) => {
                let principal = self
                    .store
                    .get_service_principal(&id)
                    .await
                    .map_err(|e| ApiError::from_store(&e, "service principal"))?;
                Ok(Caller::Service(ServiceIdentity {
                    id: principal.id,
                    team_id: principal.team_id,
                    allowed_connection_ids: principal.allowed_connection_ids,
                    allowed_template_ids: principal.allowed_template_ids,
                }))
            }
            _ => Err(ApiError::unauthenticated("the token's owner is not known")),
        }
    }

    async fn jwt_caller(&self, credential: &str) -> ApiResult<UserIdentity> {
        self.jwt_session(credential).await.map(|(user, _)| user)
    }

    /// The user a browser session's JWT names, as they are now (role and active flag read at
    /// most `IDENTITY_CACHE_TTL` ago, as for a bearer JWT), and the JWT's id.
    pub(crate) async fn jwt_session(&self, credential: &str) -> ApiResult<(UserIdentity, String)> {
        let mut validation = Validation::new(self.keys.algorithm);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.leeway = 5;
        let claims = jsonwebtoken::decode::<Claims>(credential, &self.keys.decoding, &validation)
            .map_err(|e| ApiError::unauthenticated(format!("the JWT is not valid: {e}")))?
            .claims;
        let user = self
            .identity(&self.cache, &claims.sub)
            .await?
            .ok_or_else(|| ApiError::unauthenticated("the user is not active"))?;
        Ok((user, claims.jti))
    }

    /// The CSRF token of the browser session whose JWT id is `session_id`: an HMAC of the id,
    /// so only this server (and those sharing its signing key) can make one.
    pub(crate) fn csrf_token(&self, session_id: &str) -> String {
        use hmac::Mac as _;
        hex::encode(self.csrf_mac(session_id).finalize().into_bytes())
    }

    /// Whether `presented` is the CSRF token of `session_id` (compared in constant time).
    pub(crate) fn csrf_valid(&self, session_id: &str, presented: &str) -> bool {
        use hmac::Mac as _;
        if session_id.is_empty() {
            return false;
        }
        hex::decode(presented)
            .is_ok_and(|bytes| self.csrf_mac(session_id).verify_slice(&bytes).is_ok())
    }

    fn csrf_mac(&self, session_id: &str) -> hmac::Hmac<sha2::Sha256> {
        use hmac::Mac as _;
        let mut mac = self.csrf_key.clone();
        mac.update(session_id.as_bytes());
        mac
    }

    /// A user as `cache` read them at most `IDENTITY_CACHE_TTL` ago, else as the store says now
    /// (and remembered); `None` for inactive or gone.
    async fn identity(
        &self,
        cache: &IdentityCache,
        user_id: &str,
    ) -> ApiResult<Option<UserIdentity>> {
        if let Some(known) = cached(cache, user_id) {
            return Ok(known);
        }
        let current = self.read_user(user_id).await?;
        remember(cache, user_id, current.clone());
        Ok(current)
    }

    /// A user as they are now (read at most `IDENTITY_CACHE_TTL` ago), `None` when inactive or
    /// gone: for acting under a user's authorization without their credential (a trigger's
    /// creator when a delivery starts a run).
    pub async fn user(&self, user_id: &str) -> ApiResult<Option<UserIdentity>> {
        self.identity(&self.token_roles, user_id).await
    }

    /// Forgets what was read about a user (after their role or active flag changed here).
    pub fn forget(&self, user_id: &str) {
        for cache in [&self.cache, &self.token_roles] {
            if let Ok(mut cache) = cache.lock() {
                cache.remove(user_id);
            }
        }
    }

    /// The user as they are now, `None` when inactive or gone.
    async fn read_user(&self, id: &str) -> ApiResult<Option<UserIdentity>> {
        let user = match self.store.get_user(id).await {
            Ok(user) => user,
            Err(e) if e.code() == "STORE_NOT_FOUND" => return Ok(None),
            Err(e) => return Err(ApiError::from_store(&e, "user")),
        };
        if !user.active {
            return Ok(None);
        }
        let platform = self
            .store
            .platform_role(id)
            .await
            .map_err(|e| ApiError::from_store(&e, "user"))?;
        let (role, sees_everything) = match platform {
            Some(PlatformRole::Admin) => (AccessLevel::Admin, true),
            Some(PlatformRole::Operator) => (AccessLevel::Lead, true),
            Some(PlatformRole::Lead) => (AccessLevel::Lead, false),
            _ => (AccessLevel::Engineer, false),
        };
        Ok(Some(UserIdentity {
            id: user.id,
            email: user.email,
            role,
            sees_everything,
        }))
    }

    /// A JWT for `user`, valid for the configured lifetime; returns it and its expiry (seconds
    /// since the epoch).
    pub fn issue(&self, user: &UserIdentity) -> ApiResult<(String, u64)> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let exp = now + self.ttl.as_secs();
        let claims = Claims {
            sub: user.id.clone(),
            role: user.role,
            iss: ISSUER.to_owned(),
            aud: AUDIENCE.to_owned(),
            iat: now,
            exp,
            jti: random_id(),
        };
        let token = jsonwebtoken::encode(
            &Header::new(self.keys.algorithm),
            &claims,
            &self.keys.encoding,
        )
        .map_err(|e| ApiError::internal("JWT_SIGNING_FAILED", e.to_string()))?;
        Ok((token, exp))
    }
}

/// 16 random bytes in hex (empty only if the system has no randomness, which then fails the
/// session check rather than sharing an id).
fn random_id() -> String {
    let mut bytes = [0_u8; 16];
    match getrandom::getrandom(&mut bytes) {
        Ok(()) => hex::encode(bytes),
        Err(_) => String::new(),
    }
}

/// What was read about a user in the last 30 seconds: `Some(None)` for inactive or gone.
#[expect(
    clippy::option_option,
    reason = "not cached, cached as inactive, cached as active"
)]
fn cached(cache: &IdentityCache, user_id: &str) -> Option<Option<UserIdentity>> {
    let cache = cache.lock().ok()?;
    cache
        .get(user_id)
        .filter(|(at, _)| at.elapsed() < IDENTITY_CACHE_TTL)
        .map(|(_, user)| user.clone())
}

fn remember(cache: &IdentityCache, user_id: &str, user: Option<UserIdentity>) {
    if let Ok(mut cache) = cache.lock() {
        // Bounded: expired entries go first, and a full map starts over.
        cache.retain(|_, (at, _)| at.elapsed() < IDENTITY_CACHE_TTL);
        if cache.len() >= 10_000 {
            cache.clear();
        }
        cache.insert(user_id.to_owned(), (Instant::now(), user));
    }
}
