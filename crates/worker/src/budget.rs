//! The org's monthly cap: which org a run spends against, and what it has left.
//!
//! A run is counted for, capped under and billed to the org of its repository connection's team
//! (local runs: the `local` org). The spend the cap is compared with is the month's finalized
//! usage plus what the org's unfinalized runs have accrued, so a run in flight counts whenever
//! it started. A launch is refused with `ORG_BUDGET_EXCEEDED` once that spend meets the cap; a
//! running run's next model call is refused with a non-retryable `BUDGET_EXCEEDED`, read
//! through a cache of one window per run so a raised cap clears the refusal within it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use auto_swe_store::{Store, StoreError, SystemClock, Timestamp};

/// How long a read of an org's cap and spend is reused by a run.
pub const ORG_BUDGET_WINDOW: Duration = Duration::from_secs(30);

/// The org a run spends against, with the team the org was found through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingOrg {
    /// The org.
    pub org_id: String,
    /// The team.
    pub team_id: String,
}

/// The org of a repository connection's team; `None` for a run with no connection.
pub(crate) async fn billing_org(
    store: &Store,
    connection_id: Option<&str>,
) -> Result<Option<BillingOrg>, StoreError> {
    let Some(connection_id) = connection_id else {
        return Ok(None);
    };
    let connection = store.get_connection(connection_id).await?;
    let team = store.get_team(&connection.team_id).await?;
    Ok(Some(BillingOrg {
        org_id: team.org_id,
        team_id: team.id,
    }))
}

/// An org's cap and what it has spent this month, in micro-dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OrgBudget {
    /// The monthly cap; `None` when the org has none.
    pub(crate) cap_micros: Option<i64>,
    /// Finalized plus in-flight spend of the current month.
    pub(crate) spent_micros: i64,
}

impl OrgBudget {
    /// What is left under the cap (never negative); `None` without a cap.
    pub(crate) fn remaining_micros(self) -> Option<i64> {
        self.cap_micros
            .map(|cap| cap.saturating_sub(self.spent_micros).max(0))
    }

    /// Whether the spend has met the cap.
    pub(crate) fn exhausted(self) -> bool {
        self.remaining_micros() == Some(0)
    }
}

/// Reads an org's cap and current spend.
pub(crate) async fn org_budget(store: &Store, org_id: &str) -> Result<OrgBudget, StoreError> {
    let org = store.get_org(org_id).await?;
    let Some(cents) = org.monthly_budget_cents else {
        return Ok(OrgBudget {
            cap_micros: None,
            spent_micros: 0,
        });
    };
    let month = Timestamp::now(&SystemClock).year_month();
    let spend = store.org_month_spend(org_id, &month).await?;
    Ok(OrgBudget {
        cap_micros: Some(cents.saturating_mul(10_000)),
        spent_micros: spend
            .finalized
            .usage
            .cost_micros
            .saturating_add(spend.in_flight.cost_micros),
    })
}

/// One run's view of its org's budget, re-read at most once per [`ORG_BUDGET_WINDOW`].
#[derive(Debug, Default)]
pub(crate) struct OrgBudgetCache {
    last: Mutex<Option<(Instant, OrgBudget)>>,
}

impl OrgBudgetCache {
    /// The org's budget, from the cache while it is fresh.
    pub(crate) async fn read(&self, store: &Store, org_id: &str) -> Result<OrgBudget, StoreError> {
        if let Some((at, budget)) = *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            && at.elapsed() < ORG_BUDGET_WINDOW
        {
            return Ok(budget);
        }
        let budget = org_budget(store, org_id).await?;
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), budget));
        Ok(budget)
    }
}

#[cfg(test)]
mod tests {
    use super::OrgBudget;

    #[test]
    fn remaining_is_the_cap_less_the_spend_and_never_negative() {
        let budget = |cap, spent| OrgBudget {
            cap_micros: cap,
            spent_micros: spent,
        };
        assert_eq!(budget(None, 5).remaining_micros(), None);
        assert!(!budget(None, i64::MAX).exhausted());
        assert_eq!(budget(Some(100), 40).remaining_micros(), Some(60));
        assert!(!budget(Some(100), 99).exhausted());
        assert!(budget(Some(100), 100).exhausted());
        assert!(budget(Some(100), 250).exhausted());
        assert_eq!(budget(Some(100), 250).remaining_micros(), Some(0));
        assert!(budget(Some(0), 0).exhausted());
    }
}
