"""Writes the generated reference pages before Sphinx reads the sources: every command and
option from the CLI itself (the typer app's click tree), and the HTTP API from the OpenAPI
document of `k8sdds serve`. Generated, so they cannot drift from the code; an option without
help text is a warning (an error under `-W`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from sphinx.util import logging

log = logging.getLogger(__name__)
GENERATED = "reference/generated"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _commands(group, path: list[str]):
    """(path, command) for every command under `group`, depth first, in name order."""
    yield path, group
    if hasattr(group, "commands"):  # a group (typer may carry its own click)
        for name in sorted(group.commands):
            yield from _commands(group.commands[name], path + [name])


def anchor(path: list[str]) -> str:
    """The id of a command's section (the docs test looks for it)."""
    return "cmd-" + "-".join(path)


def cli_page(app: typer.Typer | None = None) -> tuple[str, list[str]]:
    """The CLI reference of `app` (default: k8sdds's) as Markdown, and the options that have
    no help text."""
    if app is None:
        from k8sdds.cli import app

    root = typer.main.get_command(app)
    ctx = root.make_context("k8sdds", [], resilient_parsing=True)
    lines = ["# Command reference", "",
             "Generated from the `k8sdds` command itself; `k8sdds COMMAND --help` prints the "
             "same.", ""]
    bare = []
    for path, cmd in _commands(root, ["k8sdds"]):
        name = " ".join(path)
        lines += [f"({anchor(path)})=", f"## `{name}`", ""]
        if cmd.help:
            lines += [cmd.help.split("\f")[0].strip(), ""]
        params = [p for p in cmd.get_params(ctx) if p.name != "help"]
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        lines += ["```", f"{name} {usage}".rstrip(), "```", ""]
        if hasattr(cmd, "commands"):
            lines += ["| command | what it does |", "|---|---|"]
            for sub in sorted(cmd.commands):
                c = cmd.commands[sub]
                lines.append(f"| [`{sub}`](#{anchor(path + [sub])}) | "
                             f"{_cell(c.get_short_help_str(120))} |")
            lines.append("")
        if not params:
            continue
        lines += ["| option | default | meaning |", "|---|---|---|"]
        for p in params:
            if p.param_type_name == "argument":
                names = f"`{(p.metavar or p.name).upper()}`"
                helptext = getattr(p, "help", None) or "(argument)"
            else:
                names = ", ".join(f"`{o}`" for o in p.opts + p.secondary_opts)
                helptext = p.help or ""
                if not helptext.strip():
                    bare.append(f"{name} {p.opts[0]}")
            default = p.default if p.show_default is not False else None
            if callable(default) or default in (None, (), [], False) or p.is_flag and not default:
                default = ""
            lines.append(f"| {names} | {_cell(default)} | {_cell(helptext)} |")
        lines.append("")
    return "\n".join(lines) + "\n", bare


def api_page() -> str:
    """The HTTP API reference from the service's OpenAPI document."""
    from sqlalchemy import create_engine

    from k8sdds.serve.api import create_app

    doc = create_app(create_engine("sqlite://"), Path("/nonexistent")).openapi()
    lines = ["# HTTP API reference", "",
             f"Generated from the OpenAPI document of `k8sdds serve` (OpenAPI "
             f"{doc['openapi']}; the service serves it at `/openapi.json`).", ""]
    for route, methods in sorted(doc["paths"].items()):
        for method, op in methods.items():
            lines += [f"## `{method.upper()} {route}`", ""]
            if op.get("summary"):
                lines += [op["summary"], ""]
            if op.get("description"):
                lines += [" ".join(op["description"].split()), ""]
            params = op.get("parameters", [])
            if params:
                lines += ["| parameter | in | type | required |", "|---|---|---|---|"]
                for p in params:
                    schema = p.get("schema", {})
                    kind = schema.get("type") or " or ".join(
                        s.get("type", "?") for s in schema.get("anyOf", []))
                    lines.append(f"| `{p['name']}` | {p['in']} | {kind} | "
                                 f"{'yes' if p.get('required') else 'no'} |")
                lines.append("")
            answers = ", ".join(f"{code} ({_cell(r.get('description', ''))})"
                                for code, r in op.get("responses", {}).items())
            lines += [f"Responses: {answers}.", ""]
    lines += ["## Schemas", "", "```json",
              json.dumps(doc.get("components", {}).get("schemas", {}), indent=2), "```", ""]
    return "\n".join(lines) + "\n"


def _summary(path: Path) -> str:
    """A module's docstring, its first paragraph on one line ("" without one)."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def modules_page(root: Path | None = None) -> str:
    """Every package and module of k8sdds, by layer (top first, as `k8sdds/layers.py`
    orders them), with the first paragraph of its docstring."""
    from k8sdds.layers import LAYERS

    root = root or Path(__file__).resolve().parent.parent.parent / "k8sdds"
    lines = ["# Module reference", "",
             "Generated from the code: the layers of `k8sdds/layers.py` (a package imports "
             "only from layers below its own; `tests/test_layout.py` holds the import graph "
             "to it), top first, and the first paragraph of each module's docstring.", ""]
    for rank in range(len(LAYERS) - 1, -1, -1):
        lines += [f"## Layer {rank}: {', '.join(LAYERS[rank])}", ""]
        for name in LAYERS[rank]:
            if name == "k8sdds":
                files = [root / "__init__.py"]
            elif (root / name).is_dir():
                files = sorted((root / name).rglob("*.py"))
            else:
                files = [root / f"{name}.py"]
            lines += ["| module | what it is |", "|---|---|"]
            for path in files:
                shown = path.relative_to(root.parent).as_posix()
                lines.append(f"| `{shown}` | {_cell(_summary(path))} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:  # unchanged: Sphinx keeps its cache
        path.write_text(text)


def generate(app) -> None:
    out = Path(app.srcdir) / GENERATED
    out.mkdir(parents=True, exist_ok=True)
    cli, bare = cli_page()
    for option in bare:
        log.warning("k8sdds option without help text: %s", option)
    _write(out / "cli.md", cli)
    _write(out / "api.md", api_page())
    _write(out / "modules.md", modules_page())


def setup(app):
    app.connect("builder-inited", generate)
    return {"parallel_read_safe": True, "version": "1"}
