//! SSH through the `openssh` crate with native multiplexing: one master connection per host, reused.
