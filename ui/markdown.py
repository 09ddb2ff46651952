r"""User and ontology text made safe to put into Streamlit markdown.

Streamlit renders markdown in ``st.markdown``, ``st.write`` of strings, captions, titles,
``st.error``/``st.info``/``st.warning`` bodies, metric and widget labels and progress
texts. A query such as ``![x](http://host/pixel)`` would otherwise become an image fetched
from another server, a link, a heading or coloured text. Every text that did not come from
the app itself goes through :func:`md` (or :func:`md_code` inside a code span) first.

CommonMark lets a backslash escape any ASCII punctuation, which then shows as itself. Only
the characters that can start markup are escaped, so ids, paths and messages stay readable
in the page's source: brackets (links, images, footnotes, Streamlit's ``:red[...]``),
emphasis and code marks (not ``_`` inside a word), HTML and entities, ``$`` (math), ``@`` (e-mail autolinks), the
colon of ``http://`` and the dot of ``www.`` (GFM autolinks), and a block marker (heading,
list, quote) at the start. Line breaks become spaces: one text, one line.
"""

from __future__ import annotations

import re

_ALWAYS = re.compile(r"([\\`*~\[\]<>&$@])")
# "_" between two letters or digits never starts emphasis (CommonMark's flanking rules): left as is,
# so ids and file names such as SNOMEDCT_US stay readable.
_UNDERSCORE = re.compile(r"_(?![^\W_])|(?<![^\W_])_")
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto|xmpp|file)(:)|\b(www)(\.)")
_BLOCK_START = re.compile(r"^([#>+\-=|]|\d+(?=[.)]))")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def _break_autolink(match: re.Match) -> str:
    scheme, dot_word = match.group(1), match.group(3)
    return f"{scheme}\\:" if scheme else f"{dot_word}\\."


def md(text) -> str:
    r"""``text`` as literal markdown: markup characters escaped, line breaks folded into spaces.

    >>> print(md("![x](http://e.org/x.png)"))
    !\[x\](http\://e.org/x.png)
    >>> print(md("# heart_attack *now* _here_"))
    \# heart_attack \*now\* \_here\_
    >>> md("unknown concept id 'HP:0001626' in MRREL.RRF")
    "unknown concept id 'HP:0001626' in MRREL.RRF"
    """
    text = _LINE_BREAKS.sub(" ", str(text)).strip()
    text = _ALWAYS.sub(r"\\\1", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _AUTOLINK.sub(_break_autolink, text)
    match = _BLOCK_START.match(text)
    if match:
        marker = match.group(1)
        # a list number: escape the "." or ")" after it; any other marker: escape the marker itself
        text = (marker + "\\" + text[len(marker):]) if marker[0].isdigit() else "\\" + text
    return text


def md_code(text) -> str:
    """``text`` as an inline code span, whatever backticks it holds (a fence longer than any run in it).

    >>> md_code("a`b")
    '`` a`b ``'
    >>> md_code("HP:0001626")
    '`HP:0001626`'
    """
    text = _LINE_BREAKS.sub(" ", str(text))
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    if not longest:
        return f"`{text}`"
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"
