#!/usr/bin/env python
"""Where a bad sample's extra cost goes in `mi nan-bisect`, in-process (issue 16, phase 5).

    python scripts/bench_nan_breakdown.py MODEL DATA_DIR [REPEATS] [EXPECTED|alt]

DATA_DIR holds s000.npz (clean) and s050.npz (bad), as `bench_speed_work.py nan_data` writes them.
Each repeat: a fresh `Locator` (expected samples EXPECTED, or alternately 0 and 100 with `alt`),
4 clean analyses (a prebuilt replay session is then waited for, as at sample 50 of 100), then a
clean and the bad sample timed; the difference over a plain onnxruntime run of the clean sample
(default session) is the bad sample's extra cost in inferences, wall and CPU (all threads). Timers
around session builds, runs, `is_bad`, `extract_subgraph`... break it down. Run it with
PYTHONPATH=<an older checkout> to measure that one (EXPECTED is then ignored).
"""
from __future__ import annotations

import sys, time, collections, functools
from pathlib import Path
import numpy as np
import onnxruntime as ort
import inspector_cli.nanbisect.locate as L
import inspector_cli.nanbisect.model as M
import inspector_cli.core.runner as R
from inspector_cli.core.model_arg import as_graph
from inspector_cli.core.runner import RuntimeConfig
from inspector_cli.core.capture import default_budget
model, folder = sys.argv[1], Path(sys.argv[2])
acc = collections.defaultdict(lambda: [0.0, 0.0, 0])
def wrap(mod, name, label):
    f = getattr(mod, name)
    @functools.wraps(f)
    def g(*a, **k):
        w, c = time.perf_counter(), time.process_time()
        try: return f(*a, **k)
        finally:
            e = acc[label]; e[0] += time.perf_counter() - w; e[1] += time.process_time() - c; e[2] += 1
    setattr(mod, name, g)
wrap(L, "is_bad", "is_bad"); wrap(M, "extract_subgraph", "extract_subgraph"); wrap(L, "make_region", "make_region")
wrap(L, "find_origins", "find_origins"); wrap(L, "describe_origin", "describe_origin")
orig_init = R.Session.__init__
def init(self, *a, **k):
    w, c = time.perf_counter(), time.process_time(); orig_init(self, *a, **k)
    e = acc["Session()"]; e[0] += time.perf_counter() - w; e[1] += time.process_time() - c; e[2] += 1
R.Session.__init__ = init
orig_run = R.Session.run
import resource
def run(self, *a, **k):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    w, c = time.perf_counter(), time.process_time(); r = orig_run(self, *a, **k)
    acc["faults " + ("span" if "span" in self.label else "scan")][2] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    e = acc["run " + ("span" if "span" in self.label else "scan")]; e[0] += time.perf_counter() - w; e[1] += time.process_time() - c; e[2] += 1
    return r
R.Session.run = run
load = lambda p: dict(np.load(p, allow_pickle=False))
clean, bad = load(folder / "s000.npz"), load(folder / "s050.npz")
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
for _ in range(3): s.run(None, clean)
w, c = time.perf_counter(), time.process_time()
for _ in range(20): s.run(None, clean)
pw, pc = (time.perf_counter() - w) / 20, (time.process_time() - c) / 20
del s
prep = M.PreparedModel.load(as_graph(model, lazy=True), RuntimeConfig())
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
tot = []
for r in range(reps):
    expected = (0 if r % 2 == 0 else 100) if sys.argv[4] == 'alt' else int(sys.argv[4])
    try:
        loc = L.Locator(prep, default_budget(), 16, expose_all_root=False, expected_samples=expected)
    except TypeError:  # an older checkout
        loc = L.Locator(prep, default_budget(), 16, expose_all_root=False)
    for _ in range(3): loc.analyse("c", clean)
    if getattr(loc, "prebuild", None) is not None and loc.prebuild.future is not None:
        loc.prebuild.future.result()  # as at sample 50 of 100: the background build is long done
    time.sleep(0.2)
    w, c = time.perf_counter(), time.process_time(); loc.analyse("c", clean); cw, cc = time.perf_counter() - w, time.process_time() - c
    acc.clear()
    w, c = time.perf_counter(), time.process_time(); rec = loc.analyse("b", bad); bw, bc = time.perf_counter() - w, time.process_time() - c
    parts = dict(acc)
    tot.append(((bw - cw) / pw, (bc - cc) / pc))
    print(f"rep {r}: extra {tot[-1][0]:.1f} wall / {tot[-1][1]:.1f} cpu inferences (plain {pw*1e3:.1f}/{pc*1e3:.1f} ms; clean analyse {cw*1e3:.1f}/{cc*1e3:.1f}; bad {bw*1e3:.1f}/{bc*1e3:.1f}) runs={rec.runs} origin={rec.origin.node} prebuilt={getattr(getattr(loc, 'prebuild', None), 'used', None)}")
    for k, (a, b, n) in sorted(parts.items(), key=lambda kv: -kv[1][1]):
        print(f"    {k:18s} x{n:<4d} wall {a*1e3:7.1f} ms cpu {b*1e3:7.1f} ms = {b/pc:.2f} inf")
import statistics
for m in (0, 1):
    sel = tot[m::2]
    print("mode", m, "median extra wall %.1f cpu %.1f" % (statistics.median(t[0] for t in sel), statistics.median(t[1] for t in sel)))
print("median extra wall %.1f cpu %.1f" % (statistics.median(t[0] for t in tot), statistics.median(t[1] for t in tot)))
