"""Thin shim so `pip install .` works with old tooling; the metadata is in pyproject.toml."""
from setuptools import setup

setup()
