"""Shared fixtures."""
from __future__ import annotations

from pathlib import Path

import pytest

from .support import ROOT


@pytest.fixture
def root() -> Path:
    return ROOT
