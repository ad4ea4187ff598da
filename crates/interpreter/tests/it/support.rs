//! Shared helpers: build a spec from JSON, simulate it, and summarise step records.

use auto_swe_interpreter::{RunOptions, Script, Simulation, StepRecord, simulate};
use auto_swe_spec::WorkflowSpec;
use serde_json::Value;

pub(crate) fn spec(value: Value) -> WorkflowSpec {
    serde_json::from_value(value).expect("test spec parses")
}

pub(crate) fn script(value: Value) -> Script {
    Script::from_value(value).expect("test script parses")
}

pub(crate) fn sim(spec_json: Value, input: Value, script_json: Value) -> Simulation {
    simulate(
        &spec(spec_json),
        input,
        script(script_json),
        RunOptions::default(),
    )
}

/// `recordingId STATUS attempt` per record, in order.
pub(crate) fn steps(records: &[StepRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r.recording_id,
                serde_json::to_value(r.status).unwrap().as_str().unwrap(),
                r.attempt
            )
        })
        .collect()
}

pub(crate) fn status(sim: &Simulation) -> String {
    serde_json::to_value(sim.outcome.status)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) fn error_code(sim: &Simulation) -> Option<String> {
    sim.outcome.error.as_ref().map(|e| e.code().to_owned())
}
