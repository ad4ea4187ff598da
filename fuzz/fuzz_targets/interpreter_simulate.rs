//! Arbitrary bytes as a spec (and as a script) run through the interpreter against a scripted
//! dispatcher, with a small transition cap. The interpreter may fail the run but must never
//! panic or hang, on any spec the tolerant reader accepts, valid or not.
#![no_main]

use auto_swe_interpreter::{RunOptions, Script, simulate};
use auto_swe_spec::{ReadMode, SourceFormat, read_spec};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(spec) = read_spec(&text, SourceFormat::Json, ReadMode::Tolerant) else {
        if let Ok(value) = serde_json::from_str(&text) {
            let _ = Script::from_value(value);
        }
        return;
    };
    let script = Script::from_value(json!({
        "default": {"output": {"passed": true, "items": [1, 2, 3]}},
        "signals": {},
        "human": {}
    }));
    if let Ok(script) = script {
        let options = RunOptions::default().with_transition_cap(200);
        let _ = simulate(&spec, json!({"items": [1, 2], "ticket": "T"}), script, options);
    }
});
