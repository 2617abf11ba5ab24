"""`python -m inspector_cli` is the same as `mi`."""
from .cli import main

main()
