//! Opening connections for the task engine: a host's own, and other hosts' for `delegate_to`.
//!
//! `open` is the one place that turns a host's variables into a connection. The SSH connection (src/connection/ssh.rs)
//! is written in parallel; until it lands, only `ansible_connection: local` hosts can be reached.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Map;
use tokio::sync::OnceCell;

use crate::connection::local::LocalConnection;
use crate::connection::{ConnectionError, SharedConnection};
use crate::inventory::HostVarsJson;

pub use crate::connection::{ConnectOptions, open};

/// Connections by host name, opened on first use and reused. A failure to connect is remembered too, so an
/// unreachable host is tried once per run.
pub struct ConnectionPool {
    hosts: Arc<HostVarsJson>,
    options: ConnectOptions,
    slots: std::sync::Mutex<HashMap<String, Arc<OnceCell<Result<SharedConnection, ConnectionError>>>>>,
}

impl ConnectionPool {
    /// `hosts`: every inventory host's variables (for its connection settings).
    pub fn new(hosts: Arc<HostVarsJson>, options: ConnectOptions) -> Self {
        ConnectionPool { hosts, options, slots: std::sync::Mutex::new(HashMap::new()) }
    }

    /// Every inventory host's variables, as the pool was given them (the templates' table shares them).
    pub fn host_vars(&self) -> &Arc<HostVarsJson> {
        &self.hosts
    }

    /// Hands the pool a connection opened elsewhere (the executor's own).
    pub fn insert(&self, host: &str, connection: SharedConnection) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(host.to_string(), Arc::new(OnceCell::new_with(Some(Ok(connection)))));
        }
    }

    pub async fn get(&self, host: &str) -> Result<SharedConnection, ConnectionError> {
        let slot = {
            let mut slots =
                self.slots.lock().map_err(|_| ConnectionError::Transport("connection pool poisoned".into()))?;
            slots.entry(host.to_string()).or_default().clone()
        };
        slot.get_or_init(|| async {
            match self.hosts.get(host) {
                Some(vars) => open(host, vars, &self.options).await,
                // As Ansible does, `delegate_to: localhost` works without localhost in the inventory.
                None if matches!(host, "localhost" | "127.0.0.1" | "::1") => {
                    Ok(Arc::new(LocalConnection) as SharedConnection)
                }
                None => open(host, &Map::new(), &self.options).await,
            }
        })
        .await
        .clone()
    }

    /// Like [`ConnectionPool::get`], but a host that could not be reached before is tried again (for
    /// `wait_for_connection`, which waits for a host that was down).
    pub async fn get_again(&self, host: &str) -> Result<SharedConnection, ConnectionError> {
        if let Ok(mut slots) = self.slots.lock() {
            if slots.get(host).is_some_and(|slot| matches!(slot.get(), Some(Err(_)))) {
                slots.insert(host.to_string(), Arc::new(OnceCell::new()));
            }
        }
        self.get(host).await
    }

    /// Closes every connection opened so far.
    pub async fn close_all(&self) {
        let slots: Vec<_> = self.slots.lock().map(|s| s.values().cloned().collect()).unwrap_or_default();
        for slot in slots {
            if let Some(Ok(conn)) = slot.get() {
                conn.close().await;
            }
        }
    }
}
