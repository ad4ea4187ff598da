//! Integration tests of the `auto-swe` binary, one module per command.

#[cfg(test)]
mod agents;
#[cfg(test)]
mod scan;
