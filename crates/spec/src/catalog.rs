//! The step catalog: the registered step names a `step` node may dispatch, with descriptions of
//! their inputs and outputs. Plain data, so the server and editor tooling can load it (from JSON
//! or YAML) without linking any worker.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::InputType;

/// Registered steps by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepCatalog {
    /// The steps, keyed by the name a `step` node uses.
    #[serde(default)]
    pub steps: IndexMap<String, StepDescriptor>,
}

/// What one registered step takes and returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepDescriptor {
    /// What the step does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Inputs by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub inputs: IndexMap<String, FieldDescriptor>,
    /// Output fields by name (found at `nodes.<id>.output.<name>`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub outputs: IndexMap<String, FieldDescriptor>,
}

/// One input or output field of a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldDescriptor {
    /// JSON type of the value, when it has one.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<InputType>,
    /// Whether a `step` node must bind it (inputs only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// What the field means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl StepCatalog {
    /// An empty catalog.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a step and returns the catalog, for building one in code.
    #[must_use]
    pub fn with_step(mut self, name: impl Into<String>, step: StepDescriptor) -> Self {
        self.steps.insert(name.into(), step);
        self
    }

    /// The step registered under `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&StepDescriptor> {
        self.steps.get(name)
    }

    /// Whether `name` is registered.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.steps.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn loads_from_json() {
        let catalog: StepCatalog = serde_json::from_value(json!({
            "steps": {
                "openPullRequest": {
                    "description": "Opens a pull request",
                    "inputs": {"branch": {"type": "string", "required": true}, "draft": {"type": "boolean"}},
                    "outputs": {"url": {"type": "string"}}
                },
                "noop": {}
            }
        }))
        .unwrap();
        assert!(catalog.contains("noop"));
        let open = catalog.get("openPullRequest").unwrap();
        assert!(open.inputs["branch"].required);
        assert_eq!(open.inputs["draft"].kind, Some(InputType::Boolean));
        let again: StepCatalog =
            serde_json::from_value(serde_json::to_value(&catalog).unwrap()).unwrap();
        assert_eq!(again, catalog);
    }
}
