//! Integration tests of the egress proxy, against servers on loopback.

mod clients;
mod proxy;
mod support;
