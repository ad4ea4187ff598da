//! What the worker and the server read about runs: lists by keyset, visibility inputs, reaper
//! candidates, spend in flight, trace pages, the human-step inbox and the audit trail.

use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::error::{StoreError, StoreResult};
use crate::records::admin::AuditEntry;
use crate::records::execution::{AgentTrace, HumanStep};
use crate::records::runs::{MonthlyUsage, Run, RunStatus, Spend};

/// The most rows one page may hold.
pub const MAX_PAGE: u32 = 500;

/// Which runs to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunListQuery {
    /// Only this org's runs.
    pub org_id: Option<String>,
    /// Only this team's runs.
    pub team_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only runs this user launched.
    pub launched_by: Option<String>,
    /// Only runs of this template version.
    pub template_version_id: Option<String>,
    /// Only runs whose id starts with this text (a pasted, shortened run id); `%` and `_` are
    /// matched literally.
    pub id_prefix: Option<String>,
    /// Only runs this viewer may see ([`RunViewer`]); `None` lists every run (platform
    /// admins and operators).
    pub visible_to: Option<RunViewer>,
    /// Page size (1..=500).
    pub limit: u32,
    /// Where the previous page ended ([`RunPage::next`]); `None` for the first page.
    pub cursor: Option<String>,
}

/// Who is looking, for the run-visibility predicate: a run is visible to its requester, to
/// members of the team that owns the connection (repository) its work request targets or the
/// template it runs, and — for a run with no connection that one of their team's service
/// principals requested — to that team's members.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunViewer {
    /// A signed-in user: their own runs and their teams' (through their team memberships).
    User(String),
    /// A service principal: its own runs and those of its team's connections and templates.
    ServicePrincipal {
        /// The principal.
        id: String,
        /// Its team.
        team_id: String,
    },
}

impl RunListQuery {
    /// The first page of `limit` runs, unfiltered.
    #[must_use]
    pub fn first(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }
}

/// One page of runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunPage {
    /// Runs, newest first.
    pub runs: Vec<Run>,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
}

/// What deciding who may see a run needs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunVisibility {
    /// The run.
    pub run_id: String,
    /// Its org.
    pub org_id: Option<String>,
    /// Its team.
    pub team_id: Option<String>,
    /// Who asked for it: the launching user, else the work request's submitter.
    pub requester: Option<String>,
    /// The connection (repository) its work request targets.
    pub repository_connection_id: Option<String>,
    /// The team that owns its template.
    pub template_owner_team_id: Option<String>,
}

/// Which unfinalized runs a reaper looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReapQuery {
    /// Only runs created at least this long ago (database time).
    pub older_than: Duration,
    /// At most this many (1..=500).
    pub limit: u32,
    /// Only runs this engine drives: a reaper asks one engine about its own runs.
    pub engine: crate::RunEngine,
}

/// An org's spend for a month: what finalize billed, and what runs still in flight have spent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrgSpend {
    /// Finalized runs of the month.
    pub finalized: MonthlyUsage,
    /// Spend so far of the org's runs that have not ended.
    pub in_flight: Spend,
    /// How many runs are in flight.
    pub in_flight_runs: i64,
}

/// A page of a run's traces after a `since` cursor.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TracePage {
    /// Traces with `seq > since`, oldest first.
    pub traces: Vec<AgentTrace>,
    /// How many traces the run has in all.
    pub total: i64,
    /// Pass as `since` for the next page: the last `seq` returned (or the `since` given).
    pub since: i64,
}

/// Pending human steps, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxQuery {
    /// The org whose runs' steps to list.
    pub org_id: String,
    /// Only this team's runs.
    pub team_id: Option<String>,
    /// Page size (1..=500).
    pub limit: u32,
}

/// Audit entries by actor and time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this actor's entries.
    pub actor: Option<String>,
    /// Only entries at or after this time.
    pub since: Option<Timestamp>,
    /// Only entries before this time.
    pub until: Option<Timestamp>,
    /// Page size (1..=500).
    pub limit: u32,
    /// Where the previous page ended ([`AuditPage::next`]).
    pub cursor: Option<String>,
}

/// One page of audit entries, oldest first.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuditPage {
    /// Entries.
    pub entries: Vec<AuditEntry>,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
}

/// Reads over runs for the worker and the server.
///
/// Implementors guarantee: pages are keyset-ordered (a row written while paging never shifts
/// another between pages); a cursor that was not produced by this store, or was altered, is
/// refused with `STORE_INVALID_INPUT`; reaper candidates are stamped `reap_checked_at` in the
/// same statement that picks them, by the database's clock, so concurrent reapers take turns.
#[async_trait]
pub trait RunQueryStore: Send + Sync {
    /// Lists runs, newest first.
    async fn list_runs(&self, query: &RunListQuery) -> StoreResult<RunPage>;
    /// The run, when `viewer` may see it (`None` sees every run): the same predicate as
    /// [`list_runs`](Self::list_runs)' `visible_to`, for one id. `None` both when the run does
    /// not exist and when it is not the viewer's to see.
    async fn visible_run(
        &self,
        run_id: &str,
        viewer: Option<&RunViewer>,
    ) -> StoreResult<Option<Run>>;
    /// What deciding who may see a run needs.
    async fn run_visibility(&self, run_id: &str) -> StoreResult<RunVisibility>;
    /// Unfinalized runs older than the query's age, least recently checked first; stamps them
    /// checked.
    async fn reap_candidates(&self, query: &ReapQuery) -> StoreResult<Vec<Run>>;
    /// An org's spend for a `YYYY-MM` month, finalized and in flight.
    async fn org_month_spend(&self, org_id: &str, year_month: &str) -> StoreResult<OrgSpend>;
    /// A run's traces after `since` (a `seq`; 0 from the start), with the run's trace count.
    async fn trace_page(&self, run_id: &str, since: i64, limit: u32) -> StoreResult<TracePage>;
    /// Pending, unexpired human steps of an org's runs, oldest first.
    async fn human_inbox(&self, query: &InboxQuery) -> StoreResult<Vec<HumanStep>>;
    /// Audit entries by actor and time, oldest first.
    async fn list_audit(&self, query: &AuditQuery) -> StoreResult<AuditPage>;
}

pub(crate) fn validate_page(limit: u32) -> StoreResult<i64> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(StoreError::invalid(
            "page size",
            "must be between 1 and 500",
        ));
    }
    Ok(i64::from(limit))
}

/// A keyset position: an ordering value and a tie-breaking key, checked against tampering.
///
/// The text is `hex(kind "." value "." key) "." check`, where `check` is the first 16 hex digits
/// of SHA-256 over the same bytes. It is not a secret (a cursor only moves within what the
/// query's filters already allow); the check turns an edited cursor into a typed error instead
/// of a silent jump.
pub(crate) fn encode_cursor(kind: &str, value: i64, key: &str) -> String {
    let payload = format!("{kind}.{value}.{key}");
    format!(
        "{}.{}",
        hex::encode(&payload),
        &cursor_check(&payload)[..16]
    )
}

pub(crate) fn decode_cursor(kind: &str, cursor: &str) -> StoreResult<(i64, String)> {
    let bad = || StoreError::invalid("cursor", "not a cursor this store issued, or altered");
    if cursor.len() > 2 * crate::limits::MAX_SHORT_TEXT_BYTES {
        return Err(bad());
    }
    let (body, check) = cursor.split_once('.').ok_or_else(bad)?;
    let payload = String::from_utf8(hex::decode(body).map_err(|_| bad())?).map_err(|_| bad())?;
    if cursor_check(&payload)[..16] != *check {
        return Err(bad());
    }
    let mut parts = payload.splitn(3, '.');
    let (Some(found), Some(value), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if found != kind {
        return Err(bad());
    }
    Ok((value.parse().map_err(|_| bad())?, key.to_owned()))
}

fn cursor_check(payload: &str) -> String {
    crate::backend::shared::sha256_hex(format!("auto-swe cursor v1\n{payload}").as_bytes())
}

/// A `LIKE` pattern matching `prefix` literally at the start (escape character `\`).
/// A `LIKE … ESCAPE '\\'` pattern matching `text` anywhere, its wildcards taken literally.
pub(crate) fn like_contains(text: &str) -> String {
    format!("%{}", like_prefix(text))
}

pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The columns a [`Run`] is read from (`r` is the run): every one but `result`, which can be
/// megabytes and is read only by [`RunStore::run_result`](crate::RunStore::run_result).
pub(crate) const RUN_COLUMNS: &str = "r.id, r.org_id, r.team_id, r.template_version_id, \
     r.run_input_id, r.launched_by, r.status, r.spec_snapshot, r.pins, \
     r.authorized_connection_ids, r.cost_micros, r.input_tokens, r.output_tokens, r.created_at, \
     r.ended_at, r.cancel_requested_at, r.engine";

/// The joins the run-visibility predicate reads (`r` is the run).
pub(crate) const RUN_VISIBILITY_JOINS: &str = "LEFT JOIN run_inputs i ON i.id = r.run_input_id \
     LEFT JOIN connections c ON c.id = i.connection_id \
     LEFT JOIN workflow_template_versions v ON v.id = r.template_version_id \
     LEFT JOIN workflow_templates t ON t.id = v.template_id";

/// The parameters of [`visible_to_sql`] for `viewer`: its id, its user id (a person) and its
/// team id (a service principal); all `None` when nothing is restricted.
pub(crate) fn visibility_params(
    viewer: Option<&RunViewer>,
) -> (Option<&str>, Option<&str>, Option<&str>) {
    match viewer {
        None => (None, None, None),
        Some(RunViewer::User(id)) => (Some(id.as_str()), Some(id.as_str()), None),
        Some(RunViewer::ServicePrincipal { id, team_id }) => {
            (Some(id.as_str()), None, Some(team_id.as_str()))
        }
    }
}

/// Who may see a run, with the viewer's id, user id and team id as parameters `$viewer`,
/// `$user` and `$team` (all null: no restriction). A person sees runs they or their team's
/// service principals requested, runs on their teams' connections and on connections shared
/// with their teams, and runs of their teams' templates; a service principal sees its own runs,
/// its team's and those on connections shared with its team.
pub(crate) fn visible_to_sql(viewer: u8, user: u8, team: u8) -> String {
    format!(
        "(CAST(${viewer} AS TEXT) IS NULL \
         OR COALESCE(r.launched_by, i.submitter) = ${viewer} \
         OR c.team_id IN (SELECT m.team_id FROM team_memberships m WHERE m.user_id = ${user}) \
         OR t.team_id IN (SELECT m.team_id FROM team_memberships m WHERE m.user_id = ${user}) \
         OR (i.connection_id IS NULL AND COALESCE(r.launched_by, i.submitter) IN \
             (SELECT p.id FROM service_principals p JOIN team_memberships m \
              ON m.team_id = p.team_id WHERE m.user_id = ${user})) \
         OR i.connection_id IN (SELECT s.connection_id FROM connection_shares s \
             JOIN team_memberships m ON m.team_id = s.team_id WHERE m.user_id = ${user}) \
         OR i.connection_id IN (SELECT s.connection_id FROM connection_shares s \
             WHERE s.team_id = ${team}) \
         OR c.team_id = ${team} OR t.team_id = ${team})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_edits() {
        let cursor = encode_cursor("runs", 1_717_196_400_000, "0190-abc.def");
        assert_eq!(
            decode_cursor("runs", &cursor).unwrap(),
            (1_717_196_400_000, "0190-abc.def".to_owned())
        );
        // Another kind of cursor, an edited body, an edited check, garbage.
        assert!(decode_cursor("audit", &cursor).is_err());
        let (body, check) = cursor.split_once('.').unwrap();
        let edited = format!("{}.{check}", hex::encode("runs.1717196400001.0190-abc.def"));
        assert!(decode_cursor("runs", &edited).is_err());
        let mut flipped = check.to_owned();
        flipped.replace_range(0..1, if check.starts_with('0') { "1" } else { "0" });
        assert!(decode_cursor("runs", &format!("{body}.{flipped}")).is_err());
        for junk in ["", ".", "zz.zz", "00", &"a".repeat(5000)] {
            assert_eq!(
                decode_cursor("runs", junk).unwrap_err().code(),
                "STORE_INVALID_INPUT"
            );
        }
    }
}
