"""docs/architecture.md cannot go stale unnoticed: it stays short (the module tree is
generated, docs/reference/generated/modules.md), and every module, file, class, function and
constant it quotes exists in the code."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).parent.parent
PAGE = ROOT / "docs" / "architecture.md"
MAX_LINES = 250
# names the page quotes that are not k8sdds': programs, kernel and Kubernetes names
EXTERNAL = {"CYCLONEDDS_URI", "KUBECONFIG", "SIGTERM", "SIGKILL", "SIGINT", "ENOSPC",
            "PR_SET_PDEATHSIG", "TokenRequest", "ConfigMap", "DaemonSet", "NetworkPolicy",
            "WhcHigh", "ElementTree", "nodeName", "shlex.join",
            "start_new_session"}
FILE_KINDS = {"png", "svg", "csv", "json", "html", "yaml", "md", "lock", "log"}
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$")


@cache
def _definitions() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every name the package defines (module, class, function, constant, a class's
    members), by name; and each module's and class's own names."""
    names: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    for path in (ROOT / "k8sdds").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = parts[-2] if parts[-1] == "__init__" else parts[-1]
        names.setdefault(module, set()).add(str(path))
        if len(parts) > 2:  # a package's names include its modules
            members.setdefault(parts[-2], set()).add(module)
        own = members.setdefault(module, set())
        tree = ast.parse(path.read_text())
        for node in tree.body:
            for name, body in _named(node):
                names.setdefault(name, set()).add(str(path))
                own.add(name)
                if body is not None:
                    inner = members.setdefault(name, set())
                    for sub in body:
                        for member, _ in _named(sub):
                            inner.add(member)
                            names.setdefault(member, set()).add(str(path))
    return names, members


def _named(node: ast.AST):
    if isinstance(node, ast.ClassDef):
        yield node.name, node.body
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node.name, None
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    yield t.id, None
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        yield node.target.id, None
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:  # a package's __init__ re-exports
            yield (alias.asname or alias.name).split(".")[0], None


def _quoted(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", text)


def missing(quote: str) -> str | None:
    """Why `quote` names nothing of the code (None: it does, or it is no code name)."""
    names, members = _definitions()
    if quote in EXTERNAL or " " in quote or quote.startswith(("-", "$")):
        return None
    if "/" in quote or quote.endswith(".py"):
        if quote.startswith(("/", "~")) or "<" in quote or "*" in quote:
            return None  # a path on a machine, not in the repository
        path = quote.split(":")[0].rstrip("/")
        for base in (ROOT, ROOT / "k8sdds"):
            if (base / path).exists():
                return None
        if "/" not in path and any(ROOT.glob(f"*/**/{path}")):
            return None  # a file named by itself, where the sentence says which package
        return f"no file {path}"
    if not IDENT.match(quote):
        return None
    name = quote.removesuffix("()")
    parts = name.split(".")
    if len(parts) == 1:
        # a plain lower-case word is a value (host, rounds), not a name; a call, a
        # CamelCase or UPPER_CASE word or an underscored one is a name
        if quote.endswith("()") or not name.islower() or "_" in name:
            return None if name in names else f"{name} is defined nowhere"
        return None
    if parts[0] == "k8sdds":
        parts = parts[1:]
    if parts[-1] in FILE_KINDS:
        return None  # a file a run writes (throughput.png)
    if parts[0] not in names:
        return f"{parts[0]} is defined nowhere"
    for owner, member in zip(parts, parts[1:], strict=False):
        if member not in members.get(owner, set()):
            return f"{member} is not a name of {owner}"
    return None


def test_the_architecture_page_is_short():
    lines = len(PAGE.read_text().splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: the module tree is generated, keep this short"


def test_every_name_the_architecture_page_quotes_exists():
    wrong = {q: why for q in _quoted(PAGE.read_text()) if (why := missing(q))}
    assert wrong == {}


def test_the_name_check_finds_a_stale_name():
    assert missing("schedule.load") is None and missing("Runner.run") is None
    assert missing("request.prepare()") is None and missing("testbed/wiring/ebpf.py") is None
    assert missing("schedule.no_such_loader") == "no_such_loader is not a name of schedule"
    assert missing("NoSuchConstant") == "NoSuchConstant is defined nowhere"
    assert missing("testbed/no_such.py") == "no file testbed/no_such.py"
    assert missing("k8sdds run --sch") is None and missing("host") is None


def _layer_section() -> str:
    text = PAGE.read_text()
    start = text.index("## Layers")
    return text[start:text.index("\n## ", start + 1)]


def _missing_from_layers(section: str) -> list[str]:
    """The entries of `k8sdds.layers.LAYERS` the page's layer list does not name, each as
    the page writes it (`name/` for a package, `name.py` for a module)."""
    from k8sdds.layers import LAYERS

    wanted = []
    for layer in LAYERS:
        for name in layer:
            if name == "k8sdds":
                wanted.append("`__init__.py`")
            elif (ROOT / "k8sdds" / name).is_dir():
                wanted.append(f"`{name}/`")
            else:
                wanted.append(f"`{name}.py`")
    return [w for w in wanted if w not in section]


def test_the_layer_list_names_every_layer_entry():
    """A package or module added to k8sdds/layers.py is named on the page (vm/ was not)."""
    assert _missing_from_layers(_layer_section()) == []


def test_the_layer_check_finds_a_missing_package():
    assert "`vm/`" in _missing_from_layers(_layer_section().replace("`vm/`", "vm"))
