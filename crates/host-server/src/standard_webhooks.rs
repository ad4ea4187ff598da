//! Standard Webhooks signatures, as a trigger's deliveries carry them.
//!
//! A trigger's secret is `whsec_` and 32 random bytes in base64; the HMAC key is those bytes.
//! A delivery carries `webhook-id`, `webhook-timestamp` (seconds since the epoch) and
//! `webhook-signature`: space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
//! entries, any one of which may match (a sender rotating its secret signs with both). The
//! timestamp must be within five minutes of now; signatures are compared in constant time.

use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use auto_swe_store::SecretString;

/// What every trigger secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// How far a delivery's timestamp may be from now, either way, in seconds.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;
/// The header naming the delivery (the same on every retry of it).
pub const ID_HEADER: &str = "webhook-id";
/// The header with the signing time.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header with the signatures.
pub const STANDARD_SIGNATURE_HEADER: &str = "webhook-signature";
/// The most signatures one header may carry.
pub const MAX_SIGNATURES: usize = 16;

/// Why a delivery does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// A required header is absent or empty.
    #[error("the delivery has no {0} header")]
    MissingHeader(&'static str),
    /// A header is present but not of its form.
    #[error("the {0} header is not valid")]
    InvalidHeader(&'static str),
    /// The timestamp is more than five minutes from now.
    #[error("the webhook-timestamp is more than five minutes from now")]
    TimestampOutOfRange,
    /// No signature matches.
    #[error("no signature matches")]
    NoMatch,
    /// The secret is not a `whsec_` secret.
    #[error("the secret is not a whsec_ secret")]
    BadSecret,
}

/// A delivery's signing headers, read and checked for form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHeaders {
    /// `webhook-id`: 1 to 255 printable ASCII characters.
    pub id: String,
    /// `webhook-timestamp`, seconds since the epoch.
    pub timestamp: i64,
    /// `webhook-signature` as sent.
    pub signatures: String,
}

/// A fresh secret: `whsec_` and 32 random bytes in base64.
pub fn generate_secret() -> Result<SecretString, getrandom::Error> {
    let mut bytes = [0_u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(SecretString::new(format!(
        "{SECRET_PREFIX}{}",
        STANDARD.encode(bytes)
    )))
}

fn key(secret: &SecretString) -> Result<Vec<u8>, SignatureError> {
    let encoded = secret
        .expose()
        .strip_prefix(SECRET_PREFIX)
        .ok_or(SignatureError::BadSecret)?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| SignatureError::BadSecret)?;
    if key.is_empty() {
        return Err(SignatureError::BadSecret);
    }
    Ok(key)
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Result<Hmac<Sha256>, SignatureError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| SignatureError::BadSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(mac)
}

/// The `webhook-signature` value a sender holding `secret` sends (one `v1,` entry).
pub fn sign_delivery(
    secret: &SecretString,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, SignatureError> {
    let mac = mac(&key(secret)?, id, timestamp, body)?;
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

fn header<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<&'a str, SignatureError> {
    let value = headers
        .get(name)
        .ok_or(SignatureError::MissingHeader(name))?
        .to_str()
        .map_err(|_| SignatureError::InvalidHeader(name))?
        .trim();
    if value.is_empty() {
        return Err(SignatureError::MissingHeader(name));
    }
    Ok(value)
}

/// Reads the three headers; refuses a missing one, an id that is not 1 to 255 printable ASCII
/// characters and a timestamp that is not a whole number of seconds.
pub fn read_headers(headers: &HeaderMap) -> Result<SignedHeaders, SignatureError> {
    let id = header(headers, ID_HEADER)?;
    let timestamp = header(headers, TIMESTAMP_HEADER)?;
    let signatures = header(headers, STANDARD_SIGNATURE_HEADER)?;
    if id.len() > 255 || !id.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(SignatureError::InvalidHeader(ID_HEADER));
    }
    if timestamp.len() > 12 || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::InvalidHeader(TIMESTAMP_HEADER));
    }
    let timestamp = timestamp
        .parse()
        .map_err(|_| SignatureError::InvalidHeader(TIMESTAMP_HEADER))?;
    Ok(SignedHeaders {
        id: id.to_owned(),
        timestamp,
        signatures: signatures.to_owned(),
    })
}

/// Refuses a timestamp more than five minutes from `now` (seconds since the epoch).
pub fn check_timestamp(timestamp: i64, now: i64) -> Result<(), SignatureError> {
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err(SignatureError::TimestampOutOfRange);
    }
    Ok(())
}

/// Whether one of the `v1,` signatures in `signed.signatures` is `secret`'s over `body`. Each
/// candidate is compared in constant time; entries of other versions are passed over.
pub fn verify(
    secret: &SecretString,
    signed: &SignedHeaders,
    body: &[u8],
) -> Result<(), SignatureError> {
    let mac = mac(&key(secret)?, &signed.id, signed.timestamp, body)?;
    let mut matched = false;
    for entry in signed.signatures.split(' ').take(MAX_SIGNATURES) {
        let Some(encoded) = entry.strip_prefix("v1,") else {
            continue;
        };
        let Ok(candidate) = STANDARD.decode(encoded) else {
            continue;
        };
        matched |= mac.clone().verify_slice(&candidate).is_ok();
    }
    if matched {
        Ok(())
    } else {
        Err(SignatureError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    /// The example in the Standard Webhooks specification's reference libraries.
    const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SPEC_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SPEC_TIMESTAMP: i64 = 1_614_265_330;
    const SPEC_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SPEC_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn signed(signatures: &str) -> SignedHeaders {
        SignedHeaders {
            id: SPEC_ID.to_owned(),
            timestamp: SPEC_TIMESTAMP,
            signatures: signatures.to_owned(),
        }
    }

    fn secret() -> SecretString {
        SecretString::new(SPEC_SECRET)
    }

    #[test]
    fn signs_as_the_specification_does() {
        assert_eq!(
            sign_delivery(&secret(), SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY).unwrap(),
            SPEC_SIGNATURE
        );
        assert_eq!(
            verify(&secret(), &signed(SPEC_SIGNATURE), SPEC_BODY),
            Ok(())
        );
    }

    #[test]
    fn any_change_to_what_is_signed_is_refused() {
        let refused = Err(SignatureError::NoMatch);
        assert_eq!(
            verify(
                &secret(),
                &signed(SPEC_SIGNATURE),
                br#"{"test": 2432232315}"#
            ),
            refused
        );
        let mut other_id = signed(SPEC_SIGNATURE);
        other_id.id.push('x');
        assert_eq!(verify(&secret(), &other_id, SPEC_BODY), refused);
        let mut other_time = signed(SPEC_SIGNATURE);
        other_time.timestamp += 1;
        assert_eq!(verify(&secret(), &other_time, SPEC_BODY), refused);
        let other_secret = generate_secret().unwrap();
        assert_eq!(
            verify(&other_secret, &signed(SPEC_SIGNATURE), SPEC_BODY),
            refused
        );
        // The separators are part of what is signed: moving them changes the signature.
        let shifted = SignedHeaders {
            id: format!("{SPEC_ID}.1"),
            timestamp: 614_265_330,
            signatures: SPEC_SIGNATURE.to_owned(),
        };
        assert_eq!(verify(&secret(), &shifted, SPEC_BODY), refused);
    }

    #[test]
    fn one_matching_signature_among_several_is_enough() {
        let other = sign_delivery(
            &generate_secret().unwrap(),
            SPEC_ID,
            SPEC_TIMESTAMP,
            SPEC_BODY,
        )
        .unwrap();
        for list in [
            format!("{other} {SPEC_SIGNATURE}"),
            format!("{SPEC_SIGNATURE} {other}"),
            format!("v2,abc {SPEC_SIGNATURE}"),
            format!("v1,!!notbase64!! {SPEC_SIGNATURE}"),
        ] {
            assert_eq!(
                verify(&secret(), &signed(&list), SPEC_BODY),
                Ok(()),
                "{list}"
            );
        }
    }

    #[test]
    fn malformed_or_foreign_signatures_are_refused() {
        let digest = SPEC_SIGNATURE.strip_prefix("v1,").unwrap();
        let truncated = &SPEC_SIGNATURE[..SPEC_SIGNATURE.len() - 4];
        for bad in [
            "",
            "v1,",
            digest,
            &format!("v2,{digest}"),
            &format!("v1 ,{digest}"),
            &format!("V1,{digest}"),
            truncated,
            "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ] {
            assert_eq!(
                verify(&secret(), &signed(bad), SPEC_BODY),
                Err(SignatureError::NoMatch),
                "{bad}"
            );
        }
        // Past the first sixteen entries nothing is looked at.
        let padded = format!("{}{SPEC_SIGNATURE}", "v1,x ".repeat(MAX_SIGNATURES));
        assert_eq!(
            verify(&secret(), &signed(&padded), SPEC_BODY),
            Err(SignatureError::NoMatch)
        );
        let within = format!("{}{SPEC_SIGNATURE}", "v1,x ".repeat(MAX_SIGNATURES - 1));
        assert_eq!(verify(&secret(), &signed(&within), SPEC_BODY), Ok(()));
    }

    #[test]
    fn secrets_are_whsec_and_32_random_bytes() {
        let one = generate_secret().unwrap();
        let two = generate_secret().unwrap();
        assert_ne!(one, two);
        let encoded = one.expose().strip_prefix(SECRET_PREFIX).unwrap();
        assert_eq!(STANDARD.decode(encoded).unwrap().len(), 32);
        for bad in [
            "",
            "whsec_",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_***",
        ] {
            assert_eq!(
                sign_delivery(&SecretString::new(bad), SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY),
                Err(SignatureError::BadSecret),
                "{bad}"
            );
            assert_eq!(
                verify(&SecretString::new(bad), &signed(SPEC_SIGNATURE), SPEC_BODY),
                Err(SignatureError::BadSecret),
                "{bad}"
            );
        }
    }

    #[test]
    fn timestamps_are_taken_within_five_minutes_either_way() {
        let now = SPEC_TIMESTAMP;
        for ok in [now, now - 300, now + 300, now - 1, now + 1] {
            assert_eq!(check_timestamp(ok, now), Ok(()), "{ok}");
        }
        for stale in [now - 301, now + 301, 0, now * 2] {
            assert_eq!(
                check_timestamp(stale, now),
                Err(SignatureError::TimestampOutOfRange),
                "{stale}"
            );
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn headers_are_required_and_of_their_form() {
        let good = [
            (ID_HEADER, SPEC_ID),
            (TIMESTAMP_HEADER, "1614265330"),
            (STANDARD_SIGNATURE_HEADER, SPEC_SIGNATURE),
        ];
        assert_eq!(read_headers(&headers(&good)), Ok(signed(SPEC_SIGNATURE)));
        for missing in 0..3 {
            let mut some: Vec<_> = good.to_vec();
            let (name, _) = some.remove(missing);
            assert_eq!(
                read_headers(&headers(&some)),
                Err(SignatureError::MissingHeader(name))
            );
            some.insert(missing, (name, "  "));
            assert_eq!(
                read_headers(&headers(&some)),
                Err(SignatureError::MissingHeader(name))
            );
        }
        let long_id = "i".repeat(256);
        let at_most = "i".repeat(255);
        for (name, value, ok) in [
            (ID_HEADER, long_id.as_str(), false),
            (ID_HEADER, at_most.as_str(), true),
            (ID_HEADER, "has space", false),
            (ID_HEADER, "é", false),
            (TIMESTAMP_HEADER, "-5", false),
            (TIMESTAMP_HEADER, "1.5", false),
            (TIMESTAMP_HEADER, "1614265330x", false),
            (TIMESTAMP_HEADER, "9999999999999", false),
            (TIMESTAMP_HEADER, "999999999999", true),
        ] {
            let mut some = good.to_vec();
            some.retain(|(n, _)| *n != name);
            some.push((name, value));
            let read = read_headers(&headers(&some));
            if ok {
                assert!(read.is_ok(), "{name}: {value}");
            } else {
                assert_eq!(read, Err(SignatureError::InvalidHeader(name)), "{value}");
            }
        }
        let mut binary = headers(&good);
        binary.insert(ID_HEADER, HeaderValue::from_bytes(b"\xffid").unwrap());
        assert_eq!(
            read_headers(&binary),
            Err(SignatureError::InvalidHeader(ID_HEADER))
        );
    }
}
