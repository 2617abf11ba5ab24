"""Realistic samples for zoo models: bundled photos, token ids of real text, audio-like signals.

Nothing is downloaded: photos come from scikit-image's bundled data, text is a fixed list of
sentences tokenised by a stable word hash, audio is synthesised (voiced harmonics, noise, silence).
"""
from __future__ import annotations

import zlib
from typing import Dict, List, Sequence

import numpy as np

Sample = Dict[str, np.ndarray]

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "camera", "cat", "retina")
SENTENCES = (
    "the quick brown fox jumps over the lazy dog",
    "model inspector compares two onnx models layer by layer",
    "quantisation to eight bits loses a little precision in every layer",
    "please call me back when you arrive at the station",
    "the weather tomorrow will be cloudy with a chance of rain in the afternoon",
    "a small model runs on the phone",
    "attention masks hide the padding tokens from the encoder",
    "she sells sea shells by the sea shore",
)
MEAN, STD = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)


def images(count: int, size: int, offset: int = 0) -> List[np.ndarray]:
    """`count` photos as 1x3xSxS float32: shorter side resized to size*256/224, centre crop, ImageNet mean/std."""
    from PIL import Image
    from skimage import data

    out = []
    for i in range(count):
        name = PHOTOS[(i + offset) % len(PHOTOS)]
        pixels = getattr(data, name)()
        if pixels.ndim == 2:
            pixels = np.stack([pixels] * 3, axis=-1)
        img = Image.fromarray(pixels[..., :3].astype(np.uint8))
        if (i + offset) >= len(PHOTOS):  # more samples than photos: mirror, so no two samples are equal
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        short = round(size * 256 / 224)
        w, h = img.size
        scale = short / min(w, h)
        img = img.resize((max(short, round(w * scale)), max(short, round(h * scale))), Image.Resampling.BILINEAR)
        w, h = img.size
        left, top = round((w - size) / 2), round((h - size) / 2)
        img = img.crop((left, top, left + size, top + size))
        x = (np.asarray(img, np.float32) / 255.0 - MEAN) / STD
        out.append(x.transpose(2, 0, 1)[None].astype(np.float32))
    return out


def tokens(count: int, seq: int, vocab: int, offset: int = 0) -> List[Sample]:
    """Token ids of real sentences (word hash into [2, vocab), 1 = CLS), right-padded with 0 to `seq`."""
    out = []
    for i in range(count):
        words = SENTENCES[(i + offset) % len(SENTENCES)].split()
        ids = [1] + [2 + zlib.crc32(w.encode()) % (vocab - 2) for w in words]
        ids = ids[:seq]
        mask = [1] * len(ids) + [0] * (seq - len(ids))
        ids = ids + [0] * (seq - len(ids))
        out.append({"input_ids": np.array([ids], np.int64), "attention_mask": np.array([mask], np.int64)})
    return out


def audio(count: int, length: int, rate: int = 16000, offset: int = 0) -> List[np.ndarray]:
    """Speech-like 1xN float32 signals: a voiced segment (pitch glide with harmonics, syllable envelope),
    background noise and silence, seeded by the sample index."""
    out = []
    for i in range(count):
        rng = np.random.default_rng(1000 + i + offset)
        t = np.arange(length) / rate
        f0 = 110 + 60 * (i % 4) + 30 * np.sin(2 * np.pi * 1.5 * t)
        phase = 2 * np.pi * np.cumsum(f0) / rate
        voiced = sum(np.sin(k * phase) / k for k in range(1, 6))
        envelope = np.clip(np.sin(2 * np.pi * 4 * t + i), 0, None) ** 2
        start = rng.integers(0, length // 4)
        envelope[:start] = 0
        x = 0.3 * voiced * envelope + 0.01 * rng.standard_normal(length)
        out.append(x[None].astype(np.float32))
    return out


def log_mel(signal: np.ndarray, mels: int, frames: int, rate: int = 16000) -> np.ndarray:
    """Whisper-style features (1 x mels x frames): |STFT|^2 (n_fft 400, hop 160), a triangular mel bank, log10."""
    x = signal[0]
    n_fft, hop = 400, 160
    x = np.pad(x, (0, max(0, frames * hop + n_fft - len(x))))
    window = np.hanning(n_fft)
    spec = np.stack([np.abs(np.fft.rfft(window * x[j * hop:j * hop + n_fft])) ** 2 for j in range(frames)], axis=1)
    hz = 700 * (10 ** (np.linspace(0, 2595 * np.log10(1 + rate / 2 / 700), mels + 2) / 2595) - 1)
    bins = np.floor((n_fft + 1) * hz / rate).astype(int)
    bank = np.zeros((mels, spec.shape[0]))
    for m in range(1, mels + 1):
        lo, mid, hi = bins[m - 1], bins[m], max(bins[m + 1], bins[m] + 1)
        bank[m - 1, lo:mid] = np.linspace(0, 1, max(mid - lo, 1), endpoint=False)[: mid - lo]
        bank[m - 1, mid:hi] = np.linspace(1, 0, hi - mid, endpoint=False)
    feats = np.log10(np.maximum(bank @ spec, 1e-10))
    feats = np.maximum(feats, feats.max() - 8.0)
    return ((feats + 4.0) / 4.0)[None].astype(np.float32)


def save(samples: Sequence[Sample], folder) -> None:
    """One .npz per sample, keys = input names (the layout `mi --inputs DIR` reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, sample in enumerate(samples):
        np.savez(folder / f"sample_{i:02d}.npz", **sample)
