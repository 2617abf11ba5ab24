"""Run configuration: per-command frozen config dataclasses and the YAML config loader."""
