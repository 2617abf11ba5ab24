"""`mi nan-bisect`: where NaN/Inf values are born, under a memory bound, over whole data sets.

Modules: `static` (weights holding NaN/Inf), `model` (weights on disk, sessions), `regions`
(frontiers and checkpoints), `locate` (layered scan + span bisection), `fullscan` (every tensor:
--all, --deep, --simulate fp16), `analyse` (origins and what reaches the outputs), `describe` and
`rootcause` (statistics and hints), `nested` (If/Loop bodies), `repro` (bundles), `batch` (JSONL,
resume, summary), `job` (the executor job), `config` (NanBisectConfig). The entry point,
`nan_bisect()`, is the orchestrator in workflows/nan_bisect.py.
"""
