"""Model builders and helpers for tests, the demo and benchmarks."""
