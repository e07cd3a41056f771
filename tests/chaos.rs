//! Chaos: the orchestrator killed with SIGKILL at random moments over real sshd hosts, then re-run, until the
//! upgrade finishes; again on a fresh cluster until 20 kills were made. Every round must end with every node at
//! the target, upgraded exactly once (the fake cluster counts upgrades), none cordoned. Slow (a minute or more),
//! so it is ignored by `cargo test` and run by `scripts/chaos` (`CHAOS_KILLS`, `CHAOS_SEED` to reproduce).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::upgrade::{MASTERS, TARGET, TestCluster, nodes, spec};

/// xorshift64*: enough randomness for kill moments, with a seed printed so that a failing sequence can be replayed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A duration in [0, max).
    fn below(&mut self, max: Duration) -> Duration {
        Duration::from_micros(self.next() % (max.as_micros() as u64).max(1))
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
#[ignore = "slow: run by scripts/chaos"]
fn kill_9_at_random_moments_and_rerun_until_done_upgrades_every_node_exactly_once() {
    let wanted = env_number("CHAOS_KILLS").unwrap_or(20);
    let seed = env_number("CHAOS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    }) | 1;
    let mut random = Random(seed);
    let (mut kills, mut resumes, mut rounds, mut repeated, mut left_cordoned) = (0u64, 0u64, 0u64, 0u32, 0u32);
    // Kill moments are spread over a whole uninterrupted run, measured on the first round.
    let mut window: Option<Duration> = None;
    let started = Instant::now();
    while kills < wanted {
        rounds += 1;
        let list = nodes(4, "region=a");
        let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2");
        let mut runs_this_round = 0;
        loop {
            let mut command = cluster.command(&[]);
            command.stdout(Stdio::null()).stderr(Stdio::null());
            let run_started = Instant::now();
            let mut child = command.spawn().expect("start upgrade");
            if runs_this_round > 0 {
                resumes += 1;
            }
            runs_this_round += 1;
            let kill_at = window.filter(|_| kills < wanted).map(|w| random.below(w));
            let status = loop {
                if let Some(status) = child.try_wait().expect("try_wait") {
                    break Some(status);
                }
                if kill_at.is_some_and(|at| run_started.elapsed() >= at) {
                    child.kill().expect("kill -9");
                    let _ = child.wait();
                    kills += 1;
                    eprintln!("chaos: round {rounds}, kill {kills} at {:?}", run_started.elapsed());
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            let Some(status) = status else { continue };
            if window.is_none() {
                window = Some(run_started.elapsed());
                eprintln!("chaos: an uninterrupted run takes {:?}", run_started.elapsed());
            }
            assert_eq!(status.code(), Some(0), "round {rounds} (seed {seed}): the run after the kills finishes");
            break;
        }
        let hosts: Vec<String> = MASTERS.iter().map(|m| m.to_string()).chain(cluster.nodes.iter().cloned()).collect();
        for host in &hosts {
            let upgrades = cluster.fake.upgrades(host);
            repeated += upgrades.saturating_sub(1);
            left_cordoned += u32::from(cluster.fake.is_cordoned(host));
            assert_eq!(cluster.fake.version(host), TARGET, "round {rounds} (seed {seed}): {host} at the target");
            assert_eq!(upgrades, 1, "round {rounds} (seed {seed}): {host} upgraded exactly once");
            assert!(!cluster.fake.is_cordoned(host), "round {rounds} (seed {seed}): {host} not cordoned");
        }
    }
    eprintln!(
        "chaos: seed {seed}: {kills} kills, {resumes} resumed runs, {rounds} rounds, {repeated} repeated upgrades, \
         {left_cordoned} nodes left cordoned, {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
