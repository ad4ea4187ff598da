//! Arbitrary bytes through both readers, both modes, the document validator, and the
//! expression parser and evaluator. None of them may panic or hang.
#![no_main]

use auto_swe_spec::{
    Expr, ReadMode, SourceFormat, ValidateOptions, content_hash, parse_document, read_spec,
    validate, validate_value,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for format in [SourceFormat::Json, SourceFormat::Yaml] {
        for mode in [ReadMode::Tolerant, ReadMode::Strict] {
            if let Ok(spec) = read_spec(&text, format, mode) {
                let _ = validate(&spec, &ValidateOptions::default());
                let _ = content_hash(&spec);
            }
        }
        if let Ok(value) = parse_document(&text, format) {
            let _ = validate_value(&value, &ValidateOptions::default());
            if let Ok(expr) = Expr::parse(&text) {
                let _ = expr.evaluate(&value);
            }
        }
    }
    if let Ok(expr) = Expr::parse(&text) {
        let _ = expr.evaluate(&serde_json::Value::Null);
    }
});
