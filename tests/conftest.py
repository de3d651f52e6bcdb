"""Shared test fixtures and paths."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ML100K = REPO.parent / "shared" / "data" / "ml-100k" / "u.data"


@pytest.fixture
def ml100k_path():
    """Path to MovieLens 100K u.data; the test is skipped when the file is absent."""
    if not ML100K.exists():
        pytest.skip(f"MovieLens 100K not found at {ML100K}")
    return ML100K
