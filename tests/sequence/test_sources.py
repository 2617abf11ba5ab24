"""Step sources: a folder of step samples, an .npz with a time axis, an array or audio file in chunks."""
from __future__ import annotations

import wave

import numpy as np
import pytest
from onnx import TensorProto

from inspector_cli.core.types import TensorInfo
from inspector_cli.errors import InputDataError, UsageError
from inspector_cli.sequence import open_steps

X = TensorInfo("x", TensorProto.FLOAT, (1, 4))


def test_folder_in_natural_order_and_resume(tmp_path):
    for t in (0, 1, 2, 10):  # natural order: step_2 before step_10
        np.savez(tmp_path / f"step_{t}.npz", x=np.full((1, 4), t, np.float32))
    source = open_steps(tmp_path, [X])
    assert source.layout == "folder" and source.length == 4
    assert [(i, float(f["x"][0, 0])) for i, f in source.steps()] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 10.0)]
    assert [i for i, _ in source.steps(start=2)] == [2, 3]
    assert [i for i, _ in source.steps(limit=2)] == [0, 1]


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_with_a_time_axis_is_streamed_step_by_step(tmp_path, compressed):
    values = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)  # [T, 4]: one rank short, batch axis added
    (np.savez_compressed if compressed else np.savez)(tmp_path / "seq.npz", x=values)
    source = open_steps(tmp_path / "seq.npz", [X])
    assert source.layout == "npz-time" and source.length == 5
    steps = list(source.steps(start=3))
    assert [i for i, _ in steps] == [3, 4]
    np.testing.assert_array_equal(steps[0][1]["x"], values[3][None])


def test_npz_errors_name_the_member(tmp_path):
    np.savez(tmp_path / "bad.npz", y=np.zeros((3, 1, 4), np.float32), z=np.zeros((3, 1, 4), np.float32))
    with pytest.raises(InputDataError, match="arrays y, z do not name the step inputs x"):
        list(open_steps(tmp_path / "bad.npz", [X]).steps())
    np.savez(tmp_path / "wrong.npz", x=np.zeros((3, 1, 5), np.float32))
    with pytest.raises(InputDataError, match=r"step 0: input 'x' has shape \[1, 5\], the model expects \[1, 4\]"):
        list(open_steps(tmp_path / "wrong.npz", [X]).steps())


def test_npy_cut_into_chunks(tmp_path):
    np.save(tmp_path / "signal.npy", np.arange(10, dtype=np.float32))
    source = open_steps(tmp_path / "signal.npy", [X], chunk=4)
    assert source.length == 2 and source.notes == ["2 trailing value(s) dropped"]
    chunks = [f["x"] for _, f in source.steps()]
    np.testing.assert_array_equal(chunks[1], np.array([[4, 5, 6, 7]], np.float32))
    with pytest.raises(UsageError, match="input 'x' takes 4 values per step"):
        list(open_steps(tmp_path / "signal.npy", [X], chunk=3).steps())


def test_wav_cut_into_chunks_with_a_free_dimension(tmp_path):
    pcm = (np.arange(12) * 1000).astype("<i2")
    with wave.open(str(tmp_path / "a.wav"), "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(16000)
        audio.writeframes(pcm.tobytes())
    spec = TensorInfo("audio", TensorProto.FLOAT, ("batch", "samples"))
    source = open_steps(tmp_path / "a.wav", [spec], chunk=5)
    steps = list(source.steps())
    assert source.length == 2 and [f["audio"].shape for _, f in steps] == [(1, 5), (1, 5)]
    np.testing.assert_allclose(steps[1][1]["audio"][0], pcm[5:10] / 32768.0)


def test_layout_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file or folder"):
        open_steps(tmp_path / "missing", [X])
    (tmp_path / "t.txt").write_text("1")
    with pytest.raises(UsageError, match="a sequence is a folder of step samples"):
        open_steps(tmp_path / "t.txt", [X])
    np.save(tmp_path / "s.npy", np.zeros(8, np.float32))
    with pytest.raises(UsageError, match="chunks feed exactly one"):
        open_steps(tmp_path / "s.npy", [X, TensorInfo("y", TensorProto.FLOAT, (1,))], chunk=4)


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_runs_of_steps_resume_and_limit(tmp_path, compressed):
    """Two members read in runs of 256 steps (stored: at their file offset; compressed: streamed);
    a start past the first run skips it, a limit stops inside a run, each step is its own row."""
    specs = [X, TensorInfo("y", TensorProto.INT64, (1, 2))]
    x = np.arange(600 * 4, dtype=np.float32).reshape(600, 1, 4)
    y = np.arange(600 * 2, dtype=np.int64).reshape(600, 1, 2)
    (np.savez_compressed if compressed else np.savez)(tmp_path / "two.npz", x=x, y=y)
    source = open_steps(tmp_path / "two.npz", specs)
    steps = list(source.steps(start=300, limit=520))
    assert [i for i, _ in steps] == list(range(300, 520))
    for index, feeds in steps[::37] + steps[-1:]:
        np.testing.assert_array_equal(feeds["x"], x[index])
        np.testing.assert_array_equal(feeds["y"], y[index])
    assert len(list(source.steps())) == 600


def test_a_stored_member_shorter_than_its_header_is_refused(tmp_path):
    """The .npy header of stored member x says 5 steps, its data holds 2, and member y follows it:
    reading x at its file offset must not run on into y's bytes."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (5, 1, 4)})
    short = header.getvalue() + np.arange(8, dtype=np.float32).tobytes()
    after = io.BytesIO()
    np.save(after, np.ones((3, 1, 4), np.float32))
    path = tmp_path / "short.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("x.npy", short)
        archive.writestr("y.npy", after.getvalue())
    with pytest.raises(InputDataError, match=r"short\.npz: member 'x' declares 5 steps but holds fewer"):
        list(open_steps(path, [X]).steps())


def test_a_scalar_input_per_step_is_a_0d_array(tmp_path):
    """Silero-style VAD: a scalar `sr` beside the audio chunk, stacked along the time axis as shape [T]
    (zoo sweep, issue 29). Each step's value must be a 0-d ndarray: a numpy scalar made onnxruntime
    fail with 'Unable to handle object of type numpy.int64' (exit 3 blaming model A)."""
    specs = [X, TensorInfo("sr", TensorProto.INT64, ())]
    np.savez(tmp_path / "seq.npz", x=np.zeros((3, 1, 4), np.float32), sr=np.array([16000, 8000, 16000]))
    steps = list(open_steps(tmp_path / "seq.npz", specs).steps())
    srs = [feeds["sr"] for _, feeds in steps]
    assert all(isinstance(v, np.ndarray) and v.shape == () for v in srs)
    assert [int(v) for v in srs] == [16000, 8000, 16000]
