"""The real-model zoo: architectures (models.py), exports (export.py), variants (variants.py), samples (samples.py)."""
