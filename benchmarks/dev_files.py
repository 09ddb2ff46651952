"""Where the development files are read: ``../shared/benchmarks/`` beside the checkout, never copied here.

Models and defaults are chosen on these files (with intervals), never on MayoSRS/UMNSRS; none of
them is shipped in the project (``recipes/med-minilm-excluded.txt`` lists their texts by hash only).
"""

from __future__ import annotations

from pathlib import Path

DEV_DIR = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
EHR_RELB_DEV = DEV_DIR / "ehr_relb_dev.tsv"  # clinical relatedness: 1,831 pairs
HPO_CODING_DEV = DEV_DIR / "hpo_coding_dev.tsv"  # clinical-note mentions with their HPO ids: 518
GSC_PLUS_DEV = DEV_DIR / "gsc_plus_dev.tsv"  # PubMed mentions with their HPO ids: 119
