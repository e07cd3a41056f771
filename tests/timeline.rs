//! `upgrade report --html/--svg`: the timeline of a real run (a failed node, a hook), rendered by headless
//! Chromium (Debian's `chromium`), whose DOM is looked at: one row per host, its steps as bars, the failure in red,
//! the hook marked, the cordoned window shaded, the phases as bands, the durations table.

use std::path::Path;
use std::process::Command;

use crate::support::Scenario;
use crate::upgrade::{TestCluster, nodes, spec};

/// Headless Chromium, or `None` after a `SKIPPED` line (with CI set, a missing browser is a failure).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()));
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "chromium is missing: scripts/install-test-deps installs it");
        eprintln!("SKIPPED: no chromium (scripts/install-test-deps installs Debian's chromium)");
    }
    found
}

/// The DOM Chromium built from the page, and its rendering as a PNG.
fn render(browser: &str, page: &Path, png: &Path) -> String {
    let headless = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"];
    let url = format!("file://{}", page.display());
    let dom = Command::new(browser).args(headless).arg("--dump-dom").arg(&url).output().expect("chromium runs");
    assert!(dom.status.success(), "chromium --dump-dom: {}", String::from_utf8_lossy(&dom.stderr));
    let shot = Command::new(browser)
        .args(headless)
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,420")
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(shot.status.success(), "chromium --screenshot: {}", String::from_utf8_lossy(&shot.stderr));
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

#[test]
fn the_timeline_of_a_run_with_a_failed_node_renders_in_chromium_with_a_row_per_host_and_its_bars() {
    let Some(browser) = chromium() else { return };
    let cluster = TestCluster::new(&spec(&nodes(2, "region=a")))
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_nodes_max_fail_percentage: 100")
        .var("upgrade_master_post_hook: hooks/post.yml");
    cluster.write("hooks/post.yml", "- name: announce\n  debug:\n    msg: upgraded\n");
    cluster.fake.set_cue("n1", "upgrade_fail", "");
    cluster.upgrade(&[]).expect_code(1);

    let inventory = cluster.inventory();
    let page = cluster.path("timeline.html");
    let picture = cluster.path("timeline.svg");
    let dir = page.parent().expect("dir").to_path_buf();
    Scenario::in_dir(&dir)
        .args(["report", "-i"])
        .arg(&inventory)
        .args(["--html", "timeline.html", "--svg", "timeline.svg"])
        .success();
    let svg = std::fs::read_to_string(&picture).expect("the SVG");
    assert!(svg.starts_with("<svg ") && svg.contains("class=\"row\""), "{svg}");

    let png = cluster.path("timeline.png");
    let dom = render(browser, &page, &png);
    let bytes = std::fs::read(&png).expect("the PNG");
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000, "a picture was drawn ({} bytes)", bytes.len());
    if let Some(keep) = std::env::var_os("UPGRADE_TIMELINE_PNG") {
        std::fs::copy(&png, keep).expect("keep the picture");
    }

    for host in ["m1", "m2", "m3", "n1", "n2"] {
        assert!(dom.contains(&format!("<g class=\"row\" data-host=\"{host}\">")), "a row for {host}:\n{dom}");
    }
    assert_eq!(dom.matches("<g class=\"row\"").count(), 5, "one row per host");
    for phase in ["preflight", "control-plane", "nodes", "verify"] {
        assert!(dom.contains(&format!("<g class=\"band\" data-phase=\"{phase}\">")), "the {phase} band");
    }
    assert!(
        dom.contains("<rect class=\"step failed\" data-step=\"upgrade\" data-phase=\"nodes\""),
        "n1's failure in red"
    );
    assert!(dom.contains("<rect class=\"step hook\" data-step=\"post-hook\""), "the masters' hook marked");
    assert!(dom.contains("<rect class=\"step\" data-step=\"drain\" data-phase=\"nodes\""), "n2's drain");
    assert!(dom.contains("<rect class=\"cordoned\""), "cordoned windows shaded");
    assert!(dom.contains("<li class=\"failed\">n1 (nodes): upgrade: "), "the failure listed");
    assert!(dom.contains("<table id=\"durations\">"), "the durations table");
    assert!(!dom.contains("<script"), "readable without JavaScript");
}
