#!/usr/bin/env bash
# The issue-31 candidates c1, c2, c2-wise-0.4, c4, c4-wise-0.5, c5 and c5-wise-0.85, rebuilt and scored
# (docs/models.md, "Choosing the shipped model"). c5-wise-0.85 passed the promotion rule and is med-minilm 2:
#   python benchmarks/med_minilm.py ship WORK/c5-wise-0.85 --version 2 --recipe recipes/candidates.sh \
#       --lineage WORK/med-minilm-1 WORK/c1 WORK/c2 WORK/c2-wise-0.4 WORK/c5
#   bash recipes/candidates.sh WORK [DEV]     # WORK: a new folder; DEV: the development files (../shared/benchmarks)
# The development files' texts are kept out of every pair (they chose the model); they are read
# at run time and never copied into the project. About 2.5 h on a 2-core CPU, minutes on a GPU.
set -euo pipefail
WORK=${1:?give a work folder}
DEV=${2:-$(dirname "$0")/../../shared/benchmarks}
PY=${PYTHON:-python}
mkdir -p "$WORK"
# 0. med-minilm 1, as shipped before (recipes/med-minilm.args from all-MiniLM-L6-v2).
[ -d "$WORK/med-minilm-1" ] || $PY -m trainer pretrain @recipes/med-minilm.args --out "$WORK/med-minilm-1"
# The exclusions: the recipe's held-out names plus every text of the three development files.
$PY - "$DEV" "$WORK/excluded.txt" <<'PY'
import csv, sys
from pathlib import Path
dev, out = Path(sys.argv[1]), Path(sys.argv[2])
names = {line.strip() for line in Path("recipes/med-minilm-excluded.txt").read_text(encoding="utf-8").splitlines()}
for name, columns in (("ehr_relb_dev", ("term1", "term2")), ("hpo_coding_dev", ("mention",)),
                      ("gsc_plus_dev", ("mention",))):
    with (dev / f"{name}.tsv").open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            names.update(row[c].strip() for c in columns)
out.write_text("\n".join(sorted(n for n in names if n)) + "\n", encoding="utf-8")
PY
EX="--exclude-names $WORK/excluded.txt"
[ -d "$WORK/c1" ] || $PY -m trainer pretrain @recipes/candidate-c1.args --base "$WORK/med-minilm-1" $EX --out "$WORK/c1"
[ -d "$WORK/c2" ] || $PY -m trainer pretrain @recipes/candidate-c2.args --base "$WORK/c1" $EX --out "$WORK/c2"
[ -d "$WORK/c2-wise-0.4" ] || $PY -m bioviz.models.merge minilm "$WORK/c2" --alpha 0.4 --out "$WORK/c2-wise-0.4"
[ -d "$WORK/c4" ] || $PY -m trainer pretrain @recipes/candidate-c4.args --base "$WORK/c2-wise-0.4" $EX --out "$WORK/c4"
[ -d "$WORK/c4-wise-0.5" ] || $PY -m bioviz.models.merge minilm "$WORK/c4" --alpha 0.5 --out "$WORK/c4-wise-0.5"
[ -d "$WORK/c5" ] || $PY -m trainer pretrain @recipes/candidate-c5.args --base "$WORK/c2-wise-0.4" $EX --out "$WORK/c5"
[ -d "$WORK/c5-wise-0.85" ] || $PY -m bioviz.models.merge minilm "$WORK/c5" --alpha 0.85 --out "$WORK/c5-wise-0.85"
for c in c1 c2 c2-wise-0.4 c4 c4-wise-0.5 c5 c5-wise-0.85; do
    $PY benchmarks/select_model.py --dev-dir "$DEV" score "$WORK/$c" --name "$c" --quick
done
$PY benchmarks/select_model.py --dev-dir "$DEV" table
