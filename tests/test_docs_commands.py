"""Every command block of the README, the tutorials and the how-to pages is checked against
the code: each `k8sdds` (and `python3 perftest.py`) line parsed by the real command line
(its command, every option and value, as `--help` would show them), each `make` target found
in the Makefile, each script found in the repository. Parsing is not running, so every block
also says, in a marker the test reads, which test runs it:
- `<!-- commands: run by tests/FILE.py::TEST -->`: that test runs the block's own lines, read
  from the page (with the substitutions its docstring states);
- `<!-- commands: hardware, why; tests/FILE.py::TEST ... -->`: it needs what this machine
  cannot give (real boards, a registry, a licence); the named test runs its equivalent;
- `<!-- commands: equivalent, why; tests/FILE.py::TEST ... -->`: it runs here but not in a
  test as written (it installs packages, or takes minutes to hours); the named test runs its
  equivalent;
- `<!-- commands: synopsis -->`: a command's form with placeholders, not a line to run.
No command hides in a plain fence: a block of commands is an `sh` block."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer import _click as click  # the click typer 0.2x carries (its commands are of it)

from k8sdds import model, schedule
from k8sdds.errors import UserError

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorials").glob("*.md")),
         *sorted((ROOT / "docs" / "how-to").glob("*.md"))]
MARKER = re.compile(r"<!-- commands: (?P<kind>hardware|licence|synopsis|run by|equivalent)"
                    r",? ?(?P<why>.*?) -->")
NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
# what a page's placeholders stand for when a line is parsed (never run)
PLACEHOLDERS = {"SCHEDULE.csv": "schedules/quick.csv", "RUN_DIR": "logs/run",
                "REGISTRY": "registry.example"}
# programs a block may name besides k8sdds: each only in a block marked as needing more
OTHERS = {"docker", "curl", "sudo", "scp", "ssh", "apt-get", "git", "cd"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    kind: str  # "" (checked here), hardware, licence, synopsis, run by
    why: str
    commands: tuple[tuple[str, ...], ...]
    files: tuple[tuple[str, str], ...] = ()  # what a here-document writes: (name, text)

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    """Every `sh` block of the pages, with its marker and its command lines (continuations
    joined, comments dropped)."""
    out = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() != "```sh":
                i += 1
                continue
            start = i
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            before = "\n".join(lines[max(0, start - 2):start])
            found = MARKER.search(before)
            commands, files = _commands(body)
            out.append(Block(page, start + 1, found["kind"] if found else "",
                             found["why"].strip() if found else "", commands, files))
    return out


def _commands(body: list[str]) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, str], ...]]:
    """A block's command lines (continuations and a synopsis' indented `[...]` lines
    joined, comments dropped) and the files its here-documents write."""
    lines: list[str] = []
    files = []
    rows = iter(body)
    for row in rows:
        heredoc = re.match(r"^cat > (\S+) <<'?(\w+)'?$", row.strip())
        if heredoc:
            text = []
            for inner in rows:
                if inner.strip() == heredoc[2]:
                    break
                text.append(inner)
            files.append((heredoc[1], "\n".join(text) + "\n"))
            continue
        if lines and (lines[-1].endswith("\\") or row.lstrip().startswith("[")):
            lines[-1] = lines[-1].rstrip("\\") + " " + row.strip()
        else:
            lines.append(row)
    commands = tuple(tuple(w) for line in lines if (w := shlex.split(line, comments=True)))
    return commands, tuple(files)


def _targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.M))


def _group(cmd) -> bool:
    return hasattr(cmd, "commands")


def _leaf(words: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The k8sdds command the words name, its path, and the words after it."""
    from k8sdds.cli import app

    cmd = typer.main.get_command(app)
    path = ["k8sdds"]
    while _group(cmd) and words and words[0] in cmd.commands:
        path.append(words[0])
        cmd = cmd.commands[words.pop(0)]
    return cmd, path, words


def problem(words: tuple[str, ...], synopsis: bool = False) -> str | None:
    """Why a page's command line would not run as written (None: it parses)."""
    words = tuple(PLACEHOLDERS.get(w, w) for w in words)
    if words[0] == "make":
        made = (ROOT / "Makefile").read_text()
        wrong = [t for t in words[1:] if "=" not in t and t not in _targets()]
        unknown = [t for t in words[1:] if "=" in t and not re.search(
            rf"^{re.escape(t.split('=')[0])}\s*[:?]?=", made, re.M)]
        return ("; ".join([*(f"no make target {t}" for t in wrong),
                           *(f"no make variable {t.split('=')[0]}" for t in unknown)])
                or None)
    if words[0] == "python3" and words[1:2] == ("perftest.py",):
        words = ("k8sdds", "run", *words[2:])
    if words[0].endswith("/python") and words[1:2] and words[1].endswith(".py"):
        return None if (ROOT / words[1]).is_file() else f"no script {words[1]}"
    if words[0] == "curl":
        return _api_problem(words)
    if words[0] != "k8sdds":
        return None if synopsis else f"{words[0]}: a program this test cannot check here"
    cmd, path, rest = _leaf(list(words[1:]))
    if _group(cmd):
        return f"{' '.join(path)} has no command {rest[0] if rest else '(none given)'}"
    if synopsis:  # placeholders and [optional parts]: each --option must be the command's
        names = {o for p in cmd.params for o in p.opts + p.secondary_opts}
        wrong = [w for w in rest for w in [w.strip("[]|.").split("=")[0]]
                 if w.startswith("--") and w not in names]
        return f"{' '.join(path)}: no option {', '.join(wrong)}" if wrong else None
    try:
        cmd.make_context(" ".join(path), list(rest), resilient_parsing=False)
    except click.ClickException as exc:
        return f"{' '.join(path)}: {exc.format_message()}"
    return None


def _api_problem(words: tuple[str, ...]) -> str | None:
    """A `curl` line against the service: its method and path are the API's."""
    from sqlalchemy import create_engine

    from k8sdds.serve.api import create_app

    method = words[words.index("-X") + 1].lower() if "-X" in words else "get"
    [url] = [w for w in words if w.startswith("http://")]
    path = "/" + url.split("/", 3)[3].split("?")[0]
    paths = create_app(create_engine("sqlite://"), Path("/nonexistent")).openapi()["paths"]
    for template, operations in paths.items():  # /api/runs/{run_id}: RUN_ID on a page
        if re.fullmatch(re.sub(r"\\{\w+\\}", "[^/]+", re.escape(template)), path) and \
                method in operations:
            return None
    return f"the service has no {method.upper()} {path}"


def test_every_command_block_is_checked_or_marked():
    found = blocks()
    assert len(found) >= 25  # the README's, the tutorials', the how-to pages'
    wrong = {}
    for block in found:
        for words in block.commands:
            if block.kind in ("hardware", "licence") and words[0] != "k8sdds":
                continue  # docker, a registry, a board: said in the marker
            why = problem(words, synopsis=block.kind == "synopsis")
            if why:
                wrong[f"{block.where()}: {' '.join(words)}"] = why
        for name, text in block.files:  # a schedule a page writes: loaded as a run loads it
            if not name.endswith(".csv"):
                continue  # another file (a systemd unit, an inventory): not a schedule
            try:
                schedule.loads(text, name, model.Defaults())
            except UserError as exc:
                wrong[f"{block.where()}: {name}"] = str(exc)
    assert wrong == {}


def _test_exists(file: str, name: str) -> bool:
    path = ROOT / file
    return path.is_file() and re.search(rf"^def {re.escape(name)}\(", path.read_text(),
                                        re.M) is not None


def test_every_block_names_the_test_that_runs_it_or_its_equivalent():
    left = [b.where() for b in blocks() if not b.kind]
    assert left == [], "blocks only parsed, run by no test: mark them (see the module's text)"
    for block in blocks():
        if block.kind in ("hardware", "licence", "equivalent"):
            named = NAMED_TEST.findall(block.why)
            assert named, f"{block.where()}: name the test that runs its equivalent"
            for file, name in named:
                assert _test_exists(file, name), f"{block.where()}: no test {file}::{name}"


def test_no_command_hides_in_a_plain_fence():
    """A fence without a language holding a command line: unchecked by everything above."""
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^\s*```(\S*)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                if fence[1] in ("", "text", "console", "bash", "shell") and re.match(
                        r"^\s*(\$ )?(k8sdds|make|python3|\.venv/|\.ci/|curl|ssh) ", lines[j]):
                    found.append(f"{page.relative_to(ROOT)}:{j + 1}")
                j += 1
            i = j + 1
    assert found == []


def test_a_marked_block_says_why_and_a_run_names_a_test_that_exists():
    for block in blocks():
        if block.kind in ("hardware", "licence", "equivalent"):
            assert len(block.why) > 10, f"{block.where()}: say what it needs"
        if block.kind == "run by":
            file, _, name = block.why.partition("::")
            assert (ROOT / file).is_file() and re.search(
                rf"^def {re.escape(name)}\(", (ROOT / file).read_text(), re.M), block.where()
            # the test runs the page's own lines: it reads the page
            assert block.page.name in (ROOT / file).read_text(), block.where()


def test_the_pi_tutorial_names_the_kubernetes_version_k8sdds_builds_once():
    """The version the tutorial's reader gets is the one the build scripts pin
    (.ci/k8s-versions), named once on the page."""
    [pinned] = re.findall(r'^K8S_VERSION="\$\{K8S_VERSION:-([0-9.]+)\}"',
                          (ROOT / ".ci" / "k8s-versions").read_text(), re.M)
    page = (ROOT / "docs" / "tutorials" / "pi-cluster.md").read_text()
    assert page.count(f"Kubernetes\n{pinned}") + page.count(f"Kubernetes {pinned}") == 1
    assert re.findall(r"\b1\.\d\d\.\d+\b", page) == [pinned]


@pytest.mark.parametrize("words, said", [
    (("k8sdds", "run", "--sch", "s.csv", "--no-such-flag"), "No such option: --no-such-flag"),
    (("k8sdds", "run", "--repeats", "0"), "'--repeats'"),
    (("k8sdds", "testbed", "upp"), "k8sdds testbed has no command upp"),
    (("make", "demo", "nothing"), "no make target nothing"),
    (("make", "perftest", "NOTHING=1"), "no make variable NOTHING"),
    (("git", "clone", "x"), "git: a program this test cannot check here"),
    (("curl", "-X", "DELETE", "http://127.0.0.1:8080/api/runs"), "no DELETE /api/runs"),
])
def test_the_check_finds_a_line_that_would_not_run(words, said):
    assert said in (problem(words) or "")


def test_the_synopsis_check_finds_an_option_the_command_lacks():
    assert problem(("k8sdds", "baseline", "[--paths", "all]", "[--no-dds]"), True) is None
    assert "no option --colour" in problem(("k8sdds", "report", "DIR", "[--colour", "X]"), True)


PYTHON_MARKER = re.compile(r"<!-- python: run by (?P<test>tests/\S+\.py)::(?P<name>\w+) -->")


def test_every_python_block_names_the_test_that_runs_it():
    """A ```python block of the pages is run as written by the test its marker names: the
    test exists and reads that page."""
    found = 0
    for page in [*PAGES, *sorted((ROOT / "docs").glob("*/*.md"))]:
        text = page.read_text()
        for block in re.finditer(r"^```python$", text, re.M):
            found += 1
            before = text[:block.start()].rstrip().splitlines()[-1]
            marker = PYTHON_MARKER.fullmatch(before.strip())
            assert marker, f"{page.relative_to(ROOT)}: a python block without its test"
            source = (ROOT / marker["test"]).read_text()
            assert re.search(rf"^def {marker['name']}\(", source, re.M), marker.group(0)
            assert page.name in source, f"{marker['test']} never reads {page.name}"
    assert found >= 1
