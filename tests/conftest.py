from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def write_schedule(tmp_path):
    """Write a schedule file from text and return its path."""
    def write(text: str, name: str = "schedule.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write
