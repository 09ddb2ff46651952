"""Train a sentence-transformer on pretraining pairs, with checkpoints, resume and progress.

sentence-transformers' own :class:`SentenceTransformerTrainer` and
:class:`MultipleNegativesRankingLoss` (InfoNCE with in-batch negatives, BioLORD §3.2), or its
GradCache variant for large batches. Batches are drawn by sentence-transformers'
NO_DUPLICATES sampler with the anchor's concept as one more value of each row, so no batch
holds two texts of one concept as each other's negatives. Checkpoints go to
``OUT/checkpoints`` every ``save_steps`` steps and when the run is interrupted; ``resume``
continues from the last one. Importing this module imports torch (seconds): the command
imports it only when a run starts. Every step emits a ``step`` event (loss, ETA). Issue 31's
candidate options: another in-batch loss (:mod:`trainer.pretrain.losses`), the relatedness
term as one more dataset (:mod:`trainer.pretrain.relatedness`) and ``--interpolate``'s WiSE-FT
merge of the saved weights (:func:`bioviz.models.merge.merge_into`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path

import numpy as np
from sentence_transformers.base.sampler import NoDuplicatesBatchSampler

from bioviz.errors import BiovizError, ModelError
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology.splits import SplitSpec
from trainer import hf_bridge
from trainer.devices import resolve_device
from trainer.evaluators import encode_unit
from trainer.events import CancelFlag, Cancelled, Emit, broadcast
from trainer.pretrain.config import CONFIG_FILE, PretrainConfig
from trainer.pretrain.dataset import PairSet, build_pairs
from trainer.pretrain.leakage import held_out, held_out_names, parse_level
from trainer.pretrain.losses import RelatednessLoss, contrastive_loss, frozen_copy
from trainer.pretrain.ordered_loss import OrderedDistanceLoss
from trainer.pretrain.pairs_file import load_pairset, subset
from trainer.pretrain.relatedness import OBJECTIVE as RELATEDNESS, relatedness_columns, with_targets
from trainer.pretrain.selection import stratified_sample
from trainer.pretrain.terms import write_terms

logger = logging.getLogger(__name__)

RESULT_FILE = "pretrain.json"
CHECKPOINTS = "checkpoints"
STATE_FILE = "pretrain-state.json"  # the validation figures before training, kept for a resumed run


def retrieval_figures(model, pairs) -> dict:
    """How often each validation anchor finds its own positive among all validation positives.

    Returns
    -------
    dict
        ``accuracy`` (top-1), ``mrr`` (mean reciprocal rank) and ``pairs``; empty when no pairs.
    """
    if not pairs:
        return {}
    texts = list(dict.fromkeys(p.positive for p in pairs))
    position = {t: i for i, t in enumerate(texts)}
    gold = np.array([position[p.positive] for p in pairs])
    anchors = encode_unit(model, [p.anchor for p in pairs])
    positives = encode_unit(model, texts)
    scores = anchors @ positives.T
    own = scores[np.arange(len(pairs)), gold]
    ranks = 1 + (scores > own[:, None]).sum(axis=1)
    return {"accuracy": float(np.mean(ranks == 1)), "mrr": float(np.mean(1.0 / ranks)), "pairs": len(pairs)}


def settable_length(model) -> int | None:
    """The base's ``max_seq_length`` when it can be set back, else None.

    A ``StaticEmbedding`` (model2vec's kind) has no setter, and a custom first module may
    have no such attribute at all. Asked before training: setting it after training is
    where such a base used to fail, with the trained weights not yet saved.
    """
    try:
        length = model.max_seq_length
        model.max_seq_length = length  # the same value: only whether the setter exists
    except (AttributeError, TypeError, ValueError):
        return None
    return length


def check_out_dir(out: str | Path, resume: bool) -> None:
    """Refuse to overwrite anything: a new run needs a new or empty directory, a resumed one its own.

    Raises
    ------
    BiovizError
    """
    out = Path(out)
    if resume:
        if not (out / CONFIG_FILE).is_file():
            raise BiovizError(f"{out} holds no interrupted pretraining run to resume")
        return
    if (out / RESULT_FILE).is_file():
        raise BiovizError(f"{out} already holds a pretrained model; choose another --out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BiovizError(f"{out} exists and is not empty; choose another --out (or --resume an interrupted run)")


def check_base(c: PretrainConfig) -> ModelSpec:
    """The base model of ``c``, parsed once: refused in one line before any pair is built.

    The command line and the job take ``--base`` as text (the config keeps it so); it is parsed
    here, after argparse, so a base that names nothing loadable is one ``error`` event in a
    job's progress file, as any other bad setting.

    Raises
    ------
    ModelError
        A base that names nothing loadable, or char-tfidf (no transformer to pretrain).
    """
    base = ModelSpec.parse(c.base)
    if not base.is_neural:
        raise ModelError("char-tfidf cannot be pretrained: the base must be a sentence-transformers model "
                         "(use minilm, med-minilm, a model directory or a hub id)")
    # Checked now, not after hours of training: the merge reads the base's safetensors weights.
    if c.interpolate is not None and not (base.files() / "model.safetensors").is_file():
        raise ModelError(f"--interpolate: the base {c.base} has no model.safetensors to merge with")
    return base


def _last_checkpoint(out: Path) -> Path | None:
    found = sorted((out / CHECKPOINTS).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return found[-1] if found else None


CONCEPT_SLOTS = 4  # concept keys per row: a pair's concepts (at most 3, a description's) and its negative's
CONCEPT_MARK = "\x1fconcept:"  # prefix of a concept key among a row's values (no name holds it)


class _ConceptRows:
    """Rows as the duplicate check sees them: the texts plus one value per concept key of ``label``."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        row = dict(self.dataset[index])
        keys = row.pop("label", [])
        keys = keys if isinstance(keys, list) else []  # a relatedness row's label is its target, no concept
        row.update({f"concept{i}": f"{CONCEPT_MARK}{k}" for i, k in enumerate(keys) if k >= 0})
        return row


class ConceptNoDuplicatesBatchSampler(NoDuplicatesBatchSampler):
    """NO_DUPLICATES that also compares the concepts in the ``label`` column.

    ``label`` holds :data:`CONCEPT_SLOTS` numbers per row: every concept the pair was built
    from and its hard negative's concept (``-1 - k`` fills unused slots, unique to its row and
    slot). sentence-transformers drops label columns from its duplicate check; here each
    concept number becomes one value of the row, so two rows sharing any concept never meet
    in a batch: no text of one concept is another row's in-batch negative (a false
    negative), and a row's hard negative is never another row's anchor concept.
    """

    def __init__(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
        super().__init__(dataset, batch_size, drop_last, valid_label_columns=[], generator=generator, seed=seed)
        self.dataset = _ConceptRows(self.dataset)


def _concept_keys(pairs) -> list[list[int]]:
    """Each pair's concept numbers (:data:`CONCEPT_SLOTS` per row, see the sampler)."""
    number: dict = {}
    rows = []
    for position, pair in enumerate(pairs):
        concepts = [*pair.concepts, *([pair.negative_concept] if pair.negative is not None else [])]
        keys = [number.setdefault((pair.source, c), len(number)) for c in dict.fromkeys(concepts)][:CONCEPT_SLOTS]
        rows.append(keys + [-1 - (position * CONCEPT_SLOTS + i) for i in range(len(keys), CONCEPT_SLOTS)])
    return rows


def _columns(pairs, keys) -> dict:
    columns = {"anchor": [p.anchor for p in pairs], "positive": [p.positive for p in pairs]}
    if pairs and pairs[0].negative is not None:
        columns["negative"] = [p.negative for p in pairs]
    return {**columns, "label": keys}


ORDERED = "distances"  # the objective (and dataset) trained with HiPrBERT's loss, not InfoNCE


def training_datasets(pairs, batch_size: int) -> dict:
    """``name -> columns``: triples (pairs with a hard negative), plain pairs and HiPrBERT's
    ordered rows apart, since the columns of one dataset are fixed and the ordered rows have
    a loss of their own; the trainer draws each batch from one of them. Fewer triples than a
    batch train as plain pairs (a short dataset would give no batch at all)."""
    ordered = [p for p in pairs if p.objective == ORDERED]
    others = [p for p in pairs if p.objective != ORDERED]
    out = _contrastive_datasets(others, batch_size) if others else {}
    if ordered:
        out[ORDERED] = _columns(ordered, _concept_keys(ordered))
    return out


def _contrastive_datasets(pairs, batch_size: int) -> dict:
    keys = _concept_keys(pairs)
    triples = [i for i, p in enumerate(pairs) if p.negative is not None]
    if len(triples) < batch_size:
        plain = [p if p.negative is None else dataclasses.replace(p, negative=None, negative_concept=None)
                 for p in pairs]
        return {"pairs": _columns(plain, _concept_keys(plain))}
    chosen = set(triples)
    plain = [i for i in range(len(pairs)) if i not in chosen]
    out = {"triples": _columns([pairs[i] for i in triples], [keys[i] for i in triples])}
    if plain:
        out["pairs"] = _columns([pairs[i] for i in plain], [keys[i] for i in plain])
    return out


def _make_loss(c: PretrainConfig, model, datasets, guide=None):
    """One loss, or ``dataset name -> loss`` when the batches come from several datasets."""
    contrastive = contrastive_loss(c.loss, model, mini_batch_size=c.mini_batch_size, guide=guide)
    special = {ORDERED: lambda: OrderedDistanceLoss(model),
               RELATEDNESS: lambda: RelatednessLoss(model, c.relatedness_weight)}
    losses = {name: special[name]() if name in special else contrastive for name in datasets}
    return next(iter(losses.values())) if len(losses) == 1 else losses


def prepare(c: PretrainConfig) -> PairSet:
    """The pairs of config ``c``, the excluded levels' held-out names left out.

    With ``c.pairs_file``, the pairs prepared elsewhere (:mod:`trainer.pretrain.pairs_file`):
    the part of them ``c.objectives`` and ``c.sources`` name, sampled to ``c.max_pairs``.
    """
    if c.pairs_file:
        pairs = subset(load_pairset(c.pairs_file)[0], c.objectives, c.sources)
        pairs.train = stratified_sample(pairs.train, c.max_pairs, c.seed)
        return pairs
    held = [held_out(parse_level(text), _split_spec(c)) for text in c.exclude_levels]
    if c.exclude_names:
        held.append(held_out_names(c.exclude_names))
    return build_pairs(c.sources, c.objectives, max_pairs=c.max_pairs, seed=c.seed, held=held,
                       validation_pairs=c.validation_pairs, hard_negatives=c.hard_negatives, base=c.base,
                       relatedness_pairs=c.relatedness_pairs if c.relatedness_weight else 0)


def _split_spec(c: PretrainConfig):
    return SplitSpec(shots=c.shots, seed=c.split_seed, test_per_class=c.test_per_class,
                     zero_shot_classes=c.zero_shot_classes)


def _write_record(c, out: Path, model, pairs, *, steps: int, resumed_from: int, device: str, losses: list,
                  before: dict, seconds: dict, started: float, interpolation: dict | None = None) -> dict:
    """After the model is saved: its validation figures, the hashed terms and ``pretrain.json``."""
    after = retrieval_figures(model, pairs.validation)
    result = {
        "base": c.base, "config": c.to_dict(), "device": device,
        "pairs": {**pairs.counts(), "available": pairs.available, "validation_overlap_dropped": pairs.overlap_dropped},
        "excluded": pairs.excluded,
        "steps": steps,
        "resumed_from_step": resumed_from,
        "train_loss": losses,
        "seconds": {**seconds, "total": time.perf_counter() - started},
        "validation": {"before": before, "after": after},
        **({"mining": pairs.mining} if pairs.mining else {}),
        **({"relatedness": _relatedness_record(pairs.relatedness)} if pairs.relatedness else {}),
        **({"interpolation": interpolation} if interpolation else {}),
    }
    # Which texts it trained on (hashed), for the Evaluation page's overlap mark: from the pairs
    # in hand, before pretrain.json marks the run finished (drawing them again costs as much
    # as building them: most of a minute for the bundled ontologies).
    write_terms([*pairs.train, *pairs.relatedness], out)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def _relatedness_record(scored) -> dict:
    """How many relatedness pairs trained and how their targets (the base's cosines) spread."""
    targets = np.array([p.target for p in scored])
    return {"pairs": len(scored), "target_mean": float(targets.mean()), "target_std": float(targets.std()),
            "target_min": float(targets.min()), "target_max": float(targets.max())}


def _load_base(c: PretrainConfig, base: ModelSpec, device: str):
    """The base model and its settable length; refused before training when ``--max-seq-length`` cannot apply."""
    from bioviz.models.encoders import load_sentence_transformer  # imported here: it imports the hub client

    model = load_sentence_transformer(base, device=device)
    base_length = settable_length(model)
    if c.loss == "gist" and not hasattr(getattr(model, "tokenizer", None), "get_vocab"):
        raise BiovizError(f"--loss gist: the base {c.base} has no transformers tokenizer for its guide (its first "
                          f"module is a {type(model[0]).__name__}); use --loss mnrl")
    if c.max_seq_length and base_length is None:
        raise BiovizError(f"--max-seq-length: the base {c.base} has no length to set (its first module is a "
                          f"{type(model[0]).__name__}); leave --max-seq-length out")
    return model, base_length


def _start_or_resume(c: PretrainConfig, out: Path, model, pairs, resume: bool) -> tuple[Path | None, dict]:
    """The checkpoint to resume from (None: a new run) and the validation figures before training.

    A new run measures them and writes its config and the figures, so that a resumed run
    reports the base's figures, not those of its checkpoint.
    """
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / STATE_FILE
    checkpoint = _last_checkpoint(out) if resume else None
    if checkpoint is not None and state_file.is_file():
        return checkpoint, json.loads(state_file.read_text(encoding="utf-8"))["before"]
    before = retrieval_figures(model, pairs.validation)
    (out / CONFIG_FILE).write_text(json.dumps(c.to_dict(), indent=1), encoding="utf-8")
    state_file.write_text(json.dumps({"before": before}), encoding="utf-8")
    return checkpoint, before


class _StepReport:
    """``step`` events, with an ETA paced by this process's own steps (a resumed run's earlier ones left out)."""

    def __init__(self, emit: Emit, total_steps: int, started: float):
        self.emit, self.total_steps, self.started = emit, total_steps, started
        self.first_step = self.first_time = None
        self.train_start = started  # set again when the trainer starts

    def __call__(self, bridge: hf_bridge.RunBridge, state) -> None:
        now, step = time.perf_counter(), state.global_step
        if self.first_step is None:
            self.first_step, self.first_time = step - 1, self.train_start
        pace = (now - self.first_time) / max(step - self.first_step, 1)
        self.emit({"event": "step", "step": step, "total_steps": self.total_steps, "epoch": state.epoch,
                   "elapsed_s": now - self.started, "eta_s": pace * (self.total_steps - step),
                   "loss": bridge.losses[-1] if bridge.losses else None})

    def finish(self, bridge: hf_bridge.RunBridge, state, mean_loss: float | None) -> None:
        """The closing ``step`` event, with the loss of the last logged steps.

        A step's event is emitted before the trainer logs that step's loss, so the last one
        carries an earlier loss, or none at all when a resumed run trains a single step. This
        event follows the last log; ``mean_loss`` (the trainer's mean over this process's
        steps) stands in when no loss was logged.
        """
        loss = bridge.losses[-1] if bridge.losses else mean_loss
        self.emit({"event": "step", "step": state.global_step, "total_steps": self.total_steps, "epoch": state.epoch,
                   "elapsed_s": time.perf_counter() - self.started, "eta_s": 0.0, "loss": loss})


def _trainer(c: PretrainConfig, out: Path, model, datasets: dict, *, bridge, total_steps: int, drop_last: bool,
             device: str, guide=None):
    """sentence-transformers' trainer over ``datasets``, checkpointing into ``out/checkpoints``."""
    from datasets import Dataset, DatasetDict  # imported here: datasets imports pyarrow and pandas (seconds)

    args = hf_bridge.training_arguments(
        c, out / CHECKPOINTS, warmup_steps=round(c.warmup_ratio * total_steps),
        logging_steps=max(1, min(50, total_steps // 20)), use_cpu=device == "cpu",
        save_strategy="steps", save_steps=c.save_steps, save_total_limit=1,
        dataloader_drop_last=drop_last, batch_sampler=ConceptNoDuplicatesBatchSampler,
    )
    train_data = {name: Dataset.from_dict(columns) for name, columns in datasets.items()}
    # One dataset: as is; triples and pairs: a DatasetDict, each batch drawn from one of them.
    train_dataset = next(iter(train_data.values())) if len(train_data) == 1 else DatasetDict(train_data)
    return hf_bridge.quiet_trainer(model=model, args=args, train_dataset=train_dataset,
                                   loss=_make_loss(c, model, datasets, guide), bridge=bridge)


def _interpolate(c: PretrainConfig, out: Path, model, pairs, *, base_spec: ModelSpec, device: str):
    """``--interpolate``: the saved weights replaced by their WiSE-FT merge with the base's.

    Returns the merged model (loaded back from ``out``: what is published is what is measured)
    and the record for ``pretrain.json`` (alpha, the base by content, the trained model's
    validation figures before the merge).
    """
    from bioviz.models.encoders import load_sentence_transformer  # imported here: it imports the hub client
    from bioviz.models.merge import merge_into  # imported here: safetensors, a run's end only

    trained = retrieval_figures(model, pairs.validation)
    merged = merge_into(base_spec, out, alpha=c.interpolate)
    record = {"alpha": merged.alpha, "base": merged.base, "base_fingerprint": merged.base_fingerprint,
              "trained_fingerprint": merged.tuned_fingerprint, "validation_trained": trained}
    return load_sentence_transformer(str(out), device=device), record


def _save(c: PretrainConfig, out: Path, model, pairs, *, base_spec: ModelSpec, **record) -> dict:
    """Save the trained model (merged with the base under ``--interpolate``), then its record
    (:func:`_write_record`); then drop what resuming needed."""
    # The weights first: whatever fails after this line costs the record, never the training.
    model.save(str(out))
    try:
        interpolation = None
        if c.interpolate is not None:
            model, interpolation = _interpolate(c, out, model, pairs, base_spec=base_spec, device=record["device"])
        result = _write_record(c, out, model, pairs, interpolation=interpolation, **record)
    except Exception as error:  # any failure here (a full disk, a bug) must not read as "nothing trained"
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        raise BiovizError(f"the pretrained model is saved in {out}, but writing {RESULT_FILE} failed "
                          f"({reason}); its checkpoints are kept") from error
    # Done: the checkpoints and the resume files are no longer needed (a checkpoint is ~3x the model).
    shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
    for name in (CONFIG_FILE, STATE_FILE):
        (out / name).unlink(missing_ok=True)
    return result


def pretrain(c: PretrainConfig, out: str | Path, *, callbacks=(), cancel: CancelFlag | None = None,
             resume: bool = False) -> dict:
    """Pretrain ``c.base`` on the pairs of ``c`` into the sentence-transformers directory ``out``.

    Parameters
    ----------
    c : PretrainConfig
        A validated config (:func:`trainer.pretrain.config.validate`).
    out : str or Path
        New (or empty) directory; with ``resume``, the directory of the interrupted run.
    callbacks : iterable of callable
        Receive ``pairs``, ``start``, ``step`` and ``done`` events.
    cancel : CancelFlag, optional
        When set, a checkpoint is saved and :class:`~trainer.events.Cancelled` raised.
    resume : bool
        Continue from the last checkpoint in ``out`` (the config is read from ``out``).

    Returns
    -------
    dict
        What ``pretrain.json`` holds.
    """
    out = Path(out)
    check_out_dir(out, resume)
    base = check_base(c)
    emit: Emit = broadcast(callbacks)
    cancel = cancel or CancelFlag()
    started = time.perf_counter()
    pairs = prepare(c)
    pairs_s = time.perf_counter() - started
    emit({"event": "pairs", **pairs.counts(), "excluded": pairs.excluded.get("total", 0), "seconds": pairs_s})
    device = resolve_device(c.device)
    model, base_length = _load_base(c, base, device)
    checkpoint, before = _start_or_resume(c, out, model, pairs, resume)
    resumed_from = int(checkpoint.name.split("-")[-1]) if checkpoint else 0
    # Taken from the base before any step (a resumed run's checkpoint is loaded by the trainer later).
    guide = frozen_copy(model) if c.loss == "gist" else None
    targets_started = time.perf_counter()
    pairs.relatedness = with_targets(pairs.relatedness, c.relatedness_teacher or c.base)
    targets_s = time.perf_counter() - targets_started
    if c.max_seq_length:
        # Truncated while training only: the validation figures before and after, and the
        # saved model, use the base's full length.
        model.max_seq_length = min(c.max_seq_length, base_length)

    # A last batch of one pair has no negative (its loss is 0): incomplete batches are dropped
    # unless the pairs do not fill one batch at all.
    drop_last = len(pairs.train) >= c.batch_size
    datasets = training_datasets(pairs.train, c.batch_size)
    if pairs.relatedness:
        datasets[RELATEDNESS] = relatedness_columns(pairs.relatedness)
    steps_per_epoch = sum(len(d["anchor"]) // c.batch_size for d in datasets.values()) if drop_last else 1
    total_steps = steps_per_epoch * c.epochs
    report = _StepReport(emit, total_steps, started)
    bridge = hf_bridge.RunBridge(cancel, on_step=report, save_on_cancel=True)
    emit({"event": "start", "encoder": "pretrain", "base": c.base, "train_pairs": len(pairs.train),
          "total_steps": total_steps, "max_epochs": c.epochs, "device": device, "resumed_from_step": resumed_from})
    fit = _trainer(c, out, model, datasets, bridge=bridge, total_steps=total_steps, drop_last=drop_last, device=device,
                   guide=guide)
    report.train_start = time.perf_counter()
    output = fit.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if cancel.is_set():
        raise Cancelled("pretraining interrupted; continue it with --resume")
    report.finish(bridge, fit.state, getattr(output, "training_loss", None))
    training_s = time.perf_counter() - report.train_start
    model.eval()
    if c.max_seq_length:
        model.max_seq_length = base_length
    result = _save(c, out, model, pairs, steps=int(fit.state.global_step), resumed_from=resumed_from, device=device,
                   losses=bridge.losses, before=before,
                   seconds={"pairs": pairs_s, "relatedness_targets": targets_s, "training": training_s},
                   started=started, base_spec=base)
    emit({"event": "done", "seconds": result["seconds"]["total"], "validation": result["validation"]})
    return result
