"""Moved to tests/fixtures/nan_models.py; this re-export keeps test files written before the move importing.

Delete once no test imports `tests.nan_models` (grep "from .nan_models import" / "from . import nan_models")."""
from .fixtures.nan_models import *  # noqa: F401,F403
