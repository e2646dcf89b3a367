from __future__ import annotations

from pathlib import Path

import pytest

from helpers import SHARED


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "model-configs").exists():
        pytest.skip("../shared/model-configs is not beside this checkout")
    return SHARED
