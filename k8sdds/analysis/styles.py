"""One look per datapath, the same in every figure: a colour and a marker, host black and
dashed, and one order for every legend (host first, then the datapaths as `model.DATAPATHS`
lists them, then any other name alphabetically). Pure: names in, styles out."""

from __future__ import annotations

from collections.abc import Iterable

from k8sdds import model

HOST_LABEL = "host (no CNI)"
# matplotlib's tab10 without its grey (kept for nothing) and its black-like colours
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a"]
MARKERS = ["s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*", "d"]
_KNOWN = [name for name in model.DATAPATHS if name != model.HOST_NETWORK]


def order(names: Iterable[str]) -> list[str]:
    """The datapaths in legend order, each once."""
    unique = set(names)
    known = [n for n in [model.HOST_NETWORK, *_KNOWN] if n in unique]
    return known + sorted(unique - set(known))


def _slot(name: str) -> int:
    """A datapath's fixed place in the palette: its place in the vocabulary, so a colour does
    not move when a figure lacks another datapath."""
    if name in _KNOWN:
        return _KNOWN.index(name)
    return len(_KNOWN) + sum(map(ord, name))  # any other name: stable across runs


def colour(name: str) -> str:
    return "black" if name == model.HOST_NETWORK else COLOURS[_slot(name) % len(COLOURS)]


def marker(name: str) -> str:
    return "o" if name == model.HOST_NETWORK else MARKERS[_slot(name) % len(MARKERS)]


def label(name: str) -> str:
    return HOST_LABEL if name == model.HOST_NETWORK else name


def line(name: str) -> dict:
    """Keyword arguments of a line (plot, errorbar) for a datapath; host drawn on top."""
    style = {"color": colour(name), "marker": marker(name), "label": label(name)}
    if name == model.HOST_NETWORK:
        style.update(linestyle="--", zorder=5)
    return style


def palette(names: Iterable[str]) -> dict[str, str]:
    """seaborn's `palette=` for a `hue` of datapaths."""
    return {n: colour(n) for n in names}
