//! Ansible's filters, tests and lookups for minijinja, written after ansible-core's own code
//! (lib/ansible/plugins/filter/core.py, mathstuff.py, test/core.py, lookup/{env,file,pipe,vars}.py) so that hooks
//! print and decide what they print and decide under Ansible.

mod collections;
mod formats;
mod lookups;
mod methods;
mod predicates;
mod regex_filters;
mod scalars;
#[cfg(test)]
mod tests;
mod values;
mod versions;

use collections::*;
pub(super) use formats::*;
use lookups::*;
use methods::*;
use predicates::*;
pub use regex_filters::python_replacement;
use regex_filters::*;
pub(super) use scalars::*;
pub use values::*;
pub(super) use versions::*;

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, State};

use crate::ansible_compat::shell_quote;
use crate::tasks::template::pyfmt::py_str;

/// Registers every filter, test and global function on the environment.
pub(super) fn register(env: &mut Environment<'static>) {
    // Filters.
    env.add_filter("default", default);
    env.add_filter("d", default);
    env.add_filter("bool", to_bool);
    env.add_filter("int", to_int);
    env.add_filter("float", to_float);
    env.add_filter("string", |v: &Value| py_str(v));
    env.add_filter("lower", |v: &Value| py_str(v).to_lowercase());
    env.add_filter("upper", |v: &Value| py_str(v).to_uppercase());
    env.add_filter("capitalize", capitalize);
    env.add_filter("trim", trim);
    env.add_filter("replace", replace);
    env.add_filter("join", join);
    env.add_filter("split", split);
    env.add_filter("length", length);
    env.add_filter("count", length);
    env.add_filter("union", union);
    env.add_filter("intersect", intersect);
    env.add_filter("difference", difference);
    env.add_filter("symmetric_difference", symmetric_difference);
    env.add_filter("flatten", flatten);
    env.add_filter("dict2items", dict2items);
    env.add_filter("items2dict", items2dict);
    env.add_filter("combine", combine);
    env.add_filter("regex_replace", regex_replace);
    env.add_filter("regex_search", regex_search);
    env.add_filter("regex_findall", regex_findall);
    env.add_filter("regex_escape", |v: &Value| regex::escape(&py_str(v)));
    env.add_filter("ternary", ternary);
    env.add_filter("to_json", to_json_filter);
    env.add_filter("to_nice_json", to_nice_json);
    env.add_filter("from_json", from_json_filter);
    env.add_filter("to_yaml", |v: &Value| -> Result<String, Error> {
        Ok(crate::tasks::template::pyyaml::dump(&to_json(v)?, false))
    });
    env.add_filter("to_nice_yaml", |v: &Value| -> Result<String, Error> {
        Ok(crate::tasks::template::pyyaml::dump(&to_json(v)?, true))
    });
    env.add_filter("from_yaml", from_yaml);
    env.add_filter("basename", |v: &Value| basename(&py_str(v)).to_owned());
    env.add_filter("dirname", |v: &Value| dirname(&py_str(v)));
    env.add_filter("quote", |v: &Value| if v.is_none() { "''".to_owned() } else { shell_quote(&py_str(v)) });
    env.add_filter("b64encode", |v: &Value| base64_encode(py_str(v).as_bytes()));
    env.add_filter("b64decode", b64decode);
    env.add_filter("mandatory", mandatory);
    env.add_filter("type_debug", type_debug);
    env.add_filter("path_join", path_join);

    // Tests.
    env.add_test("version", version_compare);
    env.add_test("version_compare", version_compare);
    env.add_test("failed", |v: &Value| result_flag(v, "failed", "failed"));
    env.add_test("failure", |v: &Value| result_flag(v, "failed", "failure"));
    env.add_test("succeeded", |v: &Value| result_flag(v, "failed", "succeeded").map(|f| !f));
    env.add_test("success", |v: &Value| result_flag(v, "failed", "success").map(|f| !f));
    env.add_test("successful", |v: &Value| result_flag(v, "failed", "successful").map(|f| !f));
    env.add_test("skipped", |v: &Value| result_flag(v, "skipped", "skipped"));
    env.add_test("skip", |v: &Value| result_flag(v, "skipped", "skip"));
    env.add_test("unreachable", |v: &Value| result_flag(v, "unreachable", "unreachable"));
    env.add_test("reachable", |v: &Value| result_flag(v, "unreachable", "reachable").map(|f| !f));
    env.add_test("changed", changed);
    env.add_test("change", changed);
    env.add_test("match", |v: &Value, p: String, k: Kwargs| regex_test(v, &p, k, true));
    env.add_test("search", |v: &Value, p: String, k: Kwargs| regex_test(v, &p, k, false));
    env.add_test("regex", regex_test_generic);
    env.add_test("truthy", |v: &Value, k: Kwargs| truthy(v, k));
    env.add_test("falsy", |v: &Value, k: Kwargs| truthy(v, k).map(|t| !t));
    env.add_test("any", |v: &Value| -> Result<bool, Error> { Ok(items_of(v, "any")?.iter().any(Value::is_true)) });
    env.add_test("all", |v: &Value| -> Result<bool, Error> { Ok(items_of(v, "all")?.iter().all(Value::is_true)) });
    // Jinja: strings are sequences and iterable.
    env.add_test("sequence", |v: &Value| {
        matches!(v.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable)
    });
    env.add_test("iterable", |v: &Value| {
        matches!(v.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable)
    });

    env.set_unknown_method_callback(python_method);

    // Globals.
    env.add_global("omit", OMIT);
    env.add_function("lookup", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, false)
    });
    env.add_function("query", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, true)
    });
    env.add_function("q", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, true)
    });
}
