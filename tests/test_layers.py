"""The runtime's packages depend one way (docs/contributing.md, "Layout"): this builds the import graph of
``runtime`` from the source with ``ast``, imports inside functions included, and names every
import that breaks the layering.
"""
import ast
import functools
import os
from collections import defaultdict

import pytest

from seed import ROOT

RUNTIME = os.path.join(ROOT, "runtime")

# What each package may import (besides itself); docs/contributing.md's diagram says the same.
LAYERS = {
    "common": set(),
    "storage": {"common"},
    "metrics": {"common"},
    "datastream": {"common"},
    "state": {"common", "datastream", "storage"},
    "graph": {"common", "datastream", "state"},
    "scheduler": {"common", "datastream", "graph", "state"},
    "task": {"common", "metrics", "datastream", "graph", "state", "storage"},
    "cep": {"common", "datastream", "state", "task"},
    "connectors": {"common", "datastream", "graph", "state", "storage", "task"},
    "checkpoint": {"common", "datastream", "graph", "state", "storage", "task", "connectors"},
    "execution": {"common", "metrics", "datastream", "graph", "state", "storage", "task", "cep", "connectors",
                  "checkpoint", "scheduler"},
    "state_processor": {"common", "datastream", "graph", "state", "storage", "task", "connectors", "checkpoint",
                        "execution"},
    "client": {"common", "datastream", "graph"},
    "jobmaster": {"common", "metrics", "datastream", "graph", "state", "storage", "task", "connectors", "checkpoint",
                  "execution", "scheduler", "client"},
    "cli": {"common", "metrics", "datastream", "graph", "state", "storage", "checkpoint", "execution", "scheduler",
            "client", "jobmaster", "jobmanager", "state_processor"},
}
# The JobManager (Dispatcher, JobMasters, drivers) runs the control plane's steps: all jobmaster may, and jobmaster.
LAYERS["jobmanager"] = LAYERS["jobmaster"] | {"jobmaster"}
# The API and the compilers know nothing of Spark; nothing in runtime knows Airflow.
NO_SPARK = {"common", "metrics", "datastream", "graph", "scheduler", "client", "cep"}


def package_of(path: str) -> str:
    parts = os.path.relpath(path, RUNTIME).split(os.sep)
    return parts[0][:-3] if len(parts) == 1 else parts[0]


@functools.cache
def imports() -> tuple:
    """(file, line, importing package, imported module, imported names) of every import (the
    source parsed once for all the checks)."""
    return tuple(_imports())


def _imports():
    for folder, _, files in os.walk(RUNTIME):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        yield path, node.lineno, package_of(path), alias.name, ()
                elif isinstance(node, ast.ImportFrom):
                    target = node.module or ""
                    if node.level:
                        base = module.split(".")[:-node.level] if not name == "__init__.py" else \
                            module.split(".")[:len(module.split(".")) - node.level + 1]
                        target = ".".join(base + ([node.module] if node.module else []))
                    yield path, node.lineno, package_of(path), target, tuple(a.name for a in node.names)


def where(path, line) -> str:
    return f"{os.path.relpath(path, ROOT)}:{line}"


def runtime_edges():
    for path, line, package, target, names in imports():
        parts = target.split(".")
        if parts[0] == "runtime" and len(parts) > 1:
            yield path, line, package, parts[1], target, names


def test_every_package_is_in_the_layering():
    found = {package_of(os.path.join(folder, f)) for folder, _, files in os.walk(RUNTIME)
             for f in files if f.endswith(".py")} - {"__init__"}
    assert found == set(LAYERS), "add the package to LAYERS and to docs/contributing.md's layout diagram"


def test_the_contributing_page_draws_every_package():
    with open(os.path.join(ROOT, "docs", "contributing.md")) as f:
        diagram = f.read().split("```text\n", 1)[1].split("```", 1)[0]
    drawn = {name.strip() for line in diagram.splitlines() for name in line[:26].split(",") if name.strip()}
    assert drawn == set(LAYERS), "docs/contributing.md's layout diagram names each package of runtime"


def test_packages_import_only_the_layers_below():
    wrong = [f"{where(path, line)}: {package} imports {target}, which it may not (it may import "
             f"{', '.join(sorted(LAYERS[package])) or 'nothing of runtime'})"
             for path, line, package, imported, target, _ in runtime_edges()
             if imported != package and package in LAYERS and imported not in LAYERS[package]]
    assert not wrong, "\n".join(wrong)


def test_there_is_no_import_cycle():
    graph = defaultdict(set)
    for _, _, package, imported, _, _ in runtime_edges():
        if imported != package:
            graph[package].add(imported)
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or ())


def module_of(path: str) -> str:
    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return module[: -len(".__init__")] if module.endswith(".__init__") else module


def type_checking_lines(path: str) -> set:
    """The lines of imports under ``if TYPE_CHECKING:``: for annotations only, never run."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    return {inner.lineno for node in ast.walk(tree)
            if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
            for stmt in node.body for inner in ast.walk(stmt)}


def test_there_is_no_import_cycle_between_modules():
    """Inside a package too: ``from package import module`` depends on that module, and a name
    taken from a package's ``__init__`` on the ``__init__``."""
    modules = {module_of(os.path.join(folder, f)) for folder, _, files in os.walk(RUNTIME)
               for f in files if f.endswith(".py")}
    graph = defaultdict(set)
    annotations_only: dict = {}
    for path, line, _, target, names in imports():
        if path not in annotations_only:       # parsed once a file, not once an import
            annotations_only[path] = type_checking_lines(path)
        if line in annotations_only[path]:
            continue
        source = module_of(path)
        for name in names or (None,):
            imported = f"{target}.{name}" if f"{target}.{name}" in modules else target
            if imported in modules and imported != source:
                graph[source].add(imported)
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or ())


def _cycle(graph):
    state: dict = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path + [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found[found.index(found[-1]):]
    return None


def test_no_private_name_is_used_across_packages():
    wrong = [f"{where(path, line)}: {package} uses {target}.{name}, private to {imported}"
             for path, line, package, imported, target, names in runtime_edges() if imported != package
             for name in names if name.startswith("_")]
    wrong += [f"{where(path, line)}: {package} imports the private module {target}"
              for path, line, package, imported, target, _ in runtime_edges()
              if imported != package and any(p.startswith("_") and p != "__init__" for p in target.split("."))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("forbidden, packages", [("airflow", set(LAYERS)), ("pyspark", NO_SPARK)])
def test_runtime_knows_no_airflow_and_the_api_no_spark(forbidden, packages):
    wrong = [f"{where(path, line)}: {package} imports {target}"
             for path, line, package, target, _ in imports()
             if package in packages and target.split(".")[0] in (forbidden, "sluice_airflow")]
    assert not wrong, "\n".join(wrong)


def test_the_checker_finds_what_it_must():
    """The checks above fail on what they forbid (a checker that finds nothing proves nothing)."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
    assert package_of(os.path.join(RUNTIME, "task", "operators.py")) == "task"
    assert package_of(os.path.join(RUNTIME, "cli.py")) == "cli"
    assert "datastream" not in LAYERS["common"] and "execution" not in LAYERS["checkpoint"]
    assert "jobmanager" not in LAYERS["jobmaster"] and "jobmanager" in LAYERS["cli"]


def test_the_rest_client_needs_only_the_standard_library_and_common():
    """The Airflow plugin imports the JobManager's REST client: it must not pull the engine in."""
    client = os.path.join(RUNTIME, "jobmanager", "rest_client.py")
    wrong = [f"{where(path, line)}: the REST client imports {target}"
             for path, line, _, target, _ in imports()
             if path == client and target.split(".")[0] == "runtime" and target.split(".")[1:2] != ["common"]]
    assert not wrong, "\n".join(wrong)


# ---- the Airflow plugin (and the DAG files): a provider's shape ---------------------------------

PLUGIN_ENTRIES = ("runtime.jobmaster", "runtime.jobmanager.rest_client")


def plugin_imports(root: str = ROOT):
    """(file, line, imported module, imported name or None) of every import in plugins/ and dags/."""
    for top in ("plugins", "dags"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(folder, name)
                with open(path) as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        yield from ((path, node.lineno, a.name, None) for a in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module:
                        yield from ((path, node.lineno, node.module, a.name) for a in node.names)


def plugin_layer_problems(root: str = ROOT) -> list[str]:
    """What breaks the plugin's layering: an entry into ``runtime`` other than the JobMaster's steps
    and the JobManager's REST client, a private name of Airflow's, a private method called on a
    provider's object (``SparkSubmitHook(...)._resolve_connection()``)."""
    found = [f"{os.path.relpath(p, root)}:{line}: imports {module}, not through {' or '.join(PLUGIN_ENTRIES)}"
             for p, line, module, _ in plugin_imports(root) if module.split(".")[0] == "runtime"
             and not any(module == e or module.startswith(e + ".") for e in PLUGIN_ENTRIES)]
    found += [f"{os.path.relpath(p, root)}:{line}: uses Airflow's private {module}.{name}"
              for p, line, module, name in plugin_imports(root)
              if module.split(".")[0] == "airflow" and (name or "").startswith("_")]
    for folder, _, files in os.walk(os.path.join(root, "plugins")):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            found += [f"{os.path.relpath(path, root)}:{n.lineno}: calls the private .{n.attr} of another's object"
                      for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                      and not n.attr.startswith("__") and isinstance(n.value, ast.Call)]
    return found


def test_the_plugin_enters_runtime_only_through_the_jobmaster_and_the_rest_client():
    problems = plugin_layer_problems()
    assert not problems, "\n".join(problems)


def test_the_plugin_checker_finds_what_it_must(tmp_path):
    bad = tmp_path / "plugins" / "sluice_airflow"
    bad.mkdir(parents=True)
    (bad / "x.py").write_text("from runtime.execution.spark import delta_jars\nfrom airflow.x import _y\n"
                              "SparkSubmitHook(conn_id='c')._resolve_connection()\n")
    assert plugin_layer_problems(str(tmp_path)) == [
        "plugins/sluice_airflow/x.py:1: imports runtime.execution.spark, not through runtime.jobmaster or "
        "runtime.jobmanager.rest_client",
        "plugins/sluice_airflow/x.py:2: uses Airflow's private airflow.x._y",
        "plugins/sluice_airflow/x.py:3: calls the private ._resolve_connection of another's object"]
