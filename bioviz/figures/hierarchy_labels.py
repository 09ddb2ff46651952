"""Labels that fit the boxes of a treemap, icicle or sunburst, chosen before plotly draws them.

Plotly writes each node's text into its box, shrinks it to fit, and (with ``uniformtext``
``hide``) drops what would be smaller than a legible size. A long name wrapped to a fixed
number of characters is dropped from most boxes, so most boxes, the small ones with the
largest gains among them, end up with no label at all. Instead the box each node gets is
estimated here (the same squarified tiling as plotly's d3 treemap, the rings of a sunburst,
the columns of an icicle) and each node gets the most informative text that fits it: the
whole name wrapped between words with its value, else the name cut to two lines, else its
code, else its value alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bioviz.figures.text import line_height, shorten, text_width, wrap

BOX_PAD = 4          # pixels plotly keeps between a box's edge and its text
TILE_PAD = 3         # plotly's treemap tiling.pad between sibling boxes
PATHBAR_PX = 24      # the treemap's path bar at the top


@dataclass(frozen=True)
class Box:
    """Space for one node's text: ``width`` x ``height`` pixels; ``header`` when it is a parent
    whose children are drawn inside it, so its text is one line at the top."""

    width: float
    height: float
    header: bool = False


def squarify(values: list[float], *, x0: float, y0: float, x1: float, y1: float,
             ratio: float = 1.0) -> list[tuple[float, float, float, float]]:
    """Rectangles of ``values`` (sorted largest first) tiling ``(x0, y0, x1, y1)``.

    d3-hierarchy's ``treemapSquarify`` (rows of boxes added while their worst aspect ratio
    improves), which plotly's treemap uses with ``tiling.squarifyratio`` 1.

    >>> [tuple(round(v) for v in r) for r in squarify([6, 6, 4, 3, 2, 2, 1], x0=0, y0=0, x1=600, y1=400)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [(0, 0, 300, 200), (0, 200, 300, 400), (300, 0, 471, 233), (471, 0, 600, 233), (300, 233, 420, 400),
     (420, 233, 540, 400), (540, 233, 600, 400)]
    """
    rects: list[tuple[float, float, float, float]] = [(x0, y0, x0, y0)] * len(values)
    remaining = float(sum(values))
    i0, n = 0, len(values)
    while i0 < n:
        dx, dy = x1 - x0, y1 - y0
        if remaining <= 0 or dx <= 0 or dy <= 0:
            break
        i1 = i0 + 1
        row_sum = min_v = max_v = float(values[i0])
        alpha = max(dy / dx, dx / dy) / (remaining * ratio)
        beta = row_sum * row_sum * alpha
        best = max(max_v / beta, beta / min_v) if min_v > 0 else math.inf
        while i1 < n:
            v = float(values[i1])
            total = row_sum + v
            beta = total * total * alpha
            worst = max(max(max_v, v) / beta, beta / min(min_v, v)) if min(min_v, v) > 0 else math.inf
            if worst > best:
                break
            row_sum, min_v, max_v, best = total, min(min_v, v), max(max_v, v), worst
            i1 += 1
        if dx < dy:  # a row across the width, as tall as its share
            y_end = y0 + dy * row_sum / remaining
            x = x0
            for i in range(i0, i1):
                w = dx * values[i] / row_sum if row_sum else 0.0
                rects[i] = (x, y0, x + w, y_end)
                x += w
            y0 = y_end
        else:  # a column down the height
            x_end = x0 + dx * row_sum / remaining
            y = y0
            for i in range(i0, i1):
                h = dy * values[i] / row_sum if row_sum else 0.0
                rects[i] = (x0, y, x_end, y + h)
                y += h
            x0 = x_end
        remaining -= row_sum
        i0 = i1
    return rects


def _children(parents: list[str], ids: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, parent in enumerate(parents):
        out.setdefault(parent, []).append(i)
    return out


def node_boxes(kind: str, ids: list[str], parents: list[str], sizes: np.ndarray, *, root: str, max_depth: int,
               width: float, height: float, font_size: float) -> dict[int, Box]:
    """The text space of every node drawn when the drawing opens at ``root``.

    Parameters
    ----------
    kind : str
        ``treemap``, ``icicle`` or ``sunburst``.
    ids, parents : list of str
        The tree's nodes (a parent before its children); ``""`` for the tree's root.
    sizes : numpy.ndarray
        Node values (names under the node; a parent's is the sum of its children's).
    root : str
        The node the drawing opens at.
    max_depth : int
        Levels drawn at once, the opening node's included (``-1``: all).
    width, height : float
        The plot area in pixels.
    font_size : float
        Label font size (the treemap's parent headers are sized from it).

    Returns
    -------
    dict
        ``node row -> Box`` for the nodes drawn.
    """
    index = {nid: i for i, nid in enumerate(ids)}
    children = _children(parents, ids)
    sizes = np.asarray(sizes, dtype=float)
    levels = _levels(children, ids, index[root], max_depth)
    boxes: dict[int, Box] = {}
    if kind == "treemap":
        header = line_height(font_size) + 4
        _tile(index[root], 0, (0.0, float(PATHBAR_PX), width, height), children, ids, sizes, levels, header, boxes)
    elif kind == "icicle":
        column = width / max(levels, 1)
        _columns(index[root], 0, 0.0, height, children, ids, sizes, levels, column, boxes)
    else:
        ring = min(width, height) / 2 / max(levels, 1)
        _rings(index[root], 0, 2 * math.pi, children, ids, sizes, levels, ring, boxes)
    return boxes


def _levels(children, ids, root: int, max_depth: int) -> int:
    """Levels drawn below and including ``root``."""
    deepest, stack = 1, [(root, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if max_depth < 0 or level < max_depth:
            stack += [(c, level + 1) for c in children.get(ids[node], [])]
    return deepest if max_depth < 0 else min(deepest, max_depth)


def _drawn_children(node, level, children, ids, sizes, levels) -> list[int]:
    if level + 1 >= levels:
        return []
    kids = [c for c in children.get(ids[node], []) if sizes[c] > 0]
    return sorted(kids, key=lambda c: -sizes[c])  # plotly sorts siblings largest first


def _tile(node, level, rect, children, ids, sizes, levels, header, boxes) -> None:
    x0, y0, x1, y1 = rect
    kids = _drawn_children(node, level, children, ids, sizes, levels)
    boxes[node] = Box(x1 - x0 - 2 * BOX_PAD, (header if kids else y1 - y0) - BOX_PAD, header=bool(kids))
    if not kids:
        return
    inner = (x0 + TILE_PAD, y0 + header, x1 - TILE_PAD, y1 - TILE_PAD)
    if inner[2] <= inner[0] or inner[3] <= inner[1]:
        return
    rects = squarify([float(sizes[c]) for c in kids], x0=inner[0], y0=inner[1], x1=inner[2], y1=inner[3])
    for kid, (a, b, c, d) in zip(kids, rects):
        # paddingInner: siblings are kept TILE_PAD apart
        _tile(kid, level + 1, (a + TILE_PAD / 2, b + TILE_PAD / 2, c - TILE_PAD / 2, d - TILE_PAD / 2),
              children, ids, sizes, levels, header, boxes)


def _columns(node, level, top, span, children, ids, sizes, levels, column, boxes) -> None:
    boxes[node] = Box(column - 2 * BOX_PAD, span - 2 * BOX_PAD)
    kids = _drawn_children(node, level, children, ids, sizes, levels)
    total = sum(sizes[c] for c in kids) or 1.0
    for kid in kids:
        share = span * sizes[kid] / total
        _columns(kid, level + 1, top, share, children, ids, sizes, levels, column, boxes)
        top += share


def _rings(node, level, angle, children, ids, sizes, levels, ring, boxes) -> None:
    if level == 0:  # the centre disc
        boxes[node] = Box(2 * ring * 0.8, 2 * ring * 0.6)
    else:  # text runs along the radius: the ring's thickness long, the arc at mid-radius high
        boxes[node] = Box(ring - 2 * BOX_PAD, angle * ring * (level + 0.5) - 2 * BOX_PAD)
    kids = _drawn_children(node, level, children, ids, sizes, levels)
    total = sum(sizes[c] for c in kids) or 1.0
    for kid in kids:
        _rings(kid, level + 1, angle * sizes[kid] / total, children, ids, sizes, levels, ring, boxes)


def fitted_label(box: Box, name: str, code: str, value: str, *, size: float) -> str:
    """The most informative text for ``box``: the whole name with ``value``, else less.

    Tries, in order: the name wrapped between words with the value on a line of its own; the
    name's lines that fit, cut after a whole word, then the value; the cut name and the value
    on one line; the code and the value; the value alone (at last as "+.27"); nothing. A header (a parent whose
    children are drawn inside it) has one line.

    >>> fitted_label(Box(200, 80), "Abnormality of metabolism/homeostasis", "HP:0001939", "+0.210", size=12)
    'Abnormality of<br>metabolism/homeostasis<br>+0.210'
    >>> fitted_label(Box(160, 34), "Abnormality of metabolism/homeostasis", "HP:0001939", "+0.210", size=12)
    'Abnormality of…<br>+0.210'
    >>> fitted_label(Box(80, 34), "Abnormality of metabolism/homeostasis", "HP:0001939", "+0.210", size=12)
    'HP:0001939<br>+0.210'
    >>> fitted_label(Box(40, 14), "Abnormality of metabolism/homeostasis", "HP:0001939", "+0.210", size=12)
    ''
    """
    lh = line_height(size)
    rows = 1 if box.header else int(box.height // lh)
    if box.width <= 0 or rows < 1:
        return ""
    value_lines = [value] if value else []

    def fits(lines: list[str]) -> bool:
        return bool(lines) and all(lines) and len(lines) <= rows and all(
            text_width(x, size) <= box.width for x in lines)

    lines = wrap(name, box.width, size)
    options = [lines + value_lines]
    # The lines that fit, up to the first too wide (a long word) or the last row before the value.
    head = []
    for line in lines[:max(0, rows - len(value_lines))]:
        if text_width(line, size) > box.width:
            break
        head.append(line)
    if head and len(head) < len(lines):
        head[-1] = shorten(head[-1] + " " + lines[len(head)], box.width, size, whole_words=True)
        options.append(head + value_lines if _telling(" ".join(head)) else [])
    one_line = shorten(name, box.width - (text_width(" " + value, size) if value else 0), size, whole_words=True)
    one_line = one_line if _telling(one_line) else ""
    options += [[f"{one_line} {value}".strip()] if one_line else [], [code] + value_lines,
                [f"{code} {value}".strip()], value_lines, [_compact(value)]]
    return next(("<br>".join(option) for option in options if fits(option)), "")


def _telling(cut: str) -> bool:
    """Whether a cut name still says something: two words or more ("Abnormality…" alone does not)."""
    return len(cut.rstrip("…").split()) >= 2


def _compact(value: str) -> str:
    """A value in the fewest characters: "+0.267" -> "+.27" (empty when it is no number)."""
    try:
        number = float(value)
    except ValueError:
        return ""
    return f"{number:+.2f}".replace("0.", ".", 1)
