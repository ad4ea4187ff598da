//! Triggers: signed webhooks that start runs of a stored template, and the ledger of their
//! deliveries (one row per trigger and `webhook-id`, kept seven days) that makes a retried
//! delivery start nothing new and counts the runs each trigger may start.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::{StoreError, StoreResult};
use crate::secret::SecretString;

/// Runs a trigger may start in any minute.
pub const TRIGGER_RUNS_PER_MINUTE: u32 = 10;
/// Runs a trigger may start in any 24 hours unless it says otherwise.
pub const DEFAULT_TRIGGER_DAILY_LIMIT: u32 = 50;
/// The highest daily number a trigger may set.
pub const MAX_TRIGGER_DAILY_LIMIT: u32 = 1_000;
/// Event types a trigger may be limited to.
pub const MAX_TRIGGER_EVENT_TYPES: usize = 20;
/// Triggers one template may have.
pub const MAX_TRIGGERS_PER_TEMPLATE: i64 = 50;
/// How long a delivery is kept by its `webhook-id`.
pub const DELIVERY_RETENTION: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// How long a delivery may stay starting before a retry of it is taken again (its starter
/// stopped in between).
pub const DELIVERY_START_TIMEOUT: Duration = Duration::from_secs(60);

/// The minute and day windows the limits count in.
pub(crate) const MINUTE: Duration = Duration::from_secs(60);
pub(crate) const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// A trigger to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTrigger {
    /// The template whose newest version its deliveries run.
    pub template_id: String,
    /// Name (1 to 200 characters).
    pub name: String,
    /// The user under whose launch authorization its runs start.
    pub created_by: String,
    /// Runs a day (1 to 1,000); 50 when absent.
    pub daily_limit: Option<u32>,
    /// The event types (the body's `type`) it starts runs for; every event when absent.
    pub event_types: Option<Vec<String>>,
}

/// A stored trigger. Its secret is sealed and never part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trigger {
    /// Id.
    pub id: String,
    /// The template.
    pub template_id: String,
    /// Name.
    pub name: String,
    /// Its creator, whose launch authorization its runs use.
    pub created_by: String,
    /// A paused trigger acknowledges deliveries and starts nothing.
    pub paused: bool,
    /// Runs a day.
    pub daily_limit: u32,
    /// The event types it starts runs for; `None` for every event.
    pub event_types: Option<Vec<String>>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change (including a new secret).
    pub updated_at: Timestamp,
}

/// A change to a trigger; absent fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TriggerUpdate {
    /// New name.
    pub name: Option<String>,
    /// Pause or resume.
    pub paused: Option<bool>,
    /// New daily number.
    pub daily_limit: Option<u32>,
    /// New event types (`Some(None)`: every event; `None`: unchanged).
    pub event_types: Option<Option<Vec<String>>>,
}

string_enum! {
    /// Where a delivery stands in the ledger.
    DeliveryState, "delivery state" {
        /// Admitted; its run is being started.
        Starting => "STARTING",
        /// Its run started.
        Started => "STARTED",
        /// Acknowledged and deliberately not run (see its reason).
        Skipped => "SKIPPED",
        /// Its run could not begin; a retry is taken again.
        Failed => "FAILED",
    }
}

string_enum! {
    /// Why a delivery started nothing.
    SkipReason, "skip reason" {
        /// The trigger was paused.
        Paused => "PAUSED",
        /// The event's type is not one the trigger is limited to (or it had none).
        EventType => "EVENT_TYPE_NOT_SELECTED",
    }
}

string_enum! {
    /// Which limit a delivery was over.
    TriggerLimit, "trigger limit" {
        /// Ten runs in a minute.
        PerMinute => "PER_MINUTE",
        /// The trigger's daily number.
        Daily => "DAILY",
    }
}

/// What the ledger made of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admission {
    /// New, or taken again: start its run, then record it started or failed.
    Admitted,
    /// A retry of a delivery that started this run: start nothing.
    Replayed {
        /// The run the first delivery started.
        run_id: String,
    },
    /// Skipped, now or when first seen: start nothing.
    Skipped {
        /// Why.
        reason: SkipReason,
    },
    /// A retry while the first delivery's run is starting: try again later.
    InProgress {
        /// How long until a retry may find it decided.
        retry_after: Duration,
    },
    /// Over a limit; nothing was recorded, so a later retry is taken again.
    Limited {
        /// Which limit.
        limit: TriggerLimit,
        /// How long until the window has room again.
        retry_after: Duration,
    },
}

/// One row of a trigger's delivery ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TriggerDelivery {
    /// The sender's `webhook-id`.
    pub webhook_id: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// The body's `type`, when it had one.
    pub event_type: Option<String>,
    /// The run it started.
    pub run_id: Option<String>,
    /// Why it was skipped.
    pub reason: Option<SkipReason>,
    /// When it was (last) admitted.
    pub admitted_at: Timestamp,
}

/// Triggers and their delivery ledger.
///
/// Implementors guarantee: the secret is sealed to its row and only
/// [`TriggerStore::trigger_secret`] returns it; admission, the ledger row and the limit count
/// are one serialized write per trigger, so concurrent deliveries never both pass a limit
/// that has room for one, and one `webhook-id` is admitted once at a time.
#[async_trait]
pub trait TriggerStore: Send + Sync {
    /// Creates a trigger holding `secret` (sealed); at most 50 per template.
    async fn create_trigger(
        &self,
        trigger: NewTrigger,
        secret: &SecretString,
    ) -> StoreResult<Trigger>;
    /// Reads a trigger.
    async fn get_trigger(&self, id: &str) -> StoreResult<Trigger>;
    /// A template's triggers, oldest first.
    async fn list_triggers(&self, template_id: &str) -> StoreResult<Vec<Trigger>>;
    /// Changes a trigger.
    async fn update_trigger(&self, id: &str, update: TriggerUpdate) -> StoreResult<Trigger>;
    /// Replaces a trigger's secret; the old one stops verifying at once.
    async fn rotate_trigger_secret(&self, id: &str, secret: &SecretString) -> StoreResult<Trigger>;
    /// Deletes a trigger and its ledger.
    async fn delete_trigger(&self, id: &str) -> StoreResult<()>;
    /// Opens a trigger's secret, to verify a delivery.
    async fn trigger_secret(&self, id: &str) -> StoreResult<SecretString>;
    /// Decides a delivery: replayed, skipped, starting elsewhere, over a limit, or admitted
    /// (recorded as starting, counted against the limits in the same write).
    async fn admit_delivery(
        &self,
        trigger_id: &str,
        webhook_id: &str,
        event_type: Option<&str>,
    ) -> StoreResult<Admission>;
    /// Records that an admitted delivery started `run_id`.
    async fn mark_delivery_started(
        &self,
        trigger_id: &str,
        webhook_id: &str,
        run_id: &str,
    ) -> StoreResult<()>;
    /// Records that an admitted delivery's run could not begin: a retry is taken again and it
    /// no longer counts against the limits.
    async fn mark_delivery_failed(&self, trigger_id: &str, webhook_id: &str) -> StoreResult<()>;
    /// A trigger's ledger, newest first (at most `limit` rows, 1 to 500).
    async fn trigger_deliveries(
        &self,
        trigger_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<TriggerDelivery>>;
}

/// Checks a trigger's name.
pub(crate) fn validate_name(name: &str) -> StoreResult<()> {
    crate::limits::short_text("trigger name", name)?;
    if name.chars().count() > 200 {
        return Err(StoreError::invalid(
            "trigger name",
            "at most 200 characters",
        ));
    }
    Ok(())
}

/// Checks a daily number.
pub(crate) fn validate_daily_limit(limit: u32) -> StoreResult<()> {
    if limit == 0 || limit > MAX_TRIGGER_DAILY_LIMIT {
        return Err(StoreError::invalid(
            "daily limit",
            format!("must be between 1 and {MAX_TRIGGER_DAILY_LIMIT}"),
        ));
    }
    Ok(())
}

/// Checks event types: 1 to 20 distinct non-empty short names.
pub(crate) fn validate_event_types(types: Option<&[String]>) -> StoreResult<()> {
    let Some(types) = types else {
        return Ok(());
    };
    if types.is_empty() || types.len() > MAX_TRIGGER_EVENT_TYPES {
        return Err(StoreError::invalid(
            "event types",
            format!("1 to {MAX_TRIGGER_EVENT_TYPES} types, or none for every event"),
        ));
    }
    for (i, kind) in types.iter().enumerate() {
        crate::limits::short_text("event type", kind)?;
        if kind.len() > 200 {
            return Err(StoreError::invalid("event type", "at most 200 bytes"));
        }
        if types[..i].contains(kind) {
            return Err(StoreError::invalid("event types", "listed twice"));
        }
    }
    Ok(())
}

/// Checks a `webhook-id`: 1 to 255 printable ASCII characters.
pub(crate) fn validate_webhook_id(id: &str) -> StoreResult<()> {
    if id.is_empty() || id.len() > 255 || !id.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(StoreError::invalid(
            "webhook id",
            "1 to 255 printable ASCII characters",
        ));
    }
    Ok(())
}

/// How long from `now` until `since` is `window` old (at least a second).
pub(crate) fn wait_until_out(since: i64, window: Duration, now: i64) -> Duration {
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let left = since.saturating_add(window_ms).saturating_sub(now);
    Duration::from_millis(u64::try_from(left).unwrap_or(0)).max(Duration::from_secs(1))
}

/// Whether a delivery of `event_type` is one `types` selects.
pub(crate) fn selects(types: Option<&[String]>, event_type: Option<&str>) -> bool {
    match (types, event_type) {
        (None, _) => true,
        (Some(types), Some(kind)) => types.iter().any(|t| t == kind),
        (Some(_), None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_filters_select_only_listed_types() {
        let types = vec!["issue.created".to_owned()];
        assert!(selects(None, None));
        assert!(selects(None, Some("x")));
        assert!(selects(Some(&types), Some("issue.created")));
        assert!(!selects(Some(&types), Some("issue.updated")));
        assert!(!selects(Some(&types), None));
    }

    #[test]
    fn waits_round_up_to_a_second() {
        assert_eq!(
            wait_until_out(1_000, MINUTE, 1_000),
            Duration::from_secs(60)
        );
        assert_eq!(
            wait_until_out(1_000, MINUTE, 60_500),
            Duration::from_millis(500).max(Duration::from_secs(1))
        );
        assert_eq!(
            wait_until_out(1_000, MINUTE, 200_000),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(validate_daily_limit(0).is_err());
        assert!(validate_daily_limit(1_001).is_err());
        assert!(validate_daily_limit(1_000).is_ok());
        assert!(validate_event_types(Some(&[])).is_err());
        let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
        assert!(validate_event_types(Some(&many)).is_err());
        assert!(validate_event_types(Some(&["a".to_owned(), "a".to_owned()])).is_err());
        assert!(validate_webhook_id("msg_1").is_ok());
        for bad in ["", "with space", "é", &"x".repeat(256)] {
            assert!(validate_webhook_id(bad).is_err(), "{bad}");
        }
        assert!(validate_name(&"n".repeat(201)).is_err());
    }
}
