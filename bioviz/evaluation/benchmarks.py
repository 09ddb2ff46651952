"""Relatedness benchmarks: term pairs rated by clinicians, scored by Spearman's rho.

The bundled sets (MayoSRS, UMNSRS similarity and relatedness, provenance in
``assets/benchmarks/README.md``) and any user file of the same shape: three columns
``term1, term2, score``, tab-separated (``.tsv``) or comma-separated (``.csv``), with an
optional header row. A model's cosine similarity of each pair is compared with the human
scores by Spearman's rank correlation (no fine-tuning on the pairs); the sets are small,
so a percentile bootstrap over pairs gives a 95% interval.

A pair is *covered* when both terms get a non-zero vector (a character model can give an
all-zero vector to a term made of unseen characters); rho is computed on covered pairs.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.evaluation import metrics
from bioviz.errors import BiovizError

logger = logging.getLogger(__name__)

BENCHMARK_DIR = Path(__file__).resolve().parents[2] / "assets" / "benchmarks"
BUNDLED = {
    "mayosrs": ("mayosrs.tsv", "MayoSRS"),
    "umnsrs-sim": ("umnsrs_similarity.tsv", "UMNSRS-sim"),
    "umnsrs-rel": ("umnsrs_relatedness.tsv", "UMNSRS-rel"),
}
MIN_PAIRS = 3
MAX_BYTES = 20 * 1024 * 1024


class BenchmarkError(BiovizError):
    """A benchmark that cannot be found or read."""


@dataclass(frozen=True)
class Benchmark:
    """Rated term pairs.

    Attributes
    ----------
    name : str
        ``mayosrs`` etc. for bundled sets, the file name for others.
    label : str
        Display name (``MayoSRS``).
    term1, term2 : tuple of str
        The pairs.
    scores : numpy.ndarray
        Human ratings, float.
    digest : str
        Content hash (cache key).
    """

    name: str
    label: str
    term1: tuple[str, ...]
    term2: tuple[str, ...]
    scores: np.ndarray
    digest: str

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def terms(self) -> list[str]:
        """Every distinct term, in first-seen order."""
        return list(dict.fromkeys(self.term1 + self.term2))


def expand_benchmarks(spec: str) -> list[str]:
    """``all`` -> every bundled name; anything else -> ``[spec]``."""
    return list(BUNDLED) if spec == "all" else [spec]


def load_benchmark(spec: str | Path) -> Benchmark:
    """A bundled benchmark by name, or a user file by path.

    Raises
    ------
    BenchmarkError
        Unknown name, missing file, or a malformed file (see :func:`parse_pairs`).
    """
    key = str(spec)
    if key in BUNDLED:
        file_name, label = BUNDLED[key]
        path = BENCHMARK_DIR / file_name
        return parse_pairs(path.read_bytes(), name=key, label=label, delimiter="\t")
    path = Path(key).expanduser()
    if not path.is_file():
        raise BenchmarkError(
            f"unknown benchmark {key!r}: use one of {', '.join(BUNDLED)}, all, or a path to a .tsv/.csv file"
        )
    try:
        if path.stat().st_size > MAX_BYTES:
            raise BenchmarkError(f"{path.name} is larger than {MAX_BYTES // 2**20} MiB; not a benchmark file")
        data = path.read_bytes()
    except OSError as error:
        raise BenchmarkError(f"cannot read {path.name}: {error.strerror or type(error).__name__}") from None
    return parse_pairs(data, name=path.name, delimiter=_delimiter_for(path.name))


def _delimiter_for(file_name: str) -> str | None:
    suffix = Path(file_name).suffix.lower()
    return {".tsv": "\t", ".csv": ","}.get(suffix)


def parse_pairs(data: bytes | str, name: str = "pairs", label: str | None = None,
                delimiter: str | None = None) -> Benchmark:
    """Parse ``term1, term2, score`` rows (an uploaded file's bytes, or text).

    Parameters
    ----------
    data : bytes or str
        File content, UTF-8.
    name, label : str
        Benchmark name and display label (label defaults to the name).
    delimiter : str, optional
        ``"\\t"`` or ``","``; guessed from the first line when omitted (a tab wins).

    Raises
    ------
    BenchmarkError
        Not UTF-8, empty, a row without exactly three columns, an empty term, a score that
        is not a finite number, or fewer than 3 pairs. The message names the line.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise BenchmarkError(f"{name} line {line}: not a UTF-8 text file") from None
    else:
        text = data.removeprefix("\ufeff")
    # (file line number, text) of the non-blank lines: messages name the line in the file.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise BenchmarkError(f"{name}: the file is empty; expected rows of term1, term2, score")
    if delimiter is None:
        delimiter = "\t" if "\t" in numbered[0][1] else ","
    shown = "tab" if delimiter == "\t" else "comma"
    reader = csv.reader((line for _, line in numbered), delimiter=delimiter)
    term1, term2, scores = [], [], []
    first = True
    while True:
        try:
            row = next(reader, None)
        except csv.Error as error:  # e.g. a field longer than csv's limit; the message holds no file text
            raise BenchmarkError(f"{name} line {numbered[reader.line_num - 1][0]}: unreadable row ({error})") from None
        if row is None:
            break
        line_no = numbered[reader.line_num - 1][0]
        if first and _is_header(row):
            first = False
            continue
        first = False
        # No message repeats a cell: a path may name any file the server can read.
        if len(row) != 3:
            raise BenchmarkError(
                f"{name} line {line_no}: expected 3 {shown}-separated columns (term1, term2, score), got {len(row)}"
            )
        a, b, raw = (cell.strip() for cell in row)
        if not a or not b:
            raise BenchmarkError(f"{name} line {line_no}: empty term")
        try:
            score = float(raw)
        except ValueError:
            raise BenchmarkError(f"{name} line {line_no}: the score (third column) is not a number") from None
        if not math.isfinite(score):
            raise BenchmarkError(f"{name} line {line_no}: the score (third column) is not a finite number")
        term1.append(a)
        term2.append(b)
        scores.append(score)
    if len(scores) < MIN_PAIRS:
        raise BenchmarkError(f"{name}: {len(scores)} pairs; at least {MIN_PAIRS} are needed for a rank correlation")
    digest = hashlib.sha256("\n".join(f"{a}\t{b}\t{s!r}" for a, b, s in zip(term1, term2, scores)).encode()).hexdigest()[:16]
    return Benchmark(name, label or name, tuple(term1), tuple(term2), np.asarray(scores, dtype=float), digest)


def _is_header(row: list[str]) -> bool:
    """A first row whose score cell is not a number is a header."""
    if len(row) != 3:
        return False
    try:
        float(row[2])
    except ValueError:
        return True
    return False


def score_benchmark(benchmark: Benchmark, term_vectors: dict[str, np.ndarray], n_boot: int = 1000,
                    seed: int = 0) -> dict:
    """Spearman's rho between cosine similarities and human scores.

    Parameters
    ----------
    benchmark : Benchmark
    term_vectors : dict
        ``term -> L2-normalised vector`` for (at least) every term of the benchmark.
    n_boot : int
        Bootstrap resamples for the 95% interval.
    seed : int

    Returns
    -------
    dict
        ``spearman``, ``ci`` (``{"spearman": [low, high]}``), ``pairs`` (in the file),
        ``covered`` (pairs with two non-zero vectors), ``cosines`` (every pair's cosine in
        file order, NaN where not covered: two models compared pair by pair).
    """
    missing = [t for t in benchmark.terms if t not in term_vectors]
    if missing:
        raise ValueError(f"no vectors for {len(missing)} benchmark terms, e.g. {missing[0]!r}")
    a = np.stack([term_vectors[t] for t in benchmark.term1]).astype(np.float32)
    b = np.stack([term_vectors[t] for t in benchmark.term2]).astype(np.float32)
    covered = (np.linalg.norm(a, axis=1) > 0) & (np.linalg.norm(b, axis=1) > 0)
    all_cosines = np.where(covered, (a * b).sum(axis=1), np.nan)
    cosines = all_cosines[covered]
    human = benchmark.scores[covered]
    return {
        "cosines": all_cosines,
        "spearman": metrics.spearman(cosines, human),
        "ci": {"spearman": metrics.spearman_bootstrap_ci(cosines, human, n_boot=n_boot, seed=seed)},
        "pairs": len(benchmark),
        "covered": int(covered.sum()),
    }
