"""A page that needs a level someone else is encoding waits for that encoding instead of starting its own."""

from __future__ import annotations

import json
import os
import threading
import time

from bioviz import warmup
from bioviz.models import shared_encoding
from bioviz.models.registry import load_encoder
from bioviz.models.shared_encoding import claim, encode_claimed
from bioviz.ontology import LevelSpec


def level_table(folder, classes: int = 6, per_class: int = 40):
    """A table source of ``classes`` classes under one root, each with ``per_class`` leaf names."""
    rows = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", "R\tdisorder\t\t\t"]
    for c in range(classes):
        rows.append(f"C{c}\tclass {c} disorder\tR\t\t")
        rows += [f"C{c}_{i}\tkind {i} of class {c} disorder\tC{c}\t\t" for i in range(per_class)]
    path = folder / "waited_level.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_projection_waits_for_the_warm_ups_encoding_and_keeps_the_banner_live(tmp_home, tmp_path, open_app,
                                                                               monkeypatch):
    monkeypatch.setattr(shared_encoding, "POLL_S", 0.05)
    source = level_table(tmp_path)
    names = LevelSpec(str(source), depth=1).load().names
    encoder = load_encoder("minilm")
    calls, real = [], encoder._encode

    def counted(texts, batch_size):
        calls.append(threading.current_thread().name)
        return real(texts, batch_size)

    monkeypatch.setattr(encoder, "_encode", counted)
    (tmp_home / warmup.STATE_FILE).write_text(json.dumps({  # the banner's state: a live warm-up (this process)
        "state": "running", "pid": os.getpid(), "levels": ["a level"], "level": "a level", "level_index": 0,
        "done": 10, "total": len(names), "rate": 5.0, "eta_s": 50.0, "updated": time.time()}))
    holding = threading.Event()

    def warm_up() -> None:
        with claim(encoder, names, owner="the background warm-up") as claimant:
            holding.set()
            time.sleep(1.0)  # the page asks meanwhile
            encode_claimed(encoder, names, claimant, batch_size=32, max_chunk=64)

    worker = threading.Thread(target=warm_up, name="warm-up")
    worker.start()
    holding.wait(10)
    at = open_app("app_pages/2_Projection.py", {"source": str(source), "depth": "1", "model_a": "minilm",
                                                "model_b": "med-minilm", "method": "pca"}, timeout=300).run()
    worker.join()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert calls and set(calls) == {"warm-up"}, "the page encoded none of minilm's names itself"
    assert len(at.get("plotly_chart")) >= 1
    assert any(p.proto.text.startswith("Preparing the bundled model's vectors") for p in at.get("progress"))
