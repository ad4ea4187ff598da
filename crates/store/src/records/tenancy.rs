//! Organizations, teams, users and memberships.

use async_trait::async_trait;

use crate::clock::Timestamp;
use crate::enums::string_enum;
use crate::error::StoreResult;

string_enum! {
    /// A member's role in an organization.
    OrgRole, "org role" {
        /// Manages the org.
        Admin => "ORG_ADMIN",
        /// Belongs to the org.
        Member => "ORG_MEMBER",
    }
}

string_enum! {
    /// A member's role in a team.
    TeamRole, "team role" {
        /// Owns the team.
        Owner => "OWNER",
        /// Administers the team.
        Admin => "ADMIN",
        /// Belongs to the team.
        Member => "MEMBER",
    }
}

string_enum! {
    /// A role over the whole platform, above every org.
    PlatformRole, "platform role" {
        /// Runs the platform: every org, every setting.
        Admin => "PLATFORM_ADMIN",
        /// Operates it: reads everything, reaps and re-queues runs.
        Operator => "PLATFORM_OPERATOR",
        /// Leads engineers: above everyone signed in, below the platform's admins.
        Lead => "LEAD",
    }
}

/// A user and their role in an org.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrgMember {
    /// The user.
    pub user: User,
    /// Their role.
    pub role: OrgRole,
}

/// A user and their role in a team.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TeamMember {
    /// The user.
    pub user: User,
    /// Their role.
    pub role: TeamRole,
}

/// Who belongs where, and who runs the platform.
///
/// Implementors guarantee: removing a user from an org removes them from the org's teams in the
/// same transaction; lists are ordered (members by email, teams by name); a platform role is
/// held by existing users only.
#[async_trait]
pub trait MembershipStore: Send + Sync {
    /// An org's teams, by name.
    async fn list_teams(&self, org_id: &str) -> StoreResult<Vec<Team>>;
    /// An org's members, by email.
    async fn list_org_members(&self, org_id: &str) -> StoreResult<Vec<OrgMember>>;
    /// A team's members, by email.
    async fn list_team_members(&self, team_id: &str) -> StoreResult<Vec<TeamMember>>;
    /// Removes a user from an org and from every team of it.
    async fn remove_org_member(&self, org_id: &str, user_id: &str) -> StoreResult<()>;
    /// Removes a user from a team.
    async fn remove_team_member(&self, team_id: &str, user_id: &str) -> StoreResult<()>;
    /// Grants (or changes) a user's platform role.
    async fn grant_platform_role(&self, user_id: &str, role: PlatformRole) -> StoreResult<()>;
    /// Takes a user's platform role away (nothing to do when they hold none).
    async fn revoke_platform_role(&self, user_id: &str) -> StoreResult<()>;
    /// A user's platform role.
    async fn platform_role(&self, user_id: &str) -> StoreResult<Option<PlatformRole>>;
}

/// A top-level tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Organization {
    /// Id.
    pub id: String,
    /// Unique slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Monthly spend cap in US cents.
    pub monthly_budget_cents: Option<i64>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// A team inside an org.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Team {
    /// Id.
    pub id: String,
    /// Org.
    pub org_id: String,
    /// Name, unique in the org.
    pub name: String,
    /// Allow rules the team adds to its proxied workspaces' egress policy
    /// (`[METHODS ]HOST:PORT`, at most [`MAX_TEAM_EGRESS_RULES`]); the host's policy, its deny
    /// rules and its address checks still apply.
    pub egress_allow: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
}

/// The most egress allow rules a team may add.
pub const MAX_TEAM_EGRESS_RULES: usize = 64;

/// A person.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct User {
    /// Id.
    pub id: String,
    /// Unique, lower-cased email.
    pub email: String,
    /// Display name.
    pub name: String,
    /// Whether they may sign in; an inactive user's credentials stop working at once.
    pub active: bool,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Organizations, teams and memberships.
///
/// Implementors guarantee: slugs and emails are unique (emails case-insensitively); a membership
/// names existing rows; setting a role twice keeps one membership.
#[async_trait]
pub trait OrganizationStore: Send + Sync {
    /// Creates an org.
    async fn create_org(&self, slug: &str, name: &str) -> StoreResult<Organization>;
    /// Reads an org.
    async fn get_org(&self, id: &str) -> StoreResult<Organization>;
    /// The org with this slug, if one exists.
    async fn find_org_by_slug(&self, slug: &str) -> StoreResult<Option<Organization>>;
    /// Sets or clears the monthly cap.
    async fn set_org_budget(&self, id: &str, cents: Option<i64>) -> StoreResult<()>;
    /// Creates a team.
    async fn create_team(&self, org_id: &str, name: &str) -> StoreResult<Team>;
    /// Reads a team.
    async fn get_team(&self, id: &str) -> StoreResult<Team>;
    /// Replaces a team's egress allow rules (the store checks their number and length; the
    /// caller checks that each parses).
    async fn set_team_egress(&self, id: &str, allow: &[String]) -> StoreResult<()>;
    /// Sets a user's org role.
    async fn set_org_role(&self, org_id: &str, user_id: &str, role: OrgRole) -> StoreResult<()>;
    /// A user's org role.
    async fn org_role(&self, org_id: &str, user_id: &str) -> StoreResult<Option<OrgRole>>;
    /// Sets a user's team role.
    async fn set_team_role(&self, team_id: &str, user_id: &str, role: TeamRole) -> StoreResult<()>;
    /// A user's team role.
    async fn team_role(&self, team_id: &str, user_id: &str) -> StoreResult<Option<TeamRole>>;
}

/// Users.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Creates a user.
    async fn create_user(&self, email: &str, name: &str) -> StoreResult<User>;
    /// Reads a user.
    async fn get_user(&self, id: &str) -> StoreResult<User>;
    /// Finds a user by email (case-insensitive).
    async fn find_user_by_email(&self, email: &str) -> StoreResult<Option<User>>;
    /// Switches a user on or off.
    async fn set_user_active(&self, id: &str, active: bool) -> StoreResult<()>;
    /// A page of users, newest first, optionally narrowed by a search text.
    async fn list_users(&self, query: &UserListQuery) -> StoreResult<UserPage>;
}

/// Which users to list, one page at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserListQuery {
    /// Only users whose email or name contains this text, ignoring case (`%` and `_` are
    /// matched literally).
    pub search: Option<String>,
    /// Page size (1..=500).
    pub limit: u32,
    /// Where the previous page ended ([`UserPage::next`]); `None` for the first page.
    pub cursor: Option<String>,
}

impl UserListQuery {
    /// The first page of `limit` users, unfiltered.
    #[must_use]
    pub fn first(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// The first page of `limit` users whose email or name contains `text`.
    #[must_use]
    pub fn search(text: impl Into<String>, limit: u32) -> Self {
        Self {
            search: Some(text.into()),
            limit,
            cursor: None,
        }
    }
}

/// One page of users.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UserPage {
    /// Users, newest first.
    pub users: Vec<User>,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
}
