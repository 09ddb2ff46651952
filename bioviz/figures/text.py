"""Text measured before it is drawn: widths in pixels, word wrapping and shortening to a width.

Plotly places titles, captions, legends and table cells at fixed pixel offsets and does not
wrap them (tables wrap, but grow their rows out of the figure), so every figure that must
not clip text sizes its margins, columns and labels from the text it holds. Widths come from
the Helvetica-metric font Pillow bundles (Aileron), which is within 2% of Arial and Liberation
Sans, the fonts the theme's font list resolves to; a margin covers Inter and bold text, and
symbols Aileron lacks or draws differently (▲, ■, ✓, →, −, …) have their Arial widths.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from PIL import ImageFont

# Inter and Helvetica Neue run up to ~6% wider than Arial; bold another ~5%.
WIDTH_MARGIN = 1.06
BOLD_FACTOR = 1.07
LINE_HEIGHT = 1.3  # plotly's line spacing, in font sizes
_TAGS = re.compile(r"<[^>]+>")
_REFERENCE_SIZE = 100


@lru_cache(maxsize=1)
def _font() -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=_REFERENCE_SIZE)


# Widths in ems, as Arial/Liberation Sans draw them, of symbols the figures write that the
# bundled font draws differently or lacks; any other missing glyph counts as a full em.
SYMBOL_EMS = {"…": 1.0, "−": 0.584, "■": 0.604, "▲": 0.99, "▼": 0.99, "✓": 0.84, "→": 1.0, "Δ": 0.668,
              "·": 0.278, "“": 0.333, "”": 0.333, "‘": 0.222, "’": 0.222, "—": 1.0, "–": 0.556, "±": 0.584}


@lru_cache(maxsize=1)
def _missing_glyph() -> tuple:
    """Width and box of the font's "missing glyph" box (a private-use code point)."""
    return _font().getlength("\ue000"), _font().getbbox("\ue000")


@lru_cache(maxsize=2048)
def _char_em(char: str) -> float:
    if char in SYMBOL_EMS:
        return SYMBOL_EMS[char]
    if (_font().getlength(char), _font().getbbox(char)) == _missing_glyph():
        base = unicodedata.normalize("NFKD", char)[:1]  # é -> e
        if base and base != char and (_font().getlength(base), _font().getbbox(base)) != _missing_glyph():
            return _font().getlength(base) / _REFERENCE_SIZE
        return 1.0
    return _font().getlength(char) / _REFERENCE_SIZE


@lru_cache(maxsize=4096)
def _em_width(text: str) -> float:
    """Width of ``text`` in ems (font sizes)."""
    if all(" " <= char <= "~" for char in text):  # plain ASCII: the font's own kerned width
        return _font().getlength(text) / _REFERENCE_SIZE
    return sum(_char_em(char) for char in text)


def plain(text: str) -> str:
    """``text`` without HTML tags (``<b>``, ``<span ...>``); ``<br>`` becomes a newline.

    >>> plain("<b>minilm</b> (baseline)<br>x")
    'minilm (baseline)\\nx'
    """
    return _TAGS.sub("", re.sub(r"<br\s*/?>", "\n", text)).replace("&amp;", "&")


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Width in pixels of the widest line of ``text`` at font ``size`` (HTML tags ignored).

    >>> 60 < text_width("HP:0001639", 13) < 80
    True
    """
    lines = plain(text).split("\n")
    widest = max(_em_width(line) for line in lines)
    return widest * size * WIDTH_MARGIN * (BOLD_FACTOR if bold or "<b>" in text else 1.0)


def line_height(size: float) -> float:
    """Pixels from one line of text to the next at font ``size``."""
    return size * LINE_HEIGHT


def _pieces(word: str) -> list[str]:
    """Where a word too long for a line may be broken: after "/" and "-", never inside a run of letters."""
    return [p for p in re.split(r"(?<=[/\-])", word) if p]


def wrap(text: str, max_px: float, size: float, *, max_lines: int | None = None, bold: bool = False,
         whole_words: bool = False) -> list[str]:
    """``text`` as lines no wider than ``max_px``, broken between words (or after "/" and "-").

    A single word wider than ``max_px`` gets a line of its own rather than being cut inside;
    with ``max_lines``, the last kept line ends with "…" when text was left out (after a whole
    word with ``whole_words``).

    >>> wrap("Abnormality of metabolism/homeostasis", 120, 13)
    ['Abnormality of', 'metabolism/', 'homeostasis']
    >>> wrap("Diseases of the circulatory system", 150, 13, max_lines=1)
    ['Diseases of the…']
    """
    # (piece, glue): the pieces of a split word join without a space when they share a line.
    pieces: list[tuple[str, str]] = []
    for word in plain(text).split():
        parts = _pieces(word) if text_width(word, size, bold) > max_px else [word]
        pieces += [(part, " " if i == 0 else "") for i, part in enumerate(parts)]
    lines: list[str] = []
    for piece, glue in pieces:
        candidate = f"{lines[-1]}{glue}{piece}" if lines else piece
        if lines and text_width(candidate, size, bold) <= max_px:
            lines[-1] = candidate
        else:
            lines.append(piece)
    if max_lines is not None and len(lines) > max_lines:
        kept = lines[:max_lines]
        # The next word did not fit on the last kept line, so this always ends with "…"; it
        # is "" when, with whole_words, not even the line's first word fits beside it.
        kept[-1] = shorten(kept[-1] + " " + lines[max_lines], max_px, size, bold=bold, whole_words=whole_words)
        lines = kept
    return lines or [""]


def shorten(text: str, max_px: float, size: float, *, bold: bool = False, whole_words: bool = False) -> str:
    """``text`` cut to ``max_px`` with "…", at a word boundary when one is near enough.

    With ``whole_words`` the cut is always after a whole word (or a "/"), and ``""`` is
    returned when not even the first word fits.

    >>> shorten("Certain infectious and parasitic diseases", 140, 13)
    'Certain infectious…'
    >>> shorten("Neoplasms", 140, 13)
    'Neoplasms'
    >>> shorten("Abnormality of the thoracic cavity", 100, 12, whole_words=True)
    'Abnormality of…'
    """
    text = plain(text).replace("\n", " ")
    if text_width(text, size, bold) <= max_px:
        return text
    cut = len(text)
    while cut > 1 and text_width(text[:cut].rstrip() + "…", size, bold) > max_px:
        cut -= 1
    head = text[:cut]
    if whole_words:
        if cut < len(text) and text[cut] not in " /":
            space = max(head.rfind(" "), head.rfind("/") + 1 if "/" in head else -1)
            head = head[:space] if space > 0 else ""
        head = head.rstrip(" ,;·-")
        return head + "…" if head else ""
    # Back up to the last space when that keeps at least two thirds of what fits.
    space = head.rfind(" ")
    if space >= 2 * cut // 3:
        head = head[:space]
    return head.rstrip(" ,;·-") + "…"


def wrap_html(text: str, max_px: float, size: float, *, max_lines: int | None = None, bold: bool = False,
              whole_words: bool = False) -> str:
    """:func:`wrap` joined with ``<br>``, as plotly draws several lines."""
    return "<br>".join(wrap(text, max_px, size, max_lines=max_lines, bold=bold, whole_words=whole_words))


def _tail(text: str, max_px: float, size: float) -> str:
    """The last whole words of ``text`` that fit ``max_px`` (at least the last word)."""
    words = plain(text).split()
    kept = words[-1:]
    for word in reversed(words[:-1]):
        if text_width(" ".join([word, *kept]), size) > max_px:
            break
        kept.insert(0, word)
    return " ".join(kept)


def distinct_shortened(texts, max_px, size: float) -> list[str]:
    """Each of ``texts`` shortened to ``max_px`` (one width, or one per text), no two alike unless the texts are.

    Long names often differ only at their end ("… type A", "… type B"): cut the usual way
    they would read the same, so such a pair keeps its head and its last words instead
    (``head… tail``).

    >>> distinct_shortened(["Other specified disorders of white cells type A",
    ...                     "Other specified disorders of white cells type B"], 150, 12)
    ['Other specif… cells type A', 'Other specif… cells type B']
    """
    texts = [plain(t).replace("\n", " ") for t in texts]
    widths = [float(max_px)] * len(texts) if isinstance(max_px, (int, float)) else [float(w) for w in max_px]
    out = [shorten(t, w, size) for t, w in zip(texts, widths)]
    seen: dict[str, list[int]] = {}
    for i, label in enumerate(out):
        seen.setdefault(label, []).append(i)
    for label, indices in seen.items():
        if len(indices) < 2 or len({texts[i] for i in indices}) < 2:
            continue
        for i in indices:
            tail = _tail(texts[i], widths[i] * 0.45, size)
            head = shorten(texts[i][:len(texts[i]) - len(tail)].rstrip(), widths[i] - text_width(" " + tail, size),
                           size)
            out[i] = f"{head if head.endswith('…') else head + '…'} {tail}"
    return out
