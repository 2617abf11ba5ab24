"""Moved to tests/fixtures/probe_models.py; this re-export keeps test files written before the move importing.

Delete once no test imports `tests.probe_models` (grep "from .probe_models import" / "from . import probe_models")."""
from .fixtures.probe_models import *  # noqa: F401,F403
