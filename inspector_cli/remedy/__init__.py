"""From diagnosis to fix: engines that turn a comparison into a verified remedy (issue 18).

- `fallback`: which nodes of a QDQ model to keep in float (`plan_fallback`), with `qdq_patch` the patcher,
  `evaluate` the targets and run counting, `naming` the fp32 names of QDQ nodes;
- `perchannel`: per-tensor vs per-channel weight SQNR and whether per-channel alone is enough;
- `fp16_plan`: the fp32 block list of an fp16 model (`plan_fp16_blocklist`);
- `optbisect`: which onnxruntime graph transformer changes the outputs (`bisect_optimizers`);
- `labels`: task accuracy against labels (`load_labels`, `accuracy_report`);
- `qsteps`: error in units of the quantisation step (`quant_step_error`);
- the environment of a run (`run_fingerprint`) lives in core/fingerprint.py: every result records it.

Each module imports onnx/onnxruntime lazily or only where it needs them; nothing here prints or exits.
"""
