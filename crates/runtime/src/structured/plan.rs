//! The planner's and decomposer's rules. The planner decides ordering, not scope: its plan is
//! normalised onto the epic's repositories. The decomposer's answer is bounded, and anything
//! unusable falls back to a single subtask.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

/// Most subtasks a decomposition keeps.
pub const DECOMPOSER_MAX_SUBTASKS: usize = 8;

/// One repository's entry of an epic plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedRepository {
    /// The repository id.
    pub repository: String,
    /// What to do there.
    pub brief: String,
    /// Repositories whose work must land first.
    pub depends_on: Vec<String>,
}

/// Why an epic cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// No requested id is an available git repository (refused before any model call).
    #[error("EPIC_NO_REPOSITORIES: none of the requested repositories is available")]
    NoRepositories,
    /// The plan names no repository of the epic.
    #[error("EPIC_PLAN_EMPTY: the plan names no repository of the epic")]
    Empty,
}

impl PlanError {
    /// The stable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoRepositories => "EPIC_NO_REPOSITORIES",
            Self::Empty => "EPIC_PLAN_EMPTY",
        }
    }

    /// Neither is retried: the same input plans the same way.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NoRepositories | Self::Empty => false,
        }
    }
}

/// The requested ids that are available git repositories, in request order without repeats;
/// refuses when none is.
pub fn plannable_repositories(
    requested: &[String],
    available: &BTreeSet<String>,
) -> Result<Vec<String>, PlanError> {
    let mut seen = BTreeSet::new();
    let out: Vec<String> = requested
        .iter()
        .filter(|r| available.contains(*r) && seen.insert((*r).clone()))
        .cloned()
        .collect();
    if out.is_empty() {
        return Err(PlanError::NoRepositories);
    }
    Ok(out)
}

/// Normalises a planner's answer onto `epic`: entries outside the epic are dropped, a
/// repository listed twice is merged (briefs joined, dependencies united), every epic
/// repository the planner omitted is added with no dependencies, and self-edges and
/// dependencies outside the plan are removed. A plan that names no epic repository at all is
/// `EPIC_PLAN_EMPTY`: the planner did not plan, and inventing the whole plan would hide it.
pub fn normalize_plan(
    epic: &[String],
    plan: Vec<PlannedRepository>,
) -> Result<Vec<PlannedRepository>, PlanError> {
    let in_epic: BTreeSet<&str> = epic.iter().map(String::as_str).collect();
    let mut order: Vec<String> = Vec::new();
    let mut merged: BTreeMap<String, PlannedRepository> = BTreeMap::new();
    for entry in plan {
        if !in_epic.contains(entry.repository.as_str()) {
            continue;
        }
        if let Some(existing) = merged.get_mut(&entry.repository) {
            if !entry.brief.is_empty() && existing.brief != entry.brief {
                existing.brief = format!("{}\n\n{}", existing.brief, entry.brief);
            }
            existing.depends_on.extend(entry.depends_on);
        } else {
            order.push(entry.repository.clone());
            merged.insert(entry.repository.clone(), entry);
        }
    }
    if merged.is_empty() {
        return Err(PlanError::Empty);
    }
    for repository in epic {
        if !merged.contains_key(repository) {
            order.push(repository.clone());
            merged.insert(
                repository.clone(),
                PlannedRepository {
                    repository: repository.clone(),
                    brief: String::new(),
                    depends_on: Vec::new(),
                },
            );
        }
    }
    let names: BTreeSet<String> = merged.keys().cloned().collect();
    Ok(order
        .into_iter()
        .filter_map(|name| merged.remove(&name))
        .map(|mut entry| {
            let mut seen = BTreeSet::new();
            let own = entry.repository.clone();
            entry
                .depends_on
                .retain(|d| *d != own && names.contains(d) && seen.insert(d.clone()));
            entry
        })
        .collect())
}

/// One feature-level subtask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subtask {
    /// `^[a-z][a-z0-9-]{0,39}$`.
    pub id: String,
    /// Short title.
    pub title: String,
    /// What to do.
    pub description: String,
}

/// Whether `id` matches `^[a-z][a-z0-9-]{0,39}$`.
#[must_use]
pub fn is_subtask_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 40
        && bytes[0].is_ascii_lowercase()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn parse_subtasks(value: &Value) -> Option<Vec<Subtask>> {
    let items = value.get("subtasks")?.as_array()?;
    let mut out = Vec::new();
    let mut ids = BTreeSet::new();
    for item in items {
        let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_owned);
        let subtask = Subtask {
            id: text("id")?,
            title: text("title")?,
            description: text("description")?,
        };
        if !is_subtask_id(&subtask.id) || !ids.insert(subtask.id.clone()) {
            return None;
        }
        out.push(subtask);
    }
    (!out.is_empty()).then_some(out)
}

/// The decomposer's subtasks, at most [`DECOMPOSER_MAX_SUBTASKS`]; when the model returned no
/// structured output, or output that fails the schema (a bad or repeated id included), a
/// singleton plan of the whole work.
#[must_use]
pub fn decompose_or_singleton(answer: Option<&Value>, title: &str, work: &str) -> Vec<Subtask> {
    match answer.and_then(parse_subtasks) {
        Some(mut subtasks) => {
            subtasks.truncate(DECOMPOSER_MAX_SUBTASKS);
            subtasks
        }
        None => vec![Subtask {
            id: "main".to_owned(),
            title: title.to_owned(),
            description: work.to_owned(),
        }],
    }
}
