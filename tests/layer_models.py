"""Moved to tests/fixtures/layer_models.py; this re-export keeps test files written before the move importing.

Delete once no test imports `tests.layer_models` (grep "from .layer_models import" / "from . import layer_models")."""
from .fixtures.layer_models import *  # noqa: F401,F403
