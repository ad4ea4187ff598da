//! Integration tests of the egress proxy, against servers on loopback.

mod proxy;
