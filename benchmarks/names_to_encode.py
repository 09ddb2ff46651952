"""How many names a first look at a level really has to encode, and how much of a batch is padding.

Counts, for a bundled level (default: ICD-10-CM chapters, the first look of
``bioviz neighbours "..." --source icd10cm``):

- ``entries``: every (code, text) pair below the root: each code's name and inclusion terms;
- ``inclusion terms equal to their code's name`` (same text after case and spacing are
  normalised) and ``duplicate texts across codes``;
- ``level names``: the names of the level view (a name once per class, a name found under
  several classes dropped): what the page asks vectors for;
- ``distinct texts``: what the encoding encodes (``encode_cached`` encodes each text once);
- ``distinct token sequences``: texts the model cannot tell apart (an uncased tokenizer
  lower-cases, so ``Sepsis`` and ``sepsis`` give one sequence).

Padding: the tokens a batch of ``--batch-size`` names pads to (its longest name) over the
tokens of its names, for names in level order, sorted by characters (longest first, what
:meth:`bioviz.models.encoders.SentenceTransformerEncoder.encode` does) and sorted by tokens.

With ``--encode N``, a seeded sample of N of the names is encoded in chunks of 16 batches (as
:meth:`~bioviz.models.encoders.Encoder.encode` does), chunks cut from the sample sorted by
characters and by tokens, alternating rounds; names/s side by side, wall and CPU seconds.

    python benchmarks/names_to_encode.py                       # ICD-10-CM chapters, med-minilm
    python benchmarks/names_to_encode.py --encode 8192         # and the speed of either order
    python benchmarks/names_to_encode.py --source icd10 --model minilm
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def padding(lengths: np.ndarray, batch_size: int) -> float:
    """Padded tokens over real tokens when names of ``lengths`` are batched in this order."""
    padded = sum(int(lengths[i:i + batch_size].max()) * len(lengths[i:i + batch_size])
                 for i in range(0, len(lengths), batch_size))
    return padded / max(int(lengths.sum()), 1)


def encode_orders(model, texts: list[str], orders: dict, *, batch_size: int, rounds: int) -> dict:
    """Names/s of encoding ``texts`` in each order, chunk by chunk, rounds alternating the orders."""
    import time  # only the timing needs it

    chunk = batch_size * 16
    wall, cpu = dict.fromkeys(orders, 0.0), dict.fromkeys(orders, 0.0)
    for r in range(rounds):
        for name in (list(orders) if r % 2 == 0 else list(orders)[::-1]):
            order = orders[name]
            w, c = time.perf_counter(), time.process_time()
            for start in range(0, len(texts), chunk):
                model.encode([texts[i] for i in order[start:start + chunk]], batch_size=batch_size,
                             show_progress_bar=False)
            wall[name] += time.perf_counter() - w
            cpu[name] += time.process_time() - c
    n = len(texts) * rounds
    return {name: {"names/s (wall)": round(n / wall[name], 1), "names/s (CPU)": round(n / cpu[name], 1)}
            for name in orders}


def entry_counts(ontology, view) -> dict:
    """(code, text) entries below the view's root, and the duplicates among them."""
    from bioviz.ontology.model import normalise_name  # after main() set the environment, like the rest

    import networkx as nx  # a heavy package: only this count needs it

    codes = nx.descendants(ontology.graph, view.root)
    entries, equal_to_name = 0, 0
    owners: Counter = Counter()
    for code in codes:
        concept = ontology.concepts[code]
        key = normalise_name(concept.name)
        entries += 1 + len(concept.synonyms)
        equal_to_name += sum(normalise_name(s) == key for s in concept.synonyms)
        for name in concept.names:
            owners[normalise_name(name)] += 1
    return {"codes": len(codes), "entries": entries, "inclusion terms equal to their code's name": equal_to_name,
            "names after those (per code, Concept.names)": sum(owners.values()),
            "texts under several codes": sum(1 for n in owners.values() if n > 1),
            "entries those repeat": sum(n - 1 for n in owners.values() if n > 1),
            "distinct normalised texts": len(owners)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="icd10cm")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--model", default="med-minilm")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--encode", type=int, default=0, help="names to encode in each order (0: none)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from bioviz.models.registry import load_encoder
    from bioviz.ontology import level_view, load_source

    ontology = load_source(args.source)
    view = level_view(ontology, depth=args.depth)
    counts = entry_counts(ontology, view)
    texts = list(dict.fromkeys(view.names))
    model = load_encoder(args.model, backend="torch").model  # the SentenceTransformer: its tokenizer
    tokenizer = model.tokenizer
    ids = tokenizer(texts, truncation=True, max_length=model.max_seq_length, add_special_tokens=True)["input_ids"]
    lengths = np.array([len(i) for i in ids])
    chars = np.array([len(t) for t in texts])
    counts.update({
        "level names": len(view.names), "ambiguous names dropped": len(view.ambiguous),
        "distinct texts (encoded)": len(texts), "distinct token sequences": len({tuple(i) for i in ids}),
        "tokens per name (mean)": round(float(lengths.mean()), 2), "tokens per name (max)": int(lengths.max()),
    })
    order = {"level order": np.arange(len(texts)),
             "sorted by characters (today)": np.argsort(-chars, kind="stable"),
             "sorted by tokens": np.argsort(-lengths, kind="stable")}
    counts["padded / real tokens"] = {k: round(padding(lengths[o], args.batch_size), 3) for k, o in order.items()}
    if args.encode:
        pick = np.random.default_rng(args.seed).choice(len(texts), size=min(args.encode, len(texts)), replace=False)
        sample = [texts[i] for i in pick]
        orders = {"by characters": np.argsort(-chars[pick], kind="stable"),
                  "by tokens": np.argsort(-lengths[pick], kind="stable")}
        speed = encode_orders(model, sample, orders, batch_size=args.batch_size, rounds=args.rounds)
        ratio = speed["by tokens"]["names/s (CPU)"] / speed["by characters"]["names/s (CPU)"]
        counts["encoding"] = {**speed, "tokens / characters (CPU)": round(ratio, 3)}
    print(json.dumps(counts, indent=1))
    return counts


if __name__ == "__main__":
    main()
