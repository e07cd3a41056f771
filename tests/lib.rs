//! The one integration-test binary: a module per feature.

mod tasks;
