"""The documentation site: it builds with warnings as errors, and its reference has an entry
for every command and option of the CLI, every schedule column, every results.csv column and
every manifest field."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

pytest.importorskip("sphinx", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("myst_parser", reason="the docs extra is not installed")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b",
                           "html", "-d", str(out / ".doctrees"), str(DOCS), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    """The page's text with inline code unwrapped: `--sch` reads as --sch."""
    raw = page.read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def _commands(group, path):
    yield path, group
    for name in sorted(getattr(group, "commands", {})):
        yield from _commands(group.commands[name], path + [name])


def test_every_command_and_option_has_a_reference_entry(site):
    import typer
    from k8sdds_reference import anchor

    from k8sdds.cli import app

    page = (site / "reference/generated/cli.html").read_text()
    root = typer.main.get_command(app)
    ctx = root.make_context("k8sdds", [], resilient_parsing=True)
    commands = list(_commands(root, ["k8sdds"]))
    assert len(commands) > 25  # run, report, testbed up, cluster init, ...
    starts = {}
    for path, _ in commands:
        at = page.find(f'id="{anchor(path)}"')
        assert at >= 0, f"no reference entry for {' '.join(path)}"
        starts[tuple(path)] = at
    ends = sorted(starts.values()) + [len(page)]
    for path, cmd in commands:
        at = starts[tuple(path)]
        section = page[at:ends[ends.index(at) + 1]]
        for p in cmd.get_params(ctx):
            if p.param_type_name != "option" or p.name == "help":
                continue
            for opt in p.opts:
                assert f'<span class="pre">{opt}</span>' in section, \
                    f"{' '.join(path)} {opt} has no reference entry"
            assert (p.help or "").strip(), f"{' '.join(path)} {p.opts[0]} has no help text"


def test_help_shows_every_help_text_whole_and_points_only_to_pages_that_exist():
    """Each command's --help, as a user sees it: a bracketed default is printed, not taken
    for markup and dropped; a page it names is in the repository; never the README (which
    holds neither the inventory format nor the sysctl keys)."""
    import typer

    from k8sdds.cli import app

    from .cli_support import invoke

    root = typer.main.get_command(app)
    ctx = root.make_context("k8sdds", [], resilient_parsing=True)
    repo = DOCS.parent
    for path, cmd in _commands(root, ["k8sdds"]):
        done = invoke(*path[1:], "--help")
        assert done.returncode == 0, (path, done.stderr)
        shown = "".join(done.stdout.split())  # wrapped anywhere, even at a hyphen
        for p in cmd.get_params(ctx):
            for bracket in re.findall(r"\[[^\]]+\]", p.help or ""):
                assert "".join(bracket.split()) in shown, \
                    f"{' '.join(path)} {p.opts[0]}: {bracket} not shown"
        for page in re.findall(r"docs/[\w./-]+\.md", shown):
            assert (repo / page).is_file(), f"{' '.join(path)} --help names {page}"
        assert "README" not in shown, " ".join(path)


def test_the_api_reference_lists_every_operation(site):
    from sqlalchemy import create_engine

    from k8sdds.serve.api import create_app

    doc = create_app(create_engine("sqlite://"), Path("/nonexistent")).openapi()
    text = _text(site / "reference/generated/api.html")
    for route, methods in doc["paths"].items():
        for method in methods:
            assert f"{method.upper()} {route}" in text


def test_every_schedule_column_is_documented(site):
    from k8sdds import schedule

    text = _text(site / "reference/schedule.html")
    for column in schedule.COLUMNS:
        assert re.search(rf"\b{re.escape(column)}\b", text), f"schedule column {column}"


def test_every_results_column_is_documented(site):
    from k8sdds.results import table

    text = _text(site / "reference/results.html")
    for column in table.COLUMNS + table.EXTRA_COLUMNS:
        assert re.search(rf"\b{re.escape(column)}\b", text), f"results.csv column {column}"


def test_every_emulated_datapath_is_in_the_datapath_table(site):
    from k8sdds.testbed.wiring.kinds import WIRING

    text = _text(site / "explanation/datapaths.html")
    for name in WIRING:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), f"datapath {name}"


def test_every_manifest_field_is_documented(site):
    from k8sdds.results.manifest import RepeatEntry, RunManifest

    text = _text(site / "reference/manifest.html")
    for cls in (RunManifest, RepeatEntry):
        for f in fields(cls):
            assert re.search(rf"\b{f.name}\b", text), f"manifest field {cls.__name__}.{f.name}"


def test_an_option_without_help_text_is_reported():
    """The generator names it (a warning: an error under -W, so the build fails)."""
    import k8sdds_reference
    import typer

    demo = typer.Typer()

    @demo.command()
    def go(told: int = typer.Option(1, help="said"), untold: int = typer.Option(2)) -> None:
        """A command."""

    @demo.command()
    def stay() -> None:
        """Another, so that the app is a group."""

    text, bare = k8sdds_reference.cli_page(demo)
    assert bare == ["k8sdds go --untold"]
    assert "--told" in text and "said" in text


def test_the_pages_name_every_engine():
    """The results reference's `engine` row and the front page name every engine k8sdds runs."""
    from k8sdds import engines

    [row] = [line for line in (DOCS / "reference" / "results.md").read_text().splitlines()
             if line.startswith("| `engine` |")]
    front = (DOCS / "index.md").read_text()
    for name in engines.registry():
        assert f"`{name}`" in row, name
    for said in ("ddsperf", "RTI Perftest", "Zenoh", "MQTT", "iperf3", "qperf", "ping", "ab"):
        assert said in front, said


def test_the_module_reference_lists_every_module_by_its_docstring(site):
    """Generated from the code: every .py file of the package, each with what its docstring
    says; a module without a docstring would be an empty cell."""
    package = DOCS.parent / "k8sdds"
    page = _text(site / "reference/generated/modules.html")
    files = sorted(p.relative_to(package.parent).as_posix() for p in package.rglob("*.py"))
    assert len(files) > 100
    for name in files:
        assert name in page, f"{name} is not in the module reference"
    from k8sdds_reference import modules_page

    empty = [row for row in modules_page().splitlines() if row.endswith("|  |")]
    assert empty == [], f"modules without a docstring: {empty}"
    assert "Layer 0: errors" in page and "k8sdds/errors.py" in page


def test_the_glossary_defines_the_words_and_names_what_exists(site):
    """The glossary has the words a reader meets first, and its lists of engines and
    profiles are the code's."""
    from k8sdds import engines
    from k8sdds.testbed.profiles import PROFILES

    text = _text(site / "explanation/glossary.html")
    for word in ("CNI", "DDS", "QoS", "datapath", "repeat", "round", "profile", "verdict",
                 "interval", "engine", "role", "schedule", "testbed"):
        assert re.search(rf"^{word}$", text, re.M), word
    for name in [*engines.registry(), *PROFILES]:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), name


def test_every_troubleshooting_message_is_one_k8sdds_prints():
    """Each heading of the troubleshooting page is (a part of) a message in k8sdds' code,
    so the page cannot keep a message the code no longer says."""
    page = (DOCS / "how-to" / "troubleshooting.md").read_text()
    headings = re.findall(r"^## `(.+)`$", page, re.M)
    assert len(headings) >= 10, headings
    source = "\n".join(p.read_text() for p in (DOCS.parent / "k8sdds").rglob("*.py"))
    source = re.sub(r'"\s*\n\s*(?:f|rf|fr)?"', "", source)  # "a " "b": literals joined
    for message in headings:
        assert message in source, f"troubleshooting: {message!r} is not in k8sdds' code"
