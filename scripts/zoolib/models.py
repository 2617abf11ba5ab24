"""The zoo's models: each a recipe (architecture, config, export settings) and its samples.

Every model is built with random init under a fixed seed; nothing is downloaded. `FAST` is the CI
subset: small models that together exercise every variant kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import decoders as D
from . import genai as G
from . import samples as S

Sample = Dict[str, np.ndarray]


@dataclass(frozen=True)
class Spec:
    """One zoo model: how to build the torch module (or ONNX model), export it and feed it."""

    name: str
    kind: str                      # cnn, segmenter, vit, text, decoder, speech, recurrent, sklearn, sequence
    build: Callable[[], object]    # -> torch.nn.Module (or an onnx.ModelProto for sklearn)
    inputs: Callable[[int, int], List[Sample]]   # (count, offset) -> samples
    output_names: Tuple[str, ...]
    dynamic: Dict[str, Dict[int, str]]
    opset: int
    exporter: str = "torchscript"  # or "dynamo" or "skl2onnx"
    recipe: Dict[str, object] = field(default_factory=dict)  # what the cache key hashes
    int4: bool = False             # MatMulNBits variant applies (transformers)
    variants: Optional[Tuple[str, ...]] = None  # the variants that apply (None: every one of VARIANTS)
    refused: Optional[str] = None  # onnxruntime refuses the model, with this in its message (edited.py)


def _hf(cls_name: str, config_name: str, head: Callable, *, init: str = "", **config) -> Callable[[], object]:
    def build():
        import torch
        import transformers

        torch.manual_seed(0)
        cfg = getattr(transformers, config_name)(**config)
        cfg._attn_implementation = "eager"  # the attention ops users export (SDPA traces to the same math)
        model = getattr(transformers, cls_name)(cfg).eval()
        if init == "he+bn-stats":
            _he_init_with_bn_stats(model, config.get("image_size", 224))
        return _Wrap(model, head)
    return build


def _he_init_with_bn_stats(model, size: int) -> None:
    """He init (fan_in) of every conv and linear weight, biases zero, then batch-norm statistics measured
    on the zoo's photos (each batch norm then normalises its input to unit variance).

    transformers' random init shrinks the activations of a deep, narrow CNN layer after layer:
    MobileNetV2's logits came out ~1e-25 and EfficientNet's exactly 0 for every sample, so every comparison
    on them was trivially perfect (issue 29). He init alone still lost ~3x per EfficientNet block (SiLU and
    the squeeze-excitation gates halve small values: logits ~1e-3, and its int8 copy read all zeros).
    fan_in, not torchvision's fan_out: a depthwise conv's fan_out counts every channel, which shrinks its
    weights by sqrt(channels). Re-seeded, so the weights depend on the recipe only.
    """
    import torch

    torch.manual_seed(1)
    norms = []
    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, torch.nn.BatchNorm2d):
            module.reset_parameters()
            module.momentum = None  # a cumulative average over the calibration batch
            norms.append(module)
    photos = torch.from_numpy(np.concatenate(S.images(8, size, 40)))  # not the test or calibration photos
    for norm in norms:
        norm.train()
    with torch.no_grad():
        model(pixel_values=photos)
    model.eval()


def _Wrap(model, head):
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            return head(self.model, *args)
    return Wrap()


def _images(size: int) -> Callable[[int, int], List[Sample]]:
    return lambda n, off: [{"pixel_values": x} for x in S.images(n, size, off)]


def _text(seq: int, vocab: int) -> Callable[[int, int], List[Sample]]:
    return lambda n, off: S.tokens(n, seq, vocab, off)


IMG_DYN = {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}
TEXT_DYN = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}}
logits = lambda m, x: m(pixel_values=x).logits  # noqa: E731


def _cnn(name, cls, config, opset, size=224, exporter="torchscript", init="", **cfg) -> Spec:
    recipe = {"cls": cls, **cfg, "size": size, **({"init": init} if init else {})}
    return Spec(name, "cnn", _hf(cls, config, logits, init=init, **cfg), _images(size), ("logits",), IMG_DYN, opset,
                exporter, recipe)


def _gpt_inputs(n: int, off: int) -> List[Sample]:
    out, rng = [], np.random.default_rng(7 + off)
    for s in S.tokens(n, 8, 1000, off):
        sample = {"input_ids": s["input_ids"], "attention_mask": np.ones((1, 4 + 8), np.int64)}
        sample["attention_mask"][0, 4:] = s["attention_mask"][0]
        for i in range(2):  # a 4-token past, as a second decoding step sees it
            sample[f"past_key_{i}"] = (0.5 * rng.standard_normal((1, 4, 4, 16))).astype(np.float32)
            sample[f"past_value_{i}"] = (0.5 * rng.standard_normal((1, 4, 4, 16))).astype(np.float32)
        out.append(sample)
    return out


def _gpt() -> object:
    import torch

    from .nets import Gpt2Like
    torch.manual_seed(0)
    return Gpt2Like().eval()


def _vad() -> object:
    import torch

    from .nets import VadLike
    torch.manual_seed(0)
    return VadLike().eval()


def _vad_inputs(n: int, off: int) -> List[Sample]:
    rng = np.random.default_rng(11 + off)
    return [{"input": a[:, :512] * 3, "state": (0.3 * rng.standard_normal((1, 1, 32))).astype(np.float32),
             "sr": np.array(16000, np.int64)} for a in S.audio(n, 512 * 4, offset=off)]


def _sklearn() -> object:
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    pipe = make_pipeline(StandardScaler(), PCA(16, random_state=0), LogisticRegression(max_iter=500)).fit(x, y)
    return to_onnx(pipe, x[:1].astype(np.float32), options={"zipmap": False},
                   target_opset={"": 17, "ai.onnx.ml": 3}, initial_types=None)


_DIGIT_WORDS = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])


def _sklearn_strings() -> object:
    """A classifier trained on string class labels, ZipMap off (what users who want arrays set): output
    `label` is tensor(string), `probabilities` a float tensor."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    mlp = MLPClassifier((32,), max_iter=300, random_state=0)
    pipe = make_pipeline(StandardScaler(), mlp).fit(x, _DIGIT_WORDS[y])
    return to_onnx(pipe, x[:1].astype(np.float32), options={"zipmap": False},
                   target_opset={"": 17, "ai.onnx.ml": 3})


def _sklearn_zipmap() -> object:
    """skl2onnx's default export of a classifier: ZipMap on, so `output_probability` is
    seq(map(int64, float)) (one {class: probability} per row) beside the int64 `output_label`."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier

    x, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0).fit(x, y)
    return to_onnx(forest, x[:1].astype(np.float32), target_opset={"": 17, "ai.onnx.ml": 3})


def _frames() -> object:
    """A windowed encoder written with a Python list, scripted and exported with torch.onnx (torchscript):
    SplitToSequence, a Loop of SequenceAt/SequenceInsert, ConcatFromSequence, and the list itself as the
    output `frame_features` (seq(tensor(float)), ragged: windows of 4 steps, the last one shorter)."""
    import torch

    from .nets import FrameList
    torch.manual_seed(0)
    return torch.jit.script(FrameList().eval())


def _frame_inputs(n: int, off: int) -> List[Sample]:
    rng = np.random.default_rng(13 + off)
    return [{"frames": rng.standard_normal((1, 6 + (i % 3), 16)).astype(np.float32)} for i in range(n)]


def _digits(n: int, off: int) -> List[Sample]:
    from sklearn.datasets import load_digits
    x = load_digits().data.astype(np.float32)
    return [{"X": x[8 * (i + off):8 * (i + off) + 8]} for i in range(n)]


def _whisper_inputs(n: int, off: int) -> List[Sample]:
    return [{"input_features": S.log_mel(a, 80, 100)} for a in S.audio(n, 16000, offset=off)]


def _wav_inputs(n: int, off: int) -> List[Sample]:
    return [{"input_values": (a - a.mean()) / (a.std() + 1e-7)} for a in S.audio(n, 16000, offset=off)]


def _past_names() -> Tuple[List[str], List[str]]:
    past = [f"past_{kv}_{i}" for i in range(2) for kv in ("key", "value")]
    return past, [p.replace("past", "present") for p in past]


_PAST, _PRESENT = _past_names()
_GPT_DYN = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "sequence"}, **{n: {0: "batch", 2: "past"} for n in _PAST},
            **{n: {0: "batch", 2: "total"} for n in _PRESENT}}
_SEG_OUT = ("logits",) + tuple(f"hidden_{i}" for i in range(4))
_TINY_VIT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)

SPECS: List[Spec] = [
    _cnn("resnet", "ResNetForImageClassification", "ResNetConfig", 17, embedding_size=16,
         hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=100),
    Spec("bert", "text", _hf("BertModel", "BertConfig", lambda m, i, a: tuple(m(input_ids=i, attention_mask=a,
         return_dict=False)[:2]), vocab_size=1000, **_TINY_VIT), _text(16, 1000),
         ("last_hidden_state", "pooler_output"), TEXT_DYN, 14, recipe={"cls": "BertModel", **_TINY_VIT}, int4=True),
    Spec("gpt2like", "decoder", _gpt, _gpt_inputs, ("logits", *_PRESENT), _GPT_DYN, 17,
         recipe={"cls": "Gpt2Like", "v": 1}, int4=True),
    Spec("vad", "recurrent", _vad, _vad_inputs, ("speech", "state_out"),
         {"input": {0: "batch"}, "state": {1: "batch"}, "speech": {0: "batch"}, "state_out": {1: "batch"}}, 15,
         recipe={"cls": "VadLike", "v": 1}),
    Spec("sklearn", "sklearn", _sklearn, _digits, ("label", "probabilities"), {}, 17, "skl2onnx",
         {"pipe": "scaler-pca16-logreg", "data": "digits"}),
    # ---- the rest of the zoo (MI_ZOO=full / without --fast)
    _cnn("mobilenetv2", "MobileNetV2ForImageClassification", "MobileNetV2Config", 13, depth_multiplier=0.35,
         num_labels=100, init="he+bn-stats"),
    _cnn("efficientnet", "EfficientNetForImageClassification", "EfficientNetConfig", 16, width_coefficient=0.25,
         depth_coefficient=0.25, hidden_dim=320, image_size=224, num_labels=100, init="he+bn-stats"),
    _cnn("convnext", "ConvNextForImageClassification", "ConvNextConfig", 18, hidden_sizes=[16, 32, 64, 128],
         depths=[1, 1, 2, 1], num_labels=100),
    _cnn("regnet", "RegNetForImageClassification", "RegNetConfig", 15, embedding_size=16,
         hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 2, 1], groups_width=8, num_labels=100),
    _cnn("resnet_dynamo", "ResNetForImageClassification", "ResNetConfig", 18, exporter="dynamo",
         embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=100),
    Spec("vit", "vit", _hf("ViTForImageClassification", "ViTConfig", logits, image_size=224, patch_size=16,
         num_labels=100, **_TINY_VIT), _images(224), ("logits",), IMG_DYN, 17, recipe={"cls": "ViT"}, int4=True),
    Spec("swin", "vit", _hf("SwinForImageClassification", "SwinConfig", logits, image_size=224, embed_dim=32,
         depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 8], num_labels=100), _images(224), ("logits",), IMG_DYN, 16,
         recipe={"cls": "Swin"}, int4=True),
    Spec("segformer", "segmenter", _hf("SegformerForSemanticSegmentation", "SegformerConfig",
         lambda m, x: (lambda o: (o.logits, *o.hidden_states))(m(pixel_values=x, output_hidden_states=True)),
         hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], decoder_hidden_size=64, num_labels=8),
         _images(128), _SEG_OUT, {"pixel_values": {0: "batch"}, **{o: {0: "batch"} for o in _SEG_OUT}}, 17,
         recipe={"cls": "Segformer"}),
    Spec("whisper_enc", "speech", _hf("WhisperModel", "WhisperConfig", lambda m, x: m.encoder(x).last_hidden_state,
         d_model=64, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
         encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=50, vocab_size=1000, num_mel_bins=80,
         pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1),
         _whisper_inputs, ("last_hidden_state",), {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}},
         17, recipe={"cls": "WhisperEncoder"}, int4=True),
    Spec("wav2vec2", "speech", _hf("Wav2Vec2Model", "Wav2Vec2Config", lambda m, x: m(x).last_hidden_state,
         hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32,) * 7,
         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4), _wav_inputs, ("last_hidden_state",),
         {"input_values": {0: "batch", 1: "samples"}, "last_hidden_state": {0: "batch", 1: "frames"}}, 14,
         recipe={"cls": "Wav2Vec2"}, int4=True),
    Spec("minilm", "text", _hf("BertModel", "BertConfig", lambda m, i, a: tuple(m(input_ids=i, attention_mask=a,
         return_dict=False)[:2]), vocab_size=1000, hidden_size=96, num_hidden_layers=3, num_attention_heads=12,
         intermediate_size=384), _text(24, 1000), ("last_hidden_state", "pooler_output"), TEXT_DYN, 13,
         recipe={"cls": "BertModel-MiniLM-like"}, int4=True),
    # ---- old-opset exports (issue 29): opset 11 as converter tools and older pipelines write them;
    # per-channel QDQ needs opset 13, so qdq_s8s8_pc is refused (recorded) and qdq_u8u8 is per-tensor
    _cnn("resnet_op11", "ResNetForImageClassification", "ResNetConfig", 11, embedding_size=16,
         hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=100),
    Spec("bert_op11", "text", _hf("BertModel", "BertConfig", lambda m, i, a: tuple(m(input_ids=i, attention_mask=a,
         return_dict=False)[:2]), vocab_size=1000, **_TINY_VIT), _text(16, 1000),
         ("last_hidden_state", "pooler_output"), TEXT_DYN, 11, recipe={"cls": "BertModel", **_TINY_VIT}, int4=True),
    # ---- non-tensor values (issue 29): string outputs, ZipMap's seq(map), sequence tensors
    Spec("sklearn_str", "sklearn", _sklearn_strings, _digits, ("label", "probabilities"), {}, 17, "skl2onnx",
         {"pipe": "scaler-mlp32", "labels": "words", "data": "digits"}),
    Spec("sklearn_zipmap", "sklearn", _sklearn_zipmap, _digits, ("output_label", "output_probability"), {}, 17,
         "skl2onnx", {"model": "random-forest-10x6", "zipmap": True, "data": "digits"}),
    Spec("seqlist", "sequence", _frames, _frame_inputs, ("logits", "pooled", "frame_features"),
         {"frames": {0: "batch", 1: "time"}}, 17, recipe={"cls": "FrameList", "v": 2}),
]

def _optimum(name: str) -> Spec:
    """A KV-cache decoder exported by optimum (zoolib/decoders.py; built only where optimum is available)."""
    recipe, kv_heads = D.RECIPES[name]
    cfg = recipe["kwargs"]
    layers = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    vocab = cfg["vocab_size"]
    present = tuple(f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value"))
    return Spec(name, "decoder", lambda: recipe, D.plain_inputs(layers, kv_heads, 16, vocab), ("logits", *present),
                {}, int(recipe["opset"]), "optimum", recipe, int4=True, variants=D.DECODER_VARIANTS)


SPECS += [_optimum("gpt2_optimum"), _optimum("llama_optimum")]


def _genai(name: str) -> Spec:
    """A KV-cache decoder exported by onnxruntime-genai's model builder (zoolib/genai.py; built only where
    onnxruntime-genai is available): fp32 and the builder's own int4/int8, each its builder folder."""
    present = tuple(f"present.{i}.{kv}" for i in range(G.LAYERS) for kv in ("key", "value"))
    recipe = G.RECIPES[name]
    return Spec(name, "decoder", lambda: recipe, G.plain_inputs, ("logits", *present), {}, 22, "genai", recipe,
                variants=G.PRECISIONS)


SPECS += [_genai(name) for name in G.RECIPES]
# ---- edited with onnx-graphsurgeon (issue 41): folded constants, a cut subgraph, outputs with a type but no
# shape, and a model onnxruntime refuses (duplicate node names)
from . import edited  # noqa: E402 - after Spec and the helpers it builds with

SPECS += edited.specs(Spec, _images, _text, IMG_DYN, TEXT_DYN)
FAST = ("resnet", "bert", "gpt2like", "vad", "sklearn", "resnet_gs_cut", "resnet_dupnames")


def torchvision_specs() -> List[Spec]:
    """ResNet-18 and MobileNetV3 from torchvision, when it imports (it needs another torch: docs/zoo.md)."""
    try:
        import torchvision  # noqa: F401
    except Exception:
        return []

    def tv(name: str) -> Callable[[], object]:
        def build():
            import torch
            import torchvision.models as tvm
            torch.manual_seed(0)
            return getattr(tvm, name)(weights=None).eval()
        return build
    dyn = {"input": {0: "batch"}, "output": {0: "batch"}}
    img = lambda n, off: [{"input": x} for x in S.images(n, 224, off)]  # noqa: E731
    return [Spec(f"tv_{n}", "cnn", tv(n), img, ("output",), dyn, 17, recipe={"tv": n}) for n in
            ("resnet18", "mobilenet_v3_small")]


def select(only: Optional[Sequence[str]], fast: bool) -> List[Spec]:
    """The specs to build: `only` names (any model), else the fast subset or everything."""
    specs = SPECS + torchvision_specs()
    if only:
        unknown = set(only) - {s.name for s in specs}
        if unknown:
            raise SystemExit(f"Error: unknown zoo model(s) {sorted(unknown)}; known: {[s.name for s in specs]}")
        return [s for s in specs if s.name in only]
    return [s for s in specs if s.name in FAST] if fast else specs
