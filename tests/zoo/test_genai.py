"""onnxruntime-genai builder members (issue 41): mi's decode and sequence mode against onnxruntime-genai's own
greedy Generator, an independent implementation (its own KV-cache handling, its own search), whose tokens the
zoo build recorded in the manifest (scripts/zoolib/genai_export.py: free-running with `generate_next_token`,
teacher-forced on fp32's tokens with `append_tokens` and the argmax of `get_logits`).

For every prompt of every builder export: mi's free-running tokens of A (fp32) and B (the variant) are the
Generator's (it stops at EOS: then its tokens, EOS last, are the start of mi's), and so is the first step
they part; teacher-forced (`--teacher-forced --jsonl`), every step's pair of tokens is the Generator's
fp32 token and the variant's choice fed fp32's tokens; `compare --sequence steps/` (prompt 0, then fp32's
tokens) first differs in decision where the Generator's teacher-forced tokens first differ.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import pytest

from .sweep import DECODE_STEPS
from .test_sweep import CASES, _case, _fact, _results

pytestmark = pytest.mark.zoo
GENAI = [c for c in CASES if c[0].endswith("_genai")]
EOS = 2  # the members' eos_token_id (scripts/zoolib/genai.py)


def _first_difference(a: List[int], b: List[int]) -> Optional[int]:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), None)


def _generator(sweep, model: str, variant: str) -> dict:
    manifest = sweep.manifest(model)
    entry = manifest["fp32"] if variant == "fp32" else manifest["variants"][variant]
    if "generator" not in entry:
        pytest.fail(f"the zoo build recorded no Generator run: {entry.get('generator_failed', 'missing')}")
    return entry["generator"]


def _prefix_of(gen: List[int], mi: List[int], eos_stopped: bool) -> bool:
    """The Generator's tokens are mi's (it stops at EOS, mi decodes on: then they are mi's first ones)."""
    if eos_stopped:
        return gen[-1:] == [EOS] and mi[:len(gen)] == gen
    return mi == gen


@pytest.mark.parametrize("model,variant", GENAI)
def test_decode_equals_the_generator(request, sweep, model, variant):
    _case(request, sweep, "decode-generator", model, variant)
    prompts = json.loads((sweep.zoo / model / "prompts.json").read_text())
    gen_a, gen_b = _generator(sweep, model, "fp32"), _generator(sweep, model, variant)
    free, forced = sweep.decode(model, variant), sweep.decode(model, variant, teacher_forced=True)
    assert free.rc == 0 and forced.rc == 0, (free.stderr_tail[-300:], forced.stderr_tail[-300:])
    runs = _results(free)["decode_runs"]
    lines = [json.loads(x) for x in Path(forced.argv[forced.argv.index("--jsonl") + 1]).read_text().splitlines()]
    off, firsts, forced_firsts = [], [], []
    for i in range(len(prompts)):
        a, b = gen_a["free_running"][i], gen_b["free_running"][i]
        mi_a, mi_b = runs[i]["tokens_a"], runs[i]["tokens_b"]
        if not (_prefix_of(a["tokens"], mi_a, a["stopped_at_eos"]) and _prefix_of(b["tokens"], mi_b, b["stopped_at_eos"])):
            off.append(f"prompt {i} free-running: mi A {mi_a} B {mi_b}, Generator A {a['tokens']} B {b['tokens']}")
        want = _first_difference(a["tokens"], b["tokens"])
        if want is None and len(a["tokens"]) != len(b["tokens"]):
            want = min(len(a["tokens"]), len(b["tokens"]))  # one stopped at EOS, the other did not
        firsts.append(want)
        if want is not None and runs[i]["first_difference"] != want:
            off.append(f"prompt {i}: mi parts at step {runs[i]['first_difference']}, the Generator at {want}")
        if want is None and runs[i]["first_difference"] is not None and \
                runs[i]["first_difference"] < len(a["tokens"]):
            off.append(f"prompt {i}: mi parts at step {runs[i]['first_difference']}, the Generator never")
        ref, fed = gen_a["free_running"][i]["tokens"], gen_b["teacher_forced"][i]["tokens"]
        for k in range(len(fed)):
            got = lines[i * DECODE_STEPS + k]["tokens"]
            if got != [ref[k], fed[k]]:
                off.append(f"prompt {i} step {k} teacher-forced: mi {got}, Generator {[ref[k], fed[k]]}")
        forced_firsts.append(_first_difference(ref, fed))
    seq = next(r for r in sweep.commands(model, variant) if r.command == "compare-seq")
    got = _results(seq)["first_decision_difference"]
    if got != forced_firsts[0]:
        off.append(f"compare --sequence: first differing decision at step {got}, the Generator's at {forced_firsts[0]}")
    _fact(sweep, model, variant, generator_first_difference=firsts, generator_forced_first_difference=forced_firsts,
          generator_prompts=len(prompts), generator_off=len(off))
    assert not off, "\n".join(off[:10])
