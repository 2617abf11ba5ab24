"""Small torch modules of our own where no library architecture exports cleanly: a GPT-2-like decoder
with past key/values, a voice-activity model with GRU state and a data-dependent branch (If), and a
frame-wise encoder built on a Python list (sequence tensors once scripted)."""
from __future__ import annotations

import math
from typing import List, Tuple

import torch
from torch import nn


class Block(nn.Module):
    """A GPT-2 block (pre-LayerNorm, fused qkv projection, GELU MLP) that appends to a key/value cache."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, bias, past_k, past_v):
        b, s, w = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(w, dim=2)
        q, k, v = (t.reshape(b, s, self.heads, w // self.heads).transpose(1, 2) for t in (q, k, v))
        k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(w // self.heads) + bias
        a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, w)
        x = x + self.c_proj(a)
        return x + self.mlp(self.ln_2(x)), k, v


class Gpt2Like(nn.Module):
    """Decoder-only LM: (input_ids, attention_mask over past+new, past k/v per layer) -> logits, present k/v."""

    def __init__(self, vocab: int = 1000, width: int = 64, heads: int = 4, layers: int = 2, positions: int = 128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, input_ids, attention_mask, *past):
        s, p = input_ids.shape[1], past[0].shape[2]
        pos = torch.arange(p, p + s, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        causal = torch.ones(s, p + s, dtype=torch.bool).tril(diagonal=p)
        keep = causal[None, None] & attention_mask[:, None, None, :].bool()
        bias = (~keep).to(x.dtype) * -1e4  # finite, so fp16 variants keep working
        present = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, bias, past[2 * i], past[2 * i + 1])
            present += [k, v]
        return (self.head(self.ln_f(x)), *present)


@torch.jit.script_if_tracing
def _frontend(x: torch.Tensor, sr: torch.Tensor, w16: torch.Tensor, b16: torch.Tensor,
              w8: torch.Tensor, b8: torch.Tensor) -> torch.Tensor:
    # The sample rate decides the filter bank at run time: an If node in the exported graph, as in
    # the voice-activity models users ship.
    if bool(sr == 16000):
        y = torch.nn.functional.conv1d(x, w16, b16, stride=32)
    else:
        y = torch.nn.functional.conv1d(x, w8, b8, stride=16)
    return torch.relu(y)


class VadLike(nn.Module):
    """(chunk [B, 512], state [1, B, 32], sr int64 scalar) -> (speech probability [B, 1], new state)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.front16, self.front8 = nn.Conv1d(1, width, 64), nn.Conv1d(1, width, 32)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, 1)

    def forward(self, x, state, sr):
        y = _frontend(x.unsqueeze(1), sr, self.front16.weight, self.front16.bias, self.front8.weight, self.front8.bias)
        out, new_state = self.gru(y.transpose(1, 2), state)
        return torch.sigmoid(self.head(out[:, -1])), new_state


class FrameList(nn.Module):
    """Windowed encoder written with a Python list (scripted: the list becomes ONNX sequence tensors):
    the time axis split into windows of 4 steps (the last one shorter: a ragged list), each window
    projected on its own, collected, concatenated for the head; the list of windows is returned too."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 32)
        self.out = nn.Linear(32, 8)

    def forward(self, frames: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, List[torch.Tensor]]:
        parts: List[torch.Tensor] = []
        for window in torch.split(frames, 4, dim=1):
            parts.append(torch.relu(self.proj(window)))
        hidden = torch.cat(parts, dim=1)
        return self.out(hidden), hidden.mean(dim=1), parts
