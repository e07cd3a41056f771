//! The one integration-test binary: a module per feature, shared helpers in support/.

mod support;

mod ssh;
