"""The statistics engine behind `mi probe`: streaming per-tensor statistics in fixed memory.

Modules: `sketch` (log-bucket histogram with a proven percentile error bound), `moments`
(exactly mergeable mean/variance), `channels` (dead units), `tracker` (one tensor over all
samples), `triggers` (`--break-on` conditions), `quant` (QuantizeLinear/QLinear saturation),
`history` (run summaries under .mi/history), `dump` (.npz dumps with a size cap) and
`attention_entropy` (the plugin shipped as the worked example of `inspector_cli.plugins`).
"""
