"""Run by test_vectors_concurrent.py (and benchmarks/vectors_concurrent_open.py): open a vectors file, report its rows.

``python tests/reliability/vectors_open_child.py FILE OUT [BARRIER]``: waits until ``BARRIER``
exists (so two children start converting at the same moment), opens ``FILE`` with
:func:`bioviz.models.vectors_file.open_vectors` under the ``BIOVIZ_HOME`` it is given and writes
to ``OUT`` (JSON): rows, dimension, rows that are zero or not unit, a checksum of the rows and
names, and the seconds the open took.
"""

import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from bioviz.errors import BiovizError
from bioviz.models.vectors_file import open_vectors


def report(path: Path) -> dict:
    """Open ``path`` and describe what came back (an error as its one line)."""
    start = time.perf_counter()
    try:
        opened = open_vectors(path)
    except BiovizError as error:
        return {"error": str(error), "seconds": round(time.perf_counter() - start, 3)}
    seconds = time.perf_counter() - start
    digest, zero, non_unit = hashlib.sha256(), 0, 0
    for begin in range(0, len(opened.vectors), 65_536):
        block = np.asarray(opened.vectors[begin:begin + 65_536], dtype=np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        zero += int((norms == 0).sum())
        non_unit += int((np.abs(norms - 1) > 1e-3).sum())
        digest.update(block.tobytes())
    digest.update("\n".join(opened.names).encode("utf-8", "surrogatepass"))
    return {"rows": len(opened.vectors), "names": len(opened.names), "dim": opened.dim, "zero_rows": zero,
            "non_unit_rows": non_unit, "checksum": digest.hexdigest()[:16], "seconds": round(seconds, 3)}


if __name__ == "__main__":
    file, out = Path(sys.argv[1]), Path(sys.argv[2])
    if len(sys.argv) > 3:
        barrier = Path(sys.argv[3])
        while not barrier.exists():
            time.sleep(0.005)
    Path(out).write_text(json.dumps(report(file)))
