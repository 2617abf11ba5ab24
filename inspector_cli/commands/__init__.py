"""One click command per module; shared options in _options.py, shared output in _output.py."""
