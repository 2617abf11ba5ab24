"""Shortening a column of names so that rows which differ still read differently (issue 32).

A narrow terminal cannot show `/layer1/layer1.0/relu/Relu_output_0` in full. Cutting the middle of
every name alike loses the block index, and two rows read the same. Before anything is cut:

1. what every row repeats goes: a common suffix (`_output_0`) and a common prefix (the model's
   scope root, `/resnet/encoder/`), each only at a separator so no word is split;
2. a torch-style scope that repeats its parent (`/layer1/layer1.0/`) keeps only the child;

and when the names are still too wide, each is cut in the middle, but where a cut would make two
different names read alike, that row's cut moves (more head, less tail or the reverse) to where
the names differ. The full names stay in --wide, JSON, CSV and HTML.
"""
from __future__ import annotations

import itertools
import os
import re
from collections import Counter
from typing import Dict, Iterator, List, Sequence, Tuple

ELLIPSIS = "…"
MAX_CANDIDATES = 2000  # two-cut forms tried per clashing name before settling for one merely distinct
MAX_WINDOW_RIVALS = 64  # two-cut forms are checked against each rival: only for groups up to this size
_SEPARATORS = "/.:_-"
_PARENT_REPEAT = re.compile(r"(?:(?<=/)|^)([^/]+)/(?=\1(?:[._/]|$))")


def elide_middle(text: str, width: int) -> str:
    """'backbone/layer4/conv2/Relu_output_0' -> 'backbone/la…Relu_output_0' in `width` characters."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2 + (width - 1) % 2  # the end of a name usually tells layers apart: keep more of it
    return _cut(text, width, width - 1 - tail)


def _cut(text: str, width: int, head: int) -> str:
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[len(text) - tail:] if tail else "")


def common_affixes(texts: Sequence[str]) -> Tuple[str, str]:
    """(prefix, suffix) that the scoped names of a column repeat, each ending/starting at a separator.

    The graph's inputs and outputs ('pixel_values', 'logits') carry no scope and are left out of
    the count: the prefix is what the scoped names share. No name is reduced to nothing.
    """
    names = sorted({t for t in texts if t})
    scoped = [n for n in names if "/" in n]
    if len(scoped) >= 2 and len(scoped) * 2 >= len(names):
        names = scoped
    if len(names) < 2:
        return "", ""
    prefix = os.path.commonprefix(names)
    cut = max(prefix.rfind(c) for c in "/.:")  # keep the prefix up to its last scope separator
    prefix = prefix[:cut + 1] if cut >= 0 else ""
    reversed_names = [n[len(prefix):][::-1] for n in names]
    suffix = os.path.commonprefix(reversed_names)[::-1]
    starts = [i for i, c in enumerate(suffix) if c in _SEPARATORS]
    suffix = suffix[starts[0]:] if starts else ""
    shortest = min(len(n) for n in names)
    if len(prefix) + len(suffix) >= shortest:  # some name would vanish: keep the suffix
        suffix = ""
    if len(prefix) >= shortest or len(prefix) < 2:  # a lone '/' is not worth a note
        prefix = ""
    return prefix, suffix


def compact(text: str, prefix: str, suffix: str) -> str:
    """`text` without the shared prefix/suffix and without scopes that repeat their parent."""
    if prefix and text.startswith(prefix):
        text = text[len(prefix):]
    if suffix and text.endswith(suffix):
        text = text[:len(text) - len(suffix)]
    return _PARENT_REPEAT.sub("", text)


def compact_column(texts: Sequence[str]) -> Tuple[List[str], str]:
    """(the names compacted, a note naming what was dropped) — the note is '' when nothing was.

    Compaction is kept only when it keeps distinct names distinct.
    """
    prefix, suffix = common_affixes(texts)
    out = [compact(t, prefix, suffix) if t else t for t in texts]
    if len(set(out)) != len(set(texts)):
        return list(texts), ""
    dropped = [f"prefix '{prefix}'" if prefix else "", f"suffix '{suffix}'" if suffix else ""]
    note = " and ".join(d for d in dropped if d)
    if out != list(texts) and not note:
        note = "repeated parent scopes"
    return out, note


def drop_common_segments(texts: Sequence[str], width: int) -> List[str]:
    """Names over `width` lose whole scope segments, the ones most rows share first ('encoder',
    'convolution'), never the last; a row whose result would read like another's keeps more."""
    parts = [t.split("/") for t in texts]
    frequency: Dict[str, int] = {}
    for segments in parts:
        for seg in set(segments[:-1]):
            frequency[seg] = frequency.get(seg, 0) + 1
    steps: List[List[str]] = []
    for text, segments in zip(texts, parts):
        versions = [text]
        removable = sorted({s for s in segments[:-1] if s and frequency.get(s, 0) > 1},
                           key=lambda s: (-frequency[s], s))
        kept = list(segments)
        for seg in removable:
            if len(versions[-1]) <= width:
                break
            kept = [ELLIPSIS if k == seg else k for k in kept]
            merged = [k for i, k in enumerate(kept) if not (k == ELLIPSIS and i and kept[i - 1] == ELLIPSIS)]
            versions.append("/".join(merged))
        steps.append(versions)
    level = [len(v) - 1 for v in steps]
    for _ in range(max(level, default=0) + 1):
        owners: Dict[str, set] = {}
        for i, versions in enumerate(steps):
            owners.setdefault(versions[level[i]], set()).add(texts[i])
        clashes = [i for i, versions in enumerate(steps) if len(owners[versions[level[i]]]) > 1 and level[i] > 0]
        if not clashes:
            break
        for i in clashes:
            level[i] -= 1
    return [versions[level[i]] for i, versions in enumerate(steps)]


def elide_distinct(texts: Sequence[str], width: int) -> List[str]:
    """Every name cut to `width`, two different names never reading the same where a cut can help.
    A name on several rows (a node with several outputs) reads the same on each."""
    unique = list(dict.fromkeys(texts))
    shown = dict(zip(unique, _elide_unique(unique, width)))
    return [shown[t] for t in texts]


def _elide_unique(texts: Sequence[str], width: int) -> List[str]:
    """elide_distinct of names that are all different."""
    reduced = drop_common_segments(texts, width)
    if len(set(reduced)) != len(set(texts)):  # a clash the segments could not avoid: cut the names as given
        reduced = list(texts)
    out = [elide_middle(t, width) for t in reduced]
    if width < 3:
        return out
    # Rows that read the same as another: each moves to a form that cannot be read as any of those
    # names (the layer index shown, not merely the cut shifted), every row of the group, not all but
    # one. A single cut reads as a rival when the rival has its head and its tail: counted per head.
    groups: Dict[str, List[int]] = {}
    for i, shown in enumerate(out):
        groups.setdefault(shown, []).append(i)
    uses = {shown: len(rows) for shown, rows in groups.items()}
    taken = set(out)
    cuts: Dict[Tuple[str, int], Counter] = {}  # per group and head length: how many of its names share each cut
    default_head = (width - 1) // 2
    heads = sorted(range(0, width), key=lambda h: (abs(h - default_head), h))
    for i, start in enumerate(list(out)):
        group = groups[start]
        if len(reduced[i]) <= width or len(group) < 2:
            continue
        text = reduced[i]
        chosen, fallback = None, None
        for head in heads:  # every single cut, nearest the default first
            candidate = _cut(text, width, head)
            if candidate in taken:
                continue
            if (start, head) not in cuts:  # built when first asked: most rows settle near the default
                cuts[start, head] = Counter((reduced[j][:head], _tail(reduced[j], width - 1 - head)) for j in group)
            if cuts[start, head][(text[:head], _tail(text, width - 1 - head))] < 2:
                chosen = candidate
                break
            fallback = fallback or candidate
        if chosen is None:  # two cuts around where it differs; checked against each rival in small groups
            rivals = [reduced[j] for j in group if j != i][:MAX_WINDOW_RIVALS]
            checked = len(group) <= MAX_WINDOW_RIVALS
            for candidate in itertools.islice(_windows(text, rivals, width), MAX_CANDIDATES):
                if candidate in taken:
                    continue
                if checked and not any(_reads_as(candidate, rival) for rival in rivals):
                    chosen = candidate
                    break
                fallback = fallback or candidate
                if not checked:
                    break
        chosen = chosen or (fallback if uses[out[i]] > 1 else None)  # distinct at least
        if chosen is not None:
            uses[out[i]] -= 1
            out[i] = chosen
            uses[chosen] = 1
            taken.add(chosen)
    return out


def _tail(text: str, size: int) -> str:
    return text[len(text) - size:] if size > 0 else ""


def _reads_as(shown: str, name: str) -> bool:
    """Could `shown` ('head…middle…tail') be `name` cut? Then it does not tell `name` apart."""
    parts = shown.split(ELLIPSIS)
    if len(parts) == 1:
        return shown == name
    if not name.startswith(parts[0]) or not name.endswith(parts[-1]):
        return False
    at, end = len(parts[0]), len(name) - len(parts[-1])
    for part in parts[1:-1]:
        found = name.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return at <= end


def _windows(text: str, others: Sequence[str], width: int) -> Iterator[str]:
    """'…' + a window where `text` differs from `others` + '…' + its end, in `width` characters:
    for names alike at both ends, which no single cut tells apart (a QDQ graph's
    '…/Relu_output_0_QuantizeLinear' beside '…/Relu_output_0_DequantizeLinear' in 12 columns)."""
    if width < 5:
        return
    differs = sorted({_first_difference(text, other) for other in others})
    room = width - 2  # two ellipses
    for tail in sorted(range(room), key=lambda t: (abs(t - room // 3), t)):
        size = room - tail
        end = len(text) - tail
        for at in differs:
            # the differing character in the window, the window centred on it where the name allows
            starts = range(max(0, at - size + 1), min(at, end - size) + 1)
            for start in sorted(starts, key=lambda s: (abs(s - (at - size // 2)), s)):
                yield ELLIPSIS + text[start:start + size] + ELLIPSIS + text[end:]


def _first_difference(a: str, b: str) -> int:
    """The index of the first character where `a` and `b` differ (len of the shorter when one starts the other)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
