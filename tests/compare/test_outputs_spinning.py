"""Outputs-only comparison in this process: the two sessions take turns, so each one's idle threads
spin only inside its own runs (issue 45); a spinning setting the user chose is kept, and workers keep
the batch runtime (no spinning at all)."""
from __future__ import annotations

from inspector_cli.compare.batch import outputs_runtime
from inspector_cli.core.runner import SPIN_STOP, SPINNING, RuntimeConfig
from inspector_cli.executor.base import ExecutorSpec


def test_in_process_sessions_stop_spinning_when_a_run_ends():
    runtime = outputs_runtime(RuntimeConfig(intra_op_threads=2), ExecutorSpec())
    assert runtime.session_config == ((SPIN_STOP, "1"),)
    assert runtime.intra_op_threads == 2


def test_a_users_spinning_choice_is_kept():
    for chosen in (((SPINNING, "1"),), ((SPIN_STOP, "0"),)):
        runtime = RuntimeConfig(session_config=chosen)
        assert outputs_runtime(runtime, ExecutorSpec()) is runtime


def test_workers_keep_the_batch_runtime():
    runtime = outputs_runtime(RuntimeConfig(), ExecutorSpec(workers=2))
    assert runtime.session_config == ((SPINNING, "0"),)
