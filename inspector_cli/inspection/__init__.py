"""`mi inspect`'s engine, below workflows: the scope tree as result data, node facts, patterns, the diff."""
