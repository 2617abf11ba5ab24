from __future__ import annotations

import json

import numpy as np
import pytest

from inspector_cli.errors import InputDataError
from inspector_cli.remedy.labels import accuracy_report, accuracy_reports, load_labels


def onehot(index: int, classes: int = 10, second: int = -1) -> np.ndarray:
    row = np.zeros((1, classes), dtype=np.float32)
    row[0, index] = 2.0
    if second >= 0:
        row[0, second] = 1.0
    return row


@pytest.fixture
def scores():
    # 8 samples, labels = sample index % 10. A right on 0..6 (wrong on s7);
    # B wrong on s1 and s2 (A right there), right on s7 (A wrong there): known flips both ways.
    labels = {f"s{i}.npz": i for i in range(8)}
    a = {f"s{i}.npz": onehot(i) for i in range(7)}
    a["s7.npz"] = onehot(0, second=7)
    b = dict(a)
    b["s1.npz"] = onehot(9, second=1)  # top-1 wrong, top-5 right
    b["s2.npz"] = onehot(9, second=8)  # top-1 wrong; label 2 in top 5 only through the tie order
    b["s7.npz"] = onehot(7)
    return labels, a, b


def test_top1_accuracy_drop_and_flips(tmp_path, scores):
    labels, a, b = scores
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(labels))
    loaded = load_labels(path)
    result = accuracy_report(a, b, loaded, "logits", k=1, max_accuracy_drop=0.1)
    assert result.samples == 8
    assert result.accuracy_a == pytest.approx(7 / 8)
    assert result.accuracy_b == pytest.approx(6 / 8)
    assert result.drop == pytest.approx(1 / 8)
    assert result.a_right_b_wrong == ["s1.npz", "s2.npz"]
    assert result.a_wrong_b_right == ["s7.npz"]
    low, high = result.drop_ci95
    assert low <= 1 / 8 <= high and low < 0 < high  # 8 samples: the interval straddles zero
    assert result.failed_gates == ["top-1 accuracy drop 0.1250 > --max-accuracy-drop 0.1"]
    assert result.passed is False
    again = accuracy_report(a, b, loaded, "logits", k=1)
    assert again.drop_ci95 == result.drop_ci95  # fixed seed


def test_top5_and_csv_by_stem(tmp_path, scores):
    labels, a, b = scores
    path = tmp_path / "labels.csv"
    path.write_text("file,class\n" + "".join(f"{name[:-4]},{label}\n" for name, label in labels.items()))
    top1, top5 = accuracy_reports(a, b, load_labels(path), "logits", ks=(1, 5), min_accuracy=0.8)
    assert top1.failed_gates == ["top-1 accuracy of B 0.7500 < --min-accuracy 0.8"]
    # top-5 on ten classes: s1 keeps its label second; s2's label 2 scores 0 and ties with seven
    # other zeros behind 9 and 8 (stable order keeps the lowest indices first: 0, 1, 2 -> in top 5)
    assert top5.accuracy_b == pytest.approx(1.0)
    assert top5.failed_gates == []
    assert top5.passed is True


def test_per_output_labels_and_bad_label(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("a.npz,logits,3\na.npz,aux,1\n")
    labels = load_labels(path)
    assert labels == {"a.npz": {"logits": 3, "aux": 1}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a.npz": "cat"}))
    with pytest.raises(InputDataError, match=r"bad\.json: a\.npz: label .cat."):
        load_labels(bad)
    with pytest.raises(InputDataError, match=r"outside the 10 classes"):
        accuracy_report({"a.npz": onehot(1)}, {"a.npz": onehot(1)}, {"a.npz": {"*": 12}}, "logits")
