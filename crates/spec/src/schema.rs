//! JSON Schema of the spec document, for editors that validate as users type. The schema
//! describes shapes; the validator's rules that cross nodes (targets, reachability, write paths,
//! expressions) are only in [`crate::validate`].

use serde_json::Value;

use crate::model::WorkflowSpec;

/// JSON Schema (draft 2020-12) of a workflow spec document.
#[must_use]
pub fn spec_schema() -> Value {
    let schema = schemars::schema_for!(WorkflowSpec);
    schema.to_value()
}
