"""The package's shape: no import cycle (late imports included), model and the CNI records
at the bottom, small modules, thin commands; and the one rule for skips."""

from __future__ import annotations

import ast
from pathlib import Path

from k8sdds.layers import LAYERS  # the rule the import graph must follow

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "k8sdds"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `path` imports, wherever in the file: late imports and those
    under `if TYPE_CHECKING:` (an edge all the same: a circle of hints is a circle)."""
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        # a package's own __init__ and its parents run first anyway: not an edge
        graph[name] = {m for m in _imports(path, modules)
                       if m != name and not name.startswith(m + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    assert "k8sdds.model" in graph and graph["k8sdds.runner"]  # the walk found the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_one():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_model_and_the_cni_records_are_the_bottom_layer():
    """model imports only the CNI records; they import nothing of k8sdds but its errors."""
    graph = _graph()
    assert {m for m in graph["k8sdds.model"] if not m.startswith("k8sdds.cni")} == set()
    below = {"k8sdds.errors", "k8sdds.guarded"}
    for name, imported in graph.items():
        if name.startswith("k8sdds.cni"):
            assert {m for m in imported if not m.startswith("k8sdds.cni")} <= below, name


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "k8sdds"


def _broken(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    rank = {p: i for i, layer in enumerate(layers) for p in layer}
    out = []
    for name, imported in sorted(graph.items()):
        mine = _package(name)
        for other in sorted({_package(m) for m in imported} - {mine}):
            if mine not in rank or other not in rank:
                out.append(f"{name}: package {mine if mine not in rank else other} has no layer")
            elif rank[other] >= rank[mine]:
                out.append(f"{name} imports {other}: {other} is not below {mine}")
    return out


def test_every_import_goes_down_the_layers():
    assert _broken(_graph()) == []


def test_the_layer_rule_finds_an_upward_import():
    graph = {"k8sdds.model": {"k8sdds.runner"}, "k8sdds.runner": set()}
    assert _broken(graph) == ["k8sdds.model imports runner: runner is not below model"]
    assert _broken({"k8sdds.nowhere": set(), "k8sdds.model": {"k8sdds.nowhere"}})


MAX_FUNCTION = 80  # lines of one function in the thin layers: the commands, the service


def _long_functions(paths) -> list[str]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION:
                out.append(f"{path}:{node.lineno} {node.name} "
                           f"({node.end_lineno - node.lineno + 1} lines)")
    return out


def test_no_function_of_the_commands_or_the_service_is_over_80_lines():
    paths = [*(PACKAGE / "cli").rglob("*.py"), *(PACKAGE / "serve").rglob("*.py")]
    assert not _long_functions(paths)


def test_the_function_length_rule_finds_a_long_one(tmp_path):
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION)  # 81 lines
    short.write_text("def f():\n" + "    x = 1\n" * (MAX_FUNCTION - 1))
    assert _long_functions([long, short]) == [f"{long}:1 f (81 lines)"]


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


def _top_level(path: Path) -> list[ast.stmt]:
    return ast.parse(path.read_text()).body


def _names(modules: dict[str, Path]) -> tuple[dict[str, list[str]], dict[tuple, list[str]]]:
    """Each class name -> the modules defining it; each (constant, value) of an upper-case
    module-level literal -> the modules defining it."""
    classes: dict[str, list[str]] = {}
    constants: dict[tuple, list[str]] = {}
    for name, path in modules.items():
        if ".migrations." in name:  # Alembic's revisions: each its own `revision`
            continue
        for node in _top_level(path):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(name)
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                constants.setdefault((node.targets[0].id, repr(value)), []).append(name)
    return classes, constants


def test_one_name_per_thing_no_two_classes_and_no_constant_twice():
    """No two classes of the package share a name, and no module-level constant is written
    twice with one value (the second imports the first)."""
    classes, constants = _names(_modules())
    assert {c: m for c, m in classes.items() if len(m) > 1} == {}
    assert {k: m for k, m in constants.items() if len(m) > 1} == {}


def test_the_name_rule_finds_a_twin(tmp_path):
    for module in ("a", "b"):
        (tmp_path / f"{module}.py").write_text('class Board:\n    pass\nSUITE = "bookworm"\n')
    classes, constants = _names({m: tmp_path / f"{m}.py" for m in ("a", "b")})
    assert classes["Board"] == ["a", "b"] and constants[("SUITE", "'bookworm'")] == ["a", "b"]


def test_commands_reach_the_backends_only_through_the_registry():
    graph = _graph()
    for name in graph:
        if name.startswith("k8sdds.cli"):
            backends = {m for m in graph[name] if m.startswith("k8sdds.deployment.")
                        and m != "k8sdds.deployment.kubernetes"}  # `cleanup` of a killed run
            assert not backends, f"{name} imports {backends}"
    assert not {m for m in graph["k8sdds.runner"] if m.startswith("k8sdds.deployment.")}


# a branch on a backend's name outside the backends, and why it may stay
BACKEND_BRANCHES = {"k8sdds.results.manifest": "a version 1 manifest's upgrade",
                    "k8sdds.testbed.kube.pod_network": "--pod-network emulated: a mode, not "
                    "a backend"}


def _branches_on(path: Path, names: set[str]) -> list[int]:
    """The lines of `path` that compare a value with one of `names`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            literals = {c.value for c in ast.walk(node)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            if literals & names:
                found.append(node.lineno)
    return found


def _branches_on_a_backend(path: Path) -> list[int]:
    from k8sdds.deployment import BACKENDS

    return _branches_on(path, set(BACKENDS))


def test_no_code_outside_a_backend_branches_on_a_backends_name():
    """What differs by backend is in its record (deployment.BACKENDS, its options): a
    `backend == "ssh"` elsewhere is a fact kept outside it."""
    found = {name: lines for name, path in _modules().items()
             if not name.startswith("k8sdds.deployment")
             and (lines := _branches_on_a_backend(path)) and name not in BACKEND_BRANCHES}
    assert found == {}


def test_no_code_outside_the_engines_branches_on_an_engines_name():
    """What differs by engine is in its record (perftest's registry: its name, probes,
    ports, parser): `engine == "ddsperf"` elsewhere is a fact kept outside it. The baseline
    names its pub/sub engine once (baseline.PUBSUB) and marks its probes (Probe.pubsub)."""
    from k8sdds.engines import registry

    names = set(registry())
    assert {"ddsperf", "rtiperftest", "zenoh", "mqtt", "iperf3"} <= names
    found = {name: lines for name, path in _modules().items()
             if not name.startswith("k8sdds.engines")
             and (lines := _branches_on(path, names))}
    assert found == {}


# a datapath's name compared outside the CNIs' records, and why it may stay
DATAPATH_BRANCHES = {"k8sdds.cluster.kubeadm": "crictl's network mode NODE or unknown, not "
                     "a datapath", "k8sdds.deployment.kubernetes.probes": "a probe pod's "
                     "side, host or pod, not a datapath"}


def test_no_code_outside_the_cnis_branches_on_a_datapaths_name():
    """What differs by datapath is in its record (model.DATAPATHS, cni's records): a
    `datapath == "weave"` elsewhere is a fact kept outside it."""
    from k8sdds import model

    names = set(model.DATAPATHS)
    assert {"host", "flannel-vxlan", "weave", "kube-router"} <= names
    found = {name: lines for name, path in _modules().items()
             if not name.startswith(("k8sdds.cni", "k8sdds.model"))
             and (lines := _branches_on(path, names)) and name not in DATAPATH_BRANCHES}
    assert found == {}


def test_the_backend_branch_rule_finds_one(tmp_path):
    (tmp_path / "m.py").write_text('def f(o):\n    return o.backend == "ssh"\n')
    assert _branches_on_a_backend(tmp_path / "m.py") == [2]


def test_a_skip_fails_where_every_test_must_run(pytester, monkeypatch):
    """The rule as a plugin of its own, in a pytest session of its own (pytester's)."""
    pytester.makepyfile(test_skips="import pytest\n\n"
                        "@pytest.mark.skipif(True, reason='no such machine')\n"
                        "def test_it():\n    pass\n")
    for name in ("CI", "K8SDDS_REQUIRE_E2E"):
        monkeypatch.delenv(name, raising=False)
    here = pytester.runpytest("-p", "tests.skip_rule", "-p", "no:cacheprovider")
    here.assert_outcomes(skipped=1)
    monkeypatch.setenv("CI", "true")
    ci = pytester.runpytest("-p", "tests.skip_rule", "-p", "no:cacheprovider")
    assert ci.ret == 1 and ci.parseoutcomes().keys() & {"failed", "errors", "error"}
    assert "no such machine" in ci.stdout.str()
