//! The single integration-test binary: shared support code plus every test suite module.

mod suite;
mod support;
