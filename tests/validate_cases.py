"""Moved to tests/fixtures/validate_cases.py; this re-export keeps test files written before the move importing.

Delete once no test imports `tests.validate_cases` (grep "from .validate_cases import" / "from . import validate_cases")."""
from .fixtures.validate_cases import *  # noqa: F401,F403
