//! Integration tests of `auto-swe-scanners`, one module per feature.

#[cfg(test)]
mod benign;
#[cfg(test)]
mod cache;
#[cfg(test)]
mod content;
#[cfg(test)]
mod corpora;
#[cfg(test)]
mod fence;
#[cfg(test)]
mod gates;
#[cfg(test)]
mod hostile;
#[cfg(test)]
mod paths;
#[cfg(test)]
mod patterns;
#[cfg(test)]
mod shell;
#[cfg(test)]
mod url_policy;

/// The built-in pack, compiled once for the whole test binary.
pub(crate) fn builtin() -> &'static auto_swe_scanners::CompiledPatterns {
    static SET: std::sync::OnceLock<auto_swe_scanners::CompiledPatterns> =
        std::sync::OnceLock::new();
    SET.get_or_init(|| {
        auto_swe_scanners::CompiledPatterns::compile(auto_swe_scanners::builtin_patterns())
    })
}
