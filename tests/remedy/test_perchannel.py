from __future__ import annotations

import numpy as np
import pytest

from inspector_cli.remedy.evaluate import parse_target
from inspector_cli.remedy.perchannel import per_channel_enough, sqnr_db, weight_advice


def test_sqnr_db_hand_values():
    ref = np.array([3.0, 4.0])
    assert sqnr_db(ref, ref) == float("inf")
    # signal 25, noise 0.25 -> 10 log10(100) = 20 dB
    assert sqnr_db(ref, ref + np.array([0.5, 0.0])) == pytest.approx(20.0)


def test_advice_names_the_outlier_weight(broken_pair):
    advice = {a.node: a for a in weight_advice(broken_pair["broken"], broken_pair["fp32"])}
    assert sorted(advice) == ["conv1", "conv2", "conv3", "conv4", "fc"]
    assert [n for n, a in advice.items() if a.advise_per_channel] == ["conv3"]
    assert advice["conv3"].weight == "conv3.weight_quantized"
    assert advice["conv3"].gain_db > 20
    assert advice["conv3"].sqnr_per_channel > 40
    # the deployed per-tensor integers are onnxruntime's own: same SQNR as our per-tensor rounding
    assert advice["conv3"].sqnr_deployed == pytest.approx(advice["conv3"].sqnr_per_tensor, abs=0.5)


def test_per_channel_alone_is_enough_for_the_outlier_not_for_the_wrong_scale(broken_pair):
    verdict = per_channel_enough(broken_pair["fp32"], broken_pair["broken"], ["conv1", "conv3"],
                                 broken_pair["samples"], [parse_target("cosine>=0.995")])
    # conv1's problem is its input quantiser (wrong scale): a per-channel weight does not fix it
    assert verdict == {"conv1": False, "conv3": True}
