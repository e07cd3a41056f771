//! Inventory tests: the openshift-ansible fixtures, precedence across every layer, YAML specifics, errors, and
//! property tests that no input makes the parsers panic.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// openshift-ansible 3.11's example inventories, kept in the repository so that a clone tests on its own.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openshift-ansible-3.11")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn var(inv: &Inventory, host: &str, name: &str) -> Option<Value> {
    inv.host_vars(host, &Vars::new()).get(name).map(|v| v.value.clone())
}

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn ini(text: &str) -> Result<Inventory> {
    Inventory::parse_str(text, Path::new("inventory/hosts.ini"))
}

fn yaml(text: &str) -> Result<Inventory> {
    Inventory::parse_str(text, Path::new("inventory/hosts.yml"))
}

#[test]
fn every_fixture_loads_or_fails_like_ansible() {
    let mut count = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        count += 1;
        let result = Inventory::load(&path);
        // hosts.grafana.example lists `nodes` under [OSEv3:children] without declaring it: ansible-core
        // refuses it with the same message.
        if path.ends_with("hosts.grafana.example") {
            let err = result.unwrap_err();
            assert!(err.message.contains("includes undefined group 'nodes'"), "{err}");
            assert_eq!(err.location.as_ref().map(|l| l.line), Some(3));
        } else {
            let inv = result.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(inv.groups.contains_key("OSEv3"), "{}", path.display());
        }
    }
    assert!(count >= 10);
}

#[test]
fn hosts_example_has_the_openshift_layout() {
    let inv = Inventory::load(&fixtures().join("hosts.example")).unwrap();
    let masters =
        strings(&["ose3-master1.test.example.com", "ose3-master2.test.example.com", "ose3-master3.test.example.com"]);
    assert_eq!(inv.group_hosts("masters").unwrap(), masters);
    assert_eq!(inv.group_hosts("etcd").unwrap(), masters);
    let nodes = inv.group_hosts("nodes").unwrap();
    assert_eq!(nodes.len(), 7);
    assert_eq!(nodes[..3], masters[..]);
    assert_eq!(
        nodes[3..],
        strings(&[
            "ose3-infra1.test.example.com",
            "ose3-infra2.test.example.com",
            "ose3-node1.test.example.com",
            "ose3-node2.test.example.com",
        ])[..]
    );
    assert_eq!(inv.groups["OSEv3"].children, strings(&["masters", "nodes", "etcd", "lb", "nfs"]));
    assert_eq!(
        var(&inv, "ose3-infra1.test.example.com", "openshift_node_group_name"),
        Some(json!("node-config-infra"))
    );
    assert_eq!(
        var(&inv, "ose3-master2.test.example.com", "openshift_node_group_name"),
        Some(json!("node-config-master"))
    );

    // group_vars/OSEv3/vars.yml beside the file applies to every OSEv3 host, and wins over [OSEv3:vars].
    for host in inv.group_hosts("OSEv3").unwrap() {
        let vars = inv.host_vars(&host, &Vars::new());
        assert_eq!(vars["ansible_become"].value, json!(true), "{host}");
        assert!(
            matches!(&vars["ansible_become"].origin, Origin::GroupVars(l) if l.file.ends_with("group_vars/OSEv3/vars.yml"))
        );
        assert_eq!(vars["debug_level"].value, json!(4), "group_vars file beats [OSEv3:vars] debug_level=2");
        assert_eq!(vars["ansible_user"].value, json!("root"));
        assert!(matches!(&vars["ansible_user"].origin, Origin::Inventory(l) if l.line > 0));
    }
    assert_eq!(
        inv.group_names("ose3-master1.test.example.com"),
        strings(&["OSEv3", "etcd", "masters", "nfs", "nodes"])
    );
    assert_eq!(inv.groups()["all"].len(), 8);
}

#[test]
fn hosts_localhost_evaluates_node_groups_as_ansible_does() {
    let inv = Inventory::load(&fixtures().join("hosts.localhost")).unwrap();
    // The [OSEv3:vars] value is a Python literal, so Ansible hands templates a list of dicts, not a string.
    assert_eq!(
        var(&inv, "localhost", "openshift_node_groups"),
        Some(json!([{"name": "node-config-all-in-one", "labels": [
            "node-role.kubernetes.io/master=true",
            "node-role.kubernetes.io/infra=true",
            "node-role.kubernetes.io/compute=true"
        ]}]))
    );
    // [OSEv3:vars] sets it too, but group_vars/OSEv3/vars.yml beside the file wins.
    let vars = inv.host_vars("localhost", &Vars::new());
    assert_eq!(
        vars["openshift_disable_check"].value,
        json!("package_update,package_availability,memory_availability,disk_availability")
    );
    assert!(matches!(vars["openshift_disable_check"].origin, Origin::GroupVars(_)));
    assert_eq!(var(&inv, "localhost", "ansible_connection"), Some(json!("local")));
    assert_eq!(var(&inv, "localhost", "openshift_node_group_name"), Some(json!("node-config-all-in-one")));
}

#[test]
fn tox_inventory_puts_the_host_everywhere() {
    let inv = Inventory::load(&fixtures().join("tox-inventory.txt")).unwrap();
    assert_eq!(inv.hosts.len(), 1);
    assert_eq!(inv.groups["OSEv3"].hosts, strings(&["localhost"]));
    assert_eq!(inv.groups["OSEv3"].children.len(), 24);
    // Declared but in no [..:children]: a top-level group under `all`.
    assert_eq!(inv.groups["oo_glusterfs_to_config"].parents, strings(&["all"]));
    assert!(inv.group_names("localhost").contains(&"oo_glusterfs_to_config".to_string()));
    assert!(!inv.group_names("localhost").contains(&"ungrouped".to_string()));
    assert!(inv.groups["ungrouped"].member_hosts.is_empty());
}

#[test]
fn ini_values_hosts_ports_and_implicit_groups() {
    let inv = ini(concat!(
        "lone a=1\n",
        "[web]\n",
        "w1:2222 s=\"two words\" l='[1, 2]' b=True n=None f=1.5 z=007 t=1,2 q=\"'03#x'\" # comment\n",
        "w1 extra=yes\n",
        "[web:vars]\n",
        "port=8080 # stays a literal\n",
        "text=hello # kept in the value\n",
        "quoted=\"hi\"\n",
        "empty=\n",
        "[all:vars]\n",
        "top=1\n",
    ))
    .unwrap();
    let v = |h: &str, k: &str| var(&inv, h, k);
    assert_eq!(v("w1", "ansible_port"), Some(json!(2222)));
    assert_eq!(v("w1", "s"), Some(json!("two words")));
    assert_eq!(v("w1", "l"), Some(json!([1, 2])));
    assert_eq!(v("w1", "b"), Some(json!(true)));
    assert_eq!(v("w1", "n"), Some(json!(null)));
    assert_eq!(v("w1", "f"), Some(json!(1.5)));
    assert_eq!(v("w1", "z"), Some(json!("007")));
    assert_eq!(v("w1", "t"), Some(json!([1, 2])));
    assert_eq!(v("w1", "q"), Some(json!("03#x")));
    assert_eq!(v("w1", "extra"), Some(json!("yes")));
    assert_eq!(v("w1", "port"), Some(json!(8080)));
    assert_eq!(v("w1", "text"), Some(json!("hello # kept in the value")));
    assert_eq!(v("w1", "quoted"), Some(json!("hi")));
    assert_eq!(v("w1", "empty"), Some(json!("")));
    assert_eq!(v("lone", "top"), Some(json!(1)));
    assert_eq!(inv.group_hosts("ungrouped").unwrap(), strings(&["lone"]));
    assert_eq!(inv.group_names("lone"), strings(&["ungrouped"]));
    assert_eq!(inv.group_names("w1"), strings(&["web"]));
    assert_eq!(inv.groups["all"].children, strings(&["ungrouped", "web"]));
    assert_eq!(inv.group_hosts("all").unwrap(), strings(&["lone", "w1"]));
    let origin = &inv.host_vars("w1", &Vars::new())["s"].origin;
    assert!(matches!(origin, Origin::Inventory(l) if l.line == 3 && l.column > 1), "{origin:?}");
}

#[test]
fn children_may_be_declared_before_their_groups() {
    let inv = ini("[top:children]\nmid\n[mid:children]\nleaf\n[leaf]\nh1\n[mid]\nh2\n").unwrap();
    assert_eq!(inv.group_hosts("top").unwrap(), strings(&["h2", "h1"]));
    assert_eq!(inv.groups["leaf"].depth, 3);
    assert_eq!(inv.group_names("h1"), strings(&["leaf", "mid", "top"]));
}

#[test]
fn ini_errors_name_file_line_and_hint() {
    let cases: &[(&str, usize, &str)] = &[
        ("[web:bogus]\nh\n", 1, "unknown type"),
        ("[web]\n[bad name]\n", 2, "invalid section"),
        ("[web]\nh1 novalue\n", 2, "expected key=value"),
        ("[web:vars]\njustaword\n", 2, "expected key=value"),
        ("[p:children]\nmissing\n", 2, "undefined group 'missing'"),
        ("[ghost:vars]\nx=1\n", 1, "undefined group 'ghost'"),
        ("[web]\nh1 a='open\n", 2, "host definition"),
        ("[web]\nnode[1:]\n", 2, "host range"),
        ("[web]\nhost:\n", 2, "ending in ':'"),
        ("[a:children]\nb\n[b:children]\na\n", 4, "recursive"),
        ("[web]\nh1 d={[1]:2}\n", 2, "unhashable"),
        ("[web:vars]\nansible_group_priority=high\n", 2, "ansible_group_priority"),
    ];
    for (text, line, needle) in cases {
        let err = ini(text).expect_err(text);
        assert_eq!(err.kind, crate::error::ErrorKind::Input);
        assert!(err.message.contains(needle), "{text:?}: {err}");
        let loc = err.location.clone().unwrap_or_else(|| panic!("{text:?}: no location"));
        assert_eq!(loc.line, *line, "{text:?}: {err}");
        assert!(loc.file.ends_with("hosts.ini"));
        assert!(err.hint.is_some(), "{text:?}: no hint");
    }
}

#[test]
fn yaml_inventory_groups_hosts_and_vars() {
    let inv = yaml(concat!(
        "all:\n",
        "  hosts:\n",
        "    direct:\n",
        "  vars:\n",
        "    level: all\n",
        "  children:\n",
        "    web:\n",
        "      hosts:\n",
        "        web[1:2]:\n",
        "          role: web\n",
        "        web3:2222:\n",
        "      vars: {level: web, mode: 0644, flag: yes}\n",
        "      children:\n",
        "        canary:\n",
        "          hosts: web1\n",
        "          vars: {level: canary}\n",
        "    db:\n",
        "      unknown: {a: 1}\n",
        "      hosts: {db1: ~}\n",
    ))
    .unwrap();
    assert_eq!(inv.group_hosts("web").unwrap(), strings(&["web1", "web2", "web3"]));
    assert_eq!(inv.group_hosts("all").unwrap(), strings(&["direct", "web1", "web2", "web3", "db1"]));
    assert_eq!(inv.group_names("direct"), strings(&["ungrouped"]));
    assert_eq!(var(&inv, "web1", "level"), Some(json!("canary")));
    assert_eq!(var(&inv, "web2", "level"), Some(json!("web")));
    assert_eq!(var(&inv, "db1", "level"), Some(json!("all")));
    assert_eq!(var(&inv, "web2", "mode"), Some(json!(420)));
    assert_eq!(var(&inv, "web2", "flag"), Some(json!(true)));
    assert_eq!(var(&inv, "web3", "ansible_port"), Some(json!(2222)));
    assert!(inv.warnings.iter().any(|w| w.contains("unknown")), "{:?}", inv.warnings);
}

#[test]
fn yaml_errors_and_vault() {
    let err = yaml("all:\n  vars:\n    password: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      6162\n").unwrap_err();
    assert!(err.message.contains("no vault password was given"), "{err}");
    assert_eq!(err.location.as_ref().map(|l| l.line), Some(3));
    assert!(err.hint.as_deref().unwrap_or("").contains("--vault-password-file"));

    let err = yaml("all:\n  hosts:\n    - a\n    - b\n").unwrap_err();
    assert!(err.message.contains("\"hosts\""), "{err}");
    let err = yaml("all:\n  hosts:\n    web1: [1, 2]\n").unwrap_err();
    assert!(err.message.contains("mapping"), "{err}");
    let err = yaml("all:\n  hosts:\n    42:\n").unwrap_err();
    assert!(err.message.contains("must be a string"), "{err}");
    let err = yaml("plugin: aws_ec2\n").unwrap_err();
    assert!(err.message.contains("plugin"), "{err}");
    // Not a mapping: the INI plugin gets it, as Ansible's chain would; a YAML syntax error in a .yml stays YAML's.
    assert!(yaml("all:\n  hosts: [\n").unwrap_err().location.is_some());
}

#[test]
fn precedence_follows_ansible_variable_manager() {
    let dir = tempfile::tempdir().unwrap();
    let inv_path = write(
        dir.path(),
        "hosts",
        concat!(
            "[parent:children]\nchild\n",
            "[child]\nh1 v_host=inline\n",
            "[other]\nh1\n",
            "[all:vars]\nv_all_inv=all v_group_inv=all v_allgv=all\n",
            "[parent:vars]\nv_group_inv=parent\nv_groupgv=parent\n",
            "[child:vars]\nv_group_inv=child\n",
            "[other:vars]\nansible_group_priority=10\nv_prio=other\n",
        ),
    );
    // `[all:vars]` above sets one variable per line only: its value is everything after the first `=`.
    write(dir.path(), "group_vars/all.yml", "v_allgv: group_vars_all\nv_group_inv: group_vars_all\nv_host: gv_all\n");
    write(dir.path(), "group_vars/parent.yml", "v_groupgv: group_vars_parent\nv_prio: parent_gv\n");
    write(dir.path(), "group_vars/child/a.yml", "v_groupgv: group_vars_child_a\n");
    write(dir.path(), "group_vars/child/b.yml", "v_groupgv: group_vars_child_b\n");
    write(dir.path(), "host_vars/h1", "v_host: host_vars\nv_e: host_vars\n");
    let inv = Inventory::load(&inv_path).unwrap();
    let extra = parse_extra_vars(&["v_e=extra".to_string()], dir.path()).unwrap();
    let vars = inv.host_vars("h1", &extra);
    let value = |k: &str| vars.get(k).map(|v| v.value.clone());

    assert_eq!(value("v_all_inv"), Some(json!("all v_group_inv=all v_allgv=all")));
    // group_vars/all beats every group's inventory vars.
    assert_eq!(value("v_group_inv"), Some(json!("group_vars_all")));
    // Among group_vars files, the deeper group wins; files of a directory apply in sorted order.
    assert_eq!(value("v_groupgv"), Some(json!("group_vars_child_b")));
    // Inventory vars of any group lose to any group_vars file, even with a higher priority.
    assert_eq!(value("v_prio"), Some(json!("parent_gv")));
    // host_vars/ beats inline host vars, -e beats everything.
    assert_eq!(value("v_host"), Some(json!("host_vars")));
    assert!(matches!(&vars["v_host"].origin, Origin::HostVars(l) if l.file.ends_with("host_vars/h1") && l.line == 1));
    assert_eq!(value("v_e"), Some(json!("extra")));
    assert_eq!(vars["v_e"].origin, Origin::ExtraVars("v_e=extra".into()));
    assert!(matches!(&vars["v_groupgv"].origin, Origin::GroupVars(l) if l.file.ends_with("group_vars/child/b.yml")));
}

#[test]
fn group_priority_orders_groups_of_one_depth() {
    let inv = ini("[a]\nh\n[b]\nh\n[a:vars]\nv=a\nansible_group_priority=5\n[b:vars]\nv=b\n").unwrap();
    // Same depth: b (priority 1) applies before a (priority 5), so a wins despite its name sorting first.
    assert_eq!(var(&inv, "h", "v"), Some(json!("a")));
    assert!(!inv.groups["a"].vars.contains_key("ansible_group_priority"));
    let inv = ini("[a]\nh\n[b]\nh\n[a:vars]\nv=a\n[b:vars]\nv=b\n").unwrap();
    assert_eq!(var(&inv, "h", "v"), Some(json!("b")));
}

#[test]
fn a_directory_inventory_reads_every_file_sorted() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "10-hosts", "[a]\nh1\n");
    write(dir.path(), "20-more.yml", "b:\n  hosts:\n    h2:\n  children:\n    a:\n");
    write(dir.path(), "notes.txt", "this is not an inventory [\n");
    write(dir.path(), ".hidden", "[hidden]\nx\n");
    write(dir.path(), "sub/30.ini", "[c]\nh3\n");
    write(dir.path(), "group_vars/b.yml", "from_gv: 1\n");
    let inv = Inventory::load(dir.path()).unwrap();
    assert_eq!(inv.dir, dir.path());
    assert_eq!(inv.hosts.keys().cloned().collect::<Vec<_>>(), strings(&["h1", "h2", "h3"]));
    assert_eq!(inv.group_hosts("b").unwrap(), strings(&["h2", "h1"]));
    assert_eq!(var(&inv, "h1", "from_gv"), Some(json!(1)));
    assert!(!inv.groups.contains_key("hidden"));
    let file = var(&inv, "h3", "inventory_file").unwrap();
    assert!(file.as_str().unwrap().ends_with("sub/30.ini"), "{file}");
}

#[test]
fn select_implements_host_patterns() {
    let inv = ini(concat!("[web]\nweb1\nweb2\nweb3\n", "[db]\ndb1\nweb2\n", "[staging]\nweb3\ndb1\n",)).unwrap();
    let sel = |p: &str| inv.select(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(sel("web"), strings(&["web1", "web2", "web3"]));
    assert_eq!(sel("web,db"), strings(&["web1", "web2", "web3", "db1"]));
    assert_eq!(sel("db:web"), strings(&["db1", "web2", "web1", "web3"]));
    assert_eq!(sel("web:&db"), strings(&["web2"]));
    assert_eq!(sel("web:!staging"), strings(&["web1", "web2"]));
    assert_eq!(sel("!staging"), strings(&["web1", "web2"]));
    assert_eq!(sel("web*"), strings(&["web1", "web2", "web3"]));
    assert_eq!(sel("~db\\d"), strings(&["db1"]));
    assert_eq!(sel("db1"), strings(&["db1"]));
    assert_eq!(sel("web[0]"), strings(&["web1"]));
    assert_eq!(sel("web[1:]"), strings(&["web2", "web3"]));
    assert_eq!(sel("web[-1]"), strings(&["web3"]));
    assert_eq!(sel("all"), strings(&["web1", "web2", "web3", "db1"]));

    let err = inv.select("web,nosuch").unwrap_err();
    assert!(err.message.contains("nosuch"), "{err}");
    assert!(err.hint.as_deref().unwrap_or("").contains("staging"));
    assert!(inv.select("web[7]").is_err());
    assert!(inv.select("~(").is_err());
}

#[test]
fn select_knows_the_implicit_localhost() {
    let inv = ini("[web]\nweb1\nweb2\n").unwrap();
    let sel = |p: &str| inv.select(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    assert_eq!(sel("localhost"), strings(&["localhost"]));
    assert_eq!(sel("127.0.0.1"), strings(&["127.0.0.1"]));
    assert_eq!(sel("::1"), strings(&["::1"]));
    assert_eq!(sel("web:localhost"), strings(&["web1", "web2", "localhost"]));
    assert_eq!(sel("localhost:web"), strings(&["localhost", "web1", "web2"]));
    assert_eq!(sel("all:!localhost"), strings(&["web1", "web2"]));
    assert_eq!(sel("all:&localhost"), Vec::<String>::new());
    // Only the exact names: a wildcard that matches nothing is still an error.
    assert!(inv.select("local*").is_err());
    // A localhost in the inventory is that host, not the implicit one.
    let inv = ini("[local]\nlocalhost ansible_connection=local\n[web]\nweb1\n").unwrap();
    assert_eq!(inv.select("localhost:web").unwrap(), strings(&["localhost", "web1"]));
}

#[test]
fn json_text_is_read_as_json_first_like_ansibles_data_loader() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = write(
        dir.path(),
        "hosts.json",
        r#"{"all": {"hosts": {"j1": {"exp": 1.5e3, "n": 1, "s": "x"}}, "vars": {"v": [2e1, "1e3"]}}}"#,
    );
    write(dir.path(), "group_vars/all.json", r#"{"from_json": 1e3, "pw": {"__ansible_unsafe": "{{ x }}"}}"#);
    // YAML 1.1 reads 1e3 as text (its floats need a dot); a file that is not JSON still gets YAML's reading.
    write(dir.path(), "host_vars/j1.yml", "yaml_exp: 1e3\nyaml_float: 1.5e+3\n");
    let inv = Inventory::load(&hosts).unwrap();
    assert_eq!(var(&inv, "j1", "exp"), Some(json!(1500.0)));
    assert_eq!(var(&inv, "j1", "n"), Some(json!(1)));
    assert_eq!(var(&inv, "j1", "v"), Some(json!([20.0, "1e3"])));
    assert_eq!(var(&inv, "j1", "from_json"), Some(json!(1000.0)));
    // Unsafe text is kept so that a render gives it back as written (see `yaml::untemplatable`).
    assert_eq!(var(&inv, "j1", "pw"), Some(json!("{% raw %}{{ x }}{% endraw %}")));
    assert_eq!(var(&inv, "j1", "yaml_exp"), Some(json!("1e3")));
    assert_eq!(var(&inv, "j1", "yaml_float"), Some(json!(1500.0)));
    // Positions still come from the text.
    let origin = inv.hosts["j1"].vars["exp"].origin.to_string();
    assert!(origin.ends_with("hosts.json:1:27"), "{origin}");
    let extra = parse_extra_vars(&[r#"{"e": 1e3}"#.to_string()], dir.path()).unwrap();
    assert_eq!(extra["e"].value, json!(1000.0));
    // A vault in Ansible's JSON form is read like `!vault`: without a password, an error saying how to give one.
    write(dir.path(), "group_vars/all.json", r#"{"secret": {"__ansible_vault": "$ANSIBLE_VAULT;1.1;AES256\n31"}}"#);
    let err = Inventory::load(&hosts).unwrap_err();
    assert!(err.message.contains("vault"), "{err}");
}

#[test]
fn an_ini_file_with_a_byte_order_mark_fails_like_ansible_and_says_why() {
    let err = ini("\u{feff}[masters]\r\nm1\r\n").unwrap_err();
    assert!(err.message.contains("byte order mark"), "{err}");
    assert_eq!(err.location.as_ref().map(|l| (l.line, l.column)), Some((1, 1)));
    // Windows line endings and trailing blanks alone are fine.
    let inv = ini("[masters]  \r\nm1 ansible_host=10.0.0.1   \r\n[masters:vars]\r\nk = v  \r\n").unwrap();
    assert_eq!(var(&inv, "m1", "ansible_host"), Some(json!("10.0.0.1")));
    assert_eq!(var(&inv, "m1", "k"), Some(json!("v")));
}

#[test]
fn limit_keeps_the_order_of_all_like_ansibles_subset() {
    let inv = ini("[web]\nweb1\nweb2\n[db]\ndb1\nweb2\n").unwrap();
    assert_eq!(inv.select("db:web").unwrap(), strings(&["db1", "web2", "web1"]));
    assert_eq!(inv.limit("db:web").unwrap(), strings(&["web1", "web2", "db1"]));
    assert_eq!(inv.limit("web:!db").unwrap(), strings(&["web1"]));
    assert_eq!(inv.limit("localhost").unwrap(), Vec::<String>::new());
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "limit.txt", "db\n!web2\n");
    assert_eq!(inv.limit(&format!("@{}", file.display())).unwrap(), strings(&["db1"]));
    assert!(inv.limit("nosuch").is_err());
}

#[test]
fn groups_magic_variable_lists_every_group() {
    let inv = ini("lone\n[a]\nh1\n[b:children]\na\n").unwrap();
    let groups = inv.groups();
    assert_eq!(groups["all"], strings(&["lone", "h1"]));
    assert_eq!(groups["ungrouped"], strings(&["lone"]));
    assert_eq!(groups["b"], strings(&["h1"]));
    assert_eq!(inv.group_names("h1"), strings(&["a", "b"]));
}

#[test]
fn a_yaml_extension_with_ini_content_falls_back_like_ansible() {
    // No extension and not a YAML mapping: the INI plugin reads it.
    let inv = Inventory::parse_str("[web]\nh1\n", Path::new("hosts")).unwrap();
    assert_eq!(inv.group_hosts("web").unwrap(), strings(&["h1"]));
    // An empty file is an empty inventory, not an error.
    let inv = Inventory::parse_str("", Path::new("hosts")).unwrap();
    assert!(inv.hosts.is_empty());
}

/// A valid inventory with most features, for the mutation property below.
const SAMPLE_INI: &str = "lone a=1\n[web]\nweb[01:03] x='y z' n=5\nw9:22\n[web:vars]\nv={'a': [1, 2]}\n\
[all:children]\nweb\n[db:children]\nweb\n[db]\ndb[a:c]\n";
const SAMPLE_YAML: &str = "all:\n  hosts:\n    h1:\n      a: 1\n  children:\n    web:\n      hosts:\n        \
web[1:3]:\n      vars: {b: [1, 2]}\n      children:\n        c: {hosts: {h2: null}}\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ini_parser_never_panics(text in "\\PC{0,200}") {
        let _ = ini(&text);
    }

    #[test]
    fn ini_parser_never_panics_on_inventory_like_text(text in "([\\[\\]:=#;'\"{}(),a-c0-2 \\n\\\\-]|children|vars){0,120}") {
        let _ = ini(&text);
        let _ = Inventory::parse_str(&text, Path::new("hosts"));
    }

    #[test]
    fn yaml_parser_never_panics(text in "([\\[\\]{}:,\\-#!&*|>'\" \\na-c0-2]|hosts|vars|children|all|!vault){0,120}") {
        let _ = yaml(&text);
    }

    #[test]
    fn mutated_inventories_never_panic(edits in proptest::collection::vec((0usize..1000, any::<u8>()), 1..8)) {
        let _ = ini(&crate::fuzz_tests::mutate_bytes(SAMPLE_INI, &edits));
        let _ = yaml(&crate::fuzz_tests::mutate_bytes(SAMPLE_YAML, &edits));
    }

    #[test]
    fn literal_eval_never_panics(text in "\\PC{0,80}") {
        let _ = literal::literal_eval(&text);
    }

    #[test]
    fn patterns_never_panic(pattern in "[a-c0-2*?!&~,:\\[\\]()\\\\.-]{0,30}") {
        let inv = ini(SAMPLE_INI).unwrap();
        let _ = inv.select(&pattern);
    }

    #[test]
    fn extra_vars_never_panic(arg in "\\PC{0,60}") {
        let _ = parse_extra_vars(&[arg], Path::new(""));
    }
}

/// The fixtures ansible-vault encrypted (tests/fixtures/inventories/vault/README.md says how).
fn vault_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inventories/vault").join(name)
}

fn fixture_passwords() -> VaultSecrets {
    let ids = [
        format!("default@{}", vault_fixture("password").display()),
        format!("ops@{}", vault_fixture("ops-password.sh").display()),
    ];
    VaultSecrets::from_sources(&ids, &[]).unwrap()
}

#[test]
fn vault_values_and_files_encrypted_whole_are_decrypted_with_their_passwords() {
    let inv = Inventory::load_with_vault(&vault_fixture("hosts.yml"), &fixture_passwords()).unwrap();
    // Inline values, format 1.1 (default id) and 1.2 (ops), and one inside a list.
    assert_eq!(var(&inv, "m1", "api_token"), Some(json!("s3cret-api-token-26")));
    assert_eq!(var(&inv, "m2", "ops_secret"), Some(json!("ops-only-secret-26")));
    assert_eq!(var(&inv, "n1", "keys"), Some(json!(["plain", "listed-secret-26"])));
    // group_vars/all/vault.yml and host_vars/m1.yml, encrypted whole, keep their types and places.
    assert_eq!(var(&inv, "n1", "vault_db_password"), Some(json!("db-pass-from-vault-26")));
    assert_eq!(var(&inv, "n1", "vault_pin"), Some(json!(7391)));
    assert_eq!(var(&inv, "m1", "m1_only_secret"), Some(json!("m1-secret-from-ops-vault-26")));
    let origin = inv.groups["all"].file_vars["vault_db_password"].origin.to_string();
    assert!(origin.ends_with("group_vars/all/vault.yml:1:1"), "{origin}");
    // An INI inventory encrypted whole, and -e @FILE of an encrypted file.
    let ini = Inventory::load_with_vault(&vault_fixture("encrypted-ini/hosts"), &fixture_passwords()).unwrap();
    assert_eq!(var(&ini, "m1", "ini_secret"), Some(json!("ini-secret-from-vault-26")));
    let extra = parse_extra_vars_with_vault(&["@extra.yml".into()], &vault_fixture(""), &fixture_passwords()).unwrap();
    assert_eq!(extra["extra_secret"].value, json!("extra-secret-from-vault-26"));
}

#[test]
fn every_decrypted_value_is_a_secret_for_every_redactor() {
    Inventory::load_with_vault(&vault_fixture("hosts.yml"), &fixture_passwords()).unwrap();
    Inventory::load_with_vault(&vault_fixture("encrypted-ini/hosts"), &fixture_passwords()).unwrap();
    let redactor = crate::redact::Redactor::from_hosts(&std::collections::HashMap::new());
    for secret in [
        "s3cret-api-token-26",
        "listed-secret-26",
        "db-pass-from-vault-26",
        "7391",
        "m1-secret-from-ops-vault-26",
        "ini-secret-from-vault-26",
    ] {
        assert_eq!(redactor.text(&format!("curl -u admin:{secret}")), "curl -u admin:********", "{secret}");
    }
    // Names and plain values of an encrypted inventory stay readable: only values are secrets.
    assert_eq!(redactor.text("m1 masters nodes"), "m1 masters nodes");
}

#[test]
fn a_wrong_or_missing_vault_password_is_an_input_error_at_the_file_and_line() {
    let wrong_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(wrong_file.path(), "not-the-password\n").unwrap();
    let wrong = VaultSecrets::from_sources(&[], &[wrong_file.path().to_path_buf()]).unwrap();
    let err = Inventory::load_with_vault(&vault_fixture("hosts.yml"), &wrong).unwrap_err();
    assert_eq!(err.kind, crate::error::ErrorKind::Input);
    assert!(err.message.starts_with("wrong vault password: none of those given decrypts this value"), "{err}");
    assert!(err.to_string().contains("hosts.yml:7:5"), "{err}");
    assert!(err.hint.as_deref().unwrap_or("").contains("--vault-id"), "{err}");
    // A file encrypted whole is named at its first line.
    let err = Inventory::load_with_vault(&vault_fixture("encrypted-ini/hosts"), &wrong).unwrap_err();
    assert!(err.to_string().contains("encrypted-ini/hosts:1:1: wrong vault password"), "{err}");
    let err = Inventory::load(&vault_fixture("encrypted-ini/hosts")).unwrap_err();
    assert!(
        err.message.contains("this file is encrypted with Ansible Vault, and no vault password was given"),
        "{err}"
    );
    // The ops id's value without the ops password: the error names the vault id.
    let default_only = VaultSecrets::from_sources(&[], &[vault_fixture("password")]).unwrap();
    let err = Inventory::load_with_vault(&vault_fixture("hosts.yml"), &default_only).unwrap_err();
    assert!(err.message.contains("(vault id `ops`)"), "{err}");
}

#[test]
fn a_cut_vault_text_is_a_format_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let hosts =
        write(dir.path(), "hosts.yml", "all:\n  vars:\n    x: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      3131\n");
    let err = Inventory::load_with_vault(&hosts, &fixture_passwords()).unwrap_err();
    assert!(err.message.contains("not a valid Ansible Vault text"), "{err}");
    let err = Inventory::load_with_vault(
        &write(dir.path(), "tagged.yml", "all:\n  vars:\n    x: !vault [1]\n"),
        &fixture_passwords(),
    )
    .unwrap_err();
    assert!(err.message.contains("must be the text ansible-vault printed"), "{err}");
}

#[test]
fn the_inventory_redactor_masks_what_every_hosts_merged_variables_would_and_renders_a_templated_secret() {
    use crate::redact::Redactor;
    let layered = ini("[masters]\nm1 db_password=hunter2-m1\n[nodes]\nn1 ansible_become_password=sudo-n1\n\
                       [nodes:vars]\nupgrade_secret_vars=db_password,api_token\napi_token=tok-nodes-1234\n")
    .unwrap();
    let extra: Vars = [("db_password".to_string(), Var { value: json!("from-extra-5678"), origin: Origin::Default })]
        .into_iter()
        .collect();
    let from_layers = Redactor::for_inventory(&layered, &extra);
    let from_hosts = Redactor::from_hosts(&host_vars_json(&layered, &extra));
    let line = "tok-nodes-1234 sudo-n1 from-extra-5678";
    assert_eq!(from_hosts.text(line), "******** ******** ********");
    assert_eq!(from_layers.text(line), from_hosts.text(line));
    // A superset: m1 does not call db_password secret, but n1 does, so m1's value (overridden by -e) is masked too.
    assert_eq!(from_layers.text("hunter2-m1"), "********");
    // A templated secret is rendered with each host's own variables, as from_hosts does.
    let templated =
        ini("[nodes]\nn1 token_suffix=abcd9\n[nodes:vars]\nupgrade_secret_vars=api_token\napi_token=tok-{{ token_suffix }}\n")
            .unwrap();
    assert_eq!(Redactor::for_inventory(&templated, &Vars::new()).text("Bearer tok-abcd9"), "Bearer ********");
}

#[test]
fn a_directory_inventory_skips_scripts_and_task_files_as_ansible_does_and_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "hosts.yml", "all:\n  children:\n    masters:\n      hosts:\n        m1:\n");
    let script = write(dir.path(), "bin/etcdctl", "#!/bin/sh\nset -eu\necho hello\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(dir.path(), "hooks/node_pre.yml", "- name: say hello\n  debug:\n    msg: hello\n");
    // Executable but no script: Ansible's script plugin fails to run it and its ini plugin reads it.
    let ini = write(dir.path(), "more", "[nodes]\nn1\n");
    std::fs::set_permissions(&ini, std::fs::Permissions::from_mode(0o755)).unwrap();
    let inv = Inventory::load(dir.path()).unwrap();
    assert_eq!(inv.hosts.keys().cloned().collect::<Vec<_>>(), strings(&["m1", "n1"]));
    let warnings = inv.warnings.join("\n");
    assert!(warnings.contains("bin/etcdctl in the inventory directory: an executable"), "{warnings}");
    assert!(
        warnings.contains("hooks/node_pre.yml in the inventory directory: YAML that is not a mapping"),
        "{warnings}"
    );
    // A file that should be an inventory and is broken stays an error naming it.
    write(dir.path(), "broken.ini", "[nodes]\nn2 ansible_host\n");
    let error = Inventory::load(dir.path()).unwrap_err();
    assert!(error.to_string().contains("broken.ini"), "{error}");
    let hint = error.hint.unwrap_or_default();
    assert!(hint.contains("every file of the inventory directory"), "{hint}");
}
