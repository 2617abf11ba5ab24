"""Image inputs: the preprocessing pipeline against numpy, spec/model mismatches, spec files."""
from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from inspector_cli.core.graph import ModelGraph
from inspector_cli.core.inputs import discover_samples
from inspector_cli.core.preprocess import PreprocessSpec, parse_spec, resized_size
from inspector_cli.errors import InputDataError

from ..fixtures.helpers import affine_model, invoke, make_model, read_json, save, vi

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])
LEFT, RIGHT = (200, 10, 50), (20, 100, 240)


def specs(model):
    return ModelGraph.from_proto(model).inputs


def load_one(path, model, spec):
    samples = discover_samples([str(path)], specs(model), {"preprocess": spec})
    [(sample_id, feeds)] = list(samples)
    return feeds, samples


def halves_image(path, width=40, height=30):
    """Left half one colour, right half another: a resize keeps them exact away from the border."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[:, : width // 2] = LEFT
    pixels[:, width // 2:] = RIGHT
    Image.fromarray(pixels).save(path)
    return path


def test_known_pixels_through_resize_crop_and_normalise(tmp_path):
    image = halves_image(tmp_path / "halves.png")
    # 40x30 -> shorter side 20: 26x20 (int(20 * 40 / 30) = 26) -> crop 16x16 at left 5, top 2.
    assert resized_size(parse_spec({"resize": 20}), 40, 30) == (26, 20)
    model = affine_model(shape=(1, 3, 16, 16))
    spec = {"resize": 20, "center-crop": 16, "scale": "1/255", "mean": MEAN.tolist(), "std": STD.tolist()}
    feeds, samples = load_one(image, model, spec)
    x = feeds["x"]
    assert x.shape == (1, 3, 16, 16) and x.dtype == np.float32
    # Crop column 0 is resized column 5, source x ~ 8: left colour. Crop column 15 is source x ~ 31: right.
    expected_left = (np.array(LEFT) / 255 - MEAN) / STD
    expected_right = (np.array(RIGHT) / 255 - MEAN) / STD
    np.testing.assert_allclose(x[0, :, 8, 0], expected_left, rtol=1e-6)
    np.testing.assert_allclose(x[0, :, 8, 15], expected_right, rtol=1e-6)
    # Resized columns 11..12 straddle the colour edge (source x 20): blended, strictly between the two.
    middle = x[0, 0, 8, 7]
    assert min(expected_left[0], expected_right[0]) < middle < max(expected_left[0], expected_right[0])
    recorded = samples.describe()["reader_options"]["preprocess"]
    assert recorded == {"input": "x", "resize": [20], "center-crop": [16, 16], "interpolation": "bilinear",
                        "scale": pytest.approx(1 / 255), "mean": MEAN.tolist(), "std": STD.tolist(),
                        "channel-order": "RGB", "layout": "NCHW", "dtype": "float32"}


def test_crop_offsets_and_normalisation_match_numpy_on_every_pixel(tmp_path):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (5, 8, 3), dtype=np.uint8)      # height 5, width 8
    Image.fromarray(pixels).save(tmp_path / "p.png")
    # crop 3x4: top = round((5 - 3) / 2) = 1, left = round((8 - 4) / 2) = 2
    crop = pixels[1:4, 2:6].astype(np.float64)
    model = affine_model(shape=(1, 3, 3, 4))
    feeds, _ = load_one(tmp_path / "p.png", model, {"center-crop": [3, 4], "scale": 0.5, "mean": [1, 2, 3],
                                                     "std": [2, 4, 8]})
    expected = ((crop * 0.5 - [1, 2, 3]) / [2, 4, 8]).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(feeds["x"], expected.astype(np.float32), rtol=1e-6)
    # BGR, NHWC: channels reversed before mean/std (given in BGR order), channels last.
    model_nhwc = affine_model(shape=(1, 3, 4, 3))
    feeds, _ = load_one(tmp_path / "p.png", model_nhwc, {"center-crop": [3, 4], "channel-order": "BGR", "layout": "NHWC",
                                                          "mean": [10, 20, 30]})
    np.testing.assert_allclose(feeds["x"], (crop[:, :, ::-1] - [10, 20, 30])[None].astype(np.float32))
    # uint8 model: the pixels as they are; GRAY: Pillow's L conversion.
    model_u8 = make_model([], [vi("x", [1, 1, 3, 4], 2)], [vi("x", [1, 1, 3, 4], 2)])
    feeds, _ = load_one(tmp_path / "p.png", model_u8, {"center-crop": [3, 4], "channel-order": "GRAY"})
    gray = np.asarray(Image.fromarray(pixels).convert("L"))[1:4, 2:6]
    assert feeds["x"].dtype == np.uint8 and np.array_equal(feeds["x"][0, 0], gray)


def test_exact_resize_and_jpeg_and_bmp(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("a.jpg", "b.bmp"):
        Image.fromarray(rng.integers(0, 256, (30, 50, 3), dtype=np.uint8)).save(tmp_path / name)
    model = affine_model(shape=(1, 3, 12, 20))
    samples = discover_samples([str(tmp_path)], specs(model), {"preprocess": {"resize": "12x20"}})
    shapes = [feeds["x"].shape for _, feeds in samples]
    assert shapes == [(1, 3, 12, 20), (1, 3, 12, 20)]


@pytest.mark.parametrize("model_shape,spec,message", [
    ((1, 1, 16, 16), {"resize": "16,16"}, r"channel is 1 in the model, but channel-order RGB gives 3 channel\(s\)"),
    ((1, 3, 224, 224), {"resize": 256, "center-crop": 200},
     r"height is 224 in the model, but the spec makes 200x200 images \(change center-crop or resize\)"),
    ((1, 3, 16, 16), {"resize": "16,16", "dtype": "float16"},
     r"the spec makes float16, the model expects float32"),
    ((1, 16, 16, 3), {"resize": "16,16", "layout": "NCHW"}, r"the input looks NHWC: set layout: NHWC"),
    ((2, 3, 16, 16), {"resize": "16,16"}, r"batch is 2 in the model, but one image is one sample of batch 1"),
    ((1, 3, 16), {"resize": "16,16", "layout": "NCHW"}, r"layout NCHW has 4 axes, the input has 3"),
])
def test_spec_and_model_mismatches_are_clear_errors(tmp_path, model_shape, spec, message):
    halves_image(tmp_path / "i.png")
    with pytest.raises(InputDataError, match=message):
        load_one(tmp_path / "i.png", affine_model(shape=model_shape), spec)


def test_image_of_the_wrong_size_names_the_file(tmp_path):
    halves_image(tmp_path / "big.png")
    with pytest.raises(InputDataError, match=r"big\.png: the image gives 30x40 \(height x width\), input 'x' "
                                             r"expects 16x16"):
        load_one(tmp_path / "big.png", affine_model(shape=(1, 3, 16, 16)), {})


def test_two_input_model_needs_the_input_named(tmp_path):
    halves_image(tmp_path / "i.png")
    model = make_model([], [vi("img", [1, 3, 30, 40]), vi("k", [1])], [vi("img", [1, 3, 30, 40])])
    with pytest.raises(InputDataError, match=r"the model has 2 inputs \(img, k\); say which one takes the images"):
        load_one(tmp_path / "i.png", model, {})


def test_bad_spec_values():
    for spec, message in [({"resize": "big"}, "is not a size"), ({"mean": [1, 2]}, "one value or one per channel"),
                          ({"std": 0}, "std must not be 0"), ({"layout": "NCWH"}, "not one of"),
                          ({"scale": "1/0"}, "not a number"), ({"dtype": "uint8", "scale": "1/255"}, "drop scale"),
                          ({"centre-crop": 3}, "unknown preprocessing key")]:
        with pytest.raises(ValueError, match=message):
            parse_spec(spec)
    assert parse_spec({"resize": [224, 224], "center_crop": 224}) == PreprocessSpec(resize=(224, 224),
                                                                                     center_crop=(224, 224))


def test_spec_file_errors_have_file_and_line(tmp_path):
    save(affine_model(shape=(1, 3, 16, 16)), tmp_path / "m.onnx")
    (tmp_path / "imgs").mkdir()
    halves_image(tmp_path / "imgs" / "i.png")
    spec = tmp_path / "pre.yaml"
    spec.write_text("version: 1\npreprocess:\n  resize: 20\n  centre-crop: 16\n")
    result = invoke(["inputs", "show", tmp_path / "imgs", "--model", tmp_path / "m.onnx", "--preprocess", spec],
                    exit_code=2)
    assert re.search(r"pre\.yaml:4: preprocess\.centre-crop: unknown preprocessing key \(did you mean "
                     r"'center-crop'\?\)", result.stderr)
    spec.write_text("version: 1\npreprocess:\n  resize: 20\n  mean: [1, 2]\n")
    result = invoke(["inputs", "show", tmp_path / "imgs", "--model", tmp_path / "m.onnx", "--preprocess", spec],
                    exit_code=2)
    assert "pre.yaml:4: preprocess.mean: [1, 2]: give one value or one per channel (3)" in result.stderr
    # --preprocess-set wins over the file
    spec.write_text("version: 1\npreprocess:\n  resize: 20\n  center-crop: 12\n")
    invoke(["inputs", "show", tmp_path / "imgs", "--model", tmp_path / "m.onnx", "--preprocess", spec,
            "--preprocess-set", "center-crop=16", "--json", tmp_path / "r.json"])
    recorded = read_json(tmp_path / "r.json")["inputs"]["reader_options"]["preprocess"]
    assert recorded["center-crop"] == [16, 16] and recorded["resize"] == [20]
    result = invoke(["inputs", "show", tmp_path / "imgs", "--model", tmp_path / "m.onnx",
                     "--preprocess-set", "crop=16"], exit_code=2)
    assert "--preprocess-set crop: unknown preprocessing key" in result.stderr


def test_compare_on_images_records_the_resolved_spec(tmp_path):
    from pathlib import Path

    rng = np.random.default_rng(1)
    (tmp_path / "imgs").mkdir()
    for i, (w, h) in enumerate([(300, 260), (256, 320), (400, 256)]):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / "imgs" / f"im{i}.png")
    save(affine_model(shape=(1, 3, 224, 224)), tmp_path / "a.onnx")
    save(affine_model(scale=1.001, shape=(1, 3, 224, 224)), tmp_path / "b.onnx")
    config = Path(__file__).resolve().parents[2] / "configs" / "imagenet-preprocess.yaml"
    invoke(["compare", tmp_path / "a.onnx", tmp_path / "b.onnx", "--inputs", tmp_path / "imgs",
            "--preprocess", config, "--min-cosine", "0.9999", "--json", tmp_path / "r.json"])
    doc = read_json(tmp_path / "r.json")
    assert doc["inputs"]["count"] == 3
    resolved = doc["inputs"]["reader_options"]["preprocess"]
    assert resolved["resize"] == [256] and resolved["center-crop"] == [224, 224]
    assert resolved["layout"] == "NCHW" and resolved["dtype"] == "float32" and resolved["input"] == "x"
    assert doc["config"]["reader_options"]["preprocess"]["scale"] == "1/255"     # as requested
    assert doc["results"]["gates"][0]["passed"] is True


@pytest.mark.slow
def test_same_tensor_as_torchvision_classic_transform(tmp_path):
    """The ImageNet spec gives torchvision's Resize(256)/CenterCrop(224)/ToTensor/Normalize result."""
    try:  # PyPI's torchvision beside a torch it was not built for fails with RuntimeError, not ImportError
        import torchvision.transforms as transforms
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"torchvision is not usable here (CI installs none): {type(exc).__name__}")
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (300, 397, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "r.png")
    reference = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                    transforms.Normalize(MEAN.tolist(), STD.tolist())])(Image.open(tmp_path / "r.png"))
    feeds, _ = load_one(tmp_path / "r.png", affine_model(shape=(1, 3, 224, 224)),
                        {"resize": 256, "center-crop": 224, "scale": "1/255", "mean": MEAN.tolist(),
                         "std": STD.tolist()})
    np.testing.assert_allclose(feeds["x"][0], reference.numpy(), atol=1e-5)
