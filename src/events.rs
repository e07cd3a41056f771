//! Events flow from the executor to reporters; the executor never prints.
