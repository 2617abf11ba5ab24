"""Moved to tests/fixtures/helpers.py; this re-export keeps test files written before the move importing.

Delete once no test imports `tests.helpers` (grep "from .helpers import" / "from . import helpers")."""
from .fixtures.helpers import *  # noqa: F401,F403
