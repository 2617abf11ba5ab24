"""Running jobs over shards of work: in this process or in worker processes (see base.py)."""
