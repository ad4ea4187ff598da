//! A run's input checked against what its spec declares: declared defaults filled in, a
//! missing required input refused. Both the worker (when a run starts) and `spec simulate` use
//! it, so a simulated run sees the input a real one would.

use serde_json::Value;

use crate::model::WorkflowSpec;

/// Why an input cannot start a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The input is not a JSON object.
    #[error("the run's input must be a JSON object")]
    NotAnObject,
    /// A required input is absent (and has no default).
    #[error("the spec requires input `{0}`")]
    Missing(String),
}

impl InputError {
    /// Stable code: `INPUT_INVALID` or `INPUT_MISSING`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            InputError::NotAnObject => "INPUT_INVALID",
            InputError::Missing(_) => "INPUT_MISSING",
        }
    }

    /// Never: the same input fails the same way.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            InputError::NotAnObject | InputError::Missing(_) => false,
        }
    }
}

impl WorkflowSpec {
    /// `input` with every declared input it lacks set to its default; `INPUT_MISSING` for a
    /// required one with none. Inputs the spec does not declare are kept as given.
    pub fn prepare_input(&self, input: &Value) -> Result<Value, InputError> {
        let Value::Object(given) = input else {
            return Err(InputError::NotAnObject);
        };
        let mut prepared = given.clone();
        for (name, declared) in &self.inputs {
            if prepared.contains_key(name) {
                continue;
            }
            match &declared.default {
                Some(default) => {
                    prepared.insert(name.clone(), default.clone());
                }
                None if declared.required => return Err(InputError::Missing(name.clone())),
                None => {}
            }
        }
        Ok(Value::Object(prepared))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec() -> WorkflowSpec {
        WorkflowSpec::from_value_tolerant(json!({
            "specVersion": 1, "name": "s", "entry": "end",
            "inputs": {
                "branch": { "type": "string", "required": true },
                "files": { "type": "array", "default": [] },
                "note": { "type": "string" }
            },
            "nodes": [{ "id": "end", "type": "terminate", "status": "SUCCESS" }]
        }))
        .unwrap()
    }

    #[test]
    fn defaults_fill_in_required_inputs_must_be_given() {
        let spec = spec();
        assert_eq!(
            spec.prepare_input(&json!({ "branch": "b", "extra": 1 }))
                .unwrap(),
            json!({ "branch": "b", "files": [], "extra": 1 })
        );
        assert_eq!(
            spec.prepare_input(&json!({ "branch": "b", "files": ["x"] }))
                .unwrap(),
            json!({ "branch": "b", "files": ["x"] })
        );
        let missing = spec.prepare_input(&json!({ "files": [] })).unwrap_err();
        assert_eq!(
            (missing.code(), missing.to_string().contains("branch")),
            ("INPUT_MISSING", true)
        );
        assert_eq!(
            spec.prepare_input(&json!([1])).unwrap_err().code(),
            "INPUT_INVALID"
        );
    }
}
