"""Train a sentence-transformer on pretraining pairs, with checkpoints, resume and progress.

sentence-transformers' own :class:`SentenceTransformerTrainer` and
:class:`MultipleNegativesRankingLoss` (InfoNCE with in-batch negatives, BioLORD §3.2), or its
GradCache variant for large batches. Batches are drawn by sentence-transformers'
NO_DUPLICATES sampler with the anchor's concept as one more value of each row, so no batch
holds two texts of one concept as each other's negatives. Checkpoints go to
``OUT/checkpoints`` every ``save_steps`` steps and when the run is interrupted; ``resume``
continues from the last one. Importing this module imports torch (seconds): the command
imports it only when a run starts. Every step emits a ``step`` event (loss, ETA).
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

from bioviz.errors import BiovizError
from trainer.events import CancelFlag, Cancelled, Emit, broadcast
from trainer.pretrain.config import CONFIG_FILE, PretrainConfig
from trainer.pretrain.dataset import PairSet, build_pairs
from trainer.pretrain.leakage import held_out, held_out_names, parse_level
from trainer.pretrain.terms import write_terms

logger = logging.getLogger(__name__)

RESULT_FILE = "pretrain.json"
CHECKPOINTS = "checkpoints"


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
    options = dict(batch_size=128, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    anchors = model.encode([p.anchor for p in pairs], **options)
    positives = model.encode(texts, **options)
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


def _last_checkpoint(out: Path) -> Path | None:
    found = sorted((out / CHECKPOINTS).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return found[-1] if found else None


def _device(name: str) -> str:
    if name != "auto":
        return name
    from bioviz.models.encoders import device

    return device()


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


def _make_loss(c: PretrainConfig, model, datasets):
    """One loss, or ``dataset name -> loss`` when the batches come from several datasets."""
    from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                    MultipleNegativesRankingLoss)

    from trainer.pretrain.ordered_loss import OrderedDistanceLoss

    if c.loss == "cached":
        contrastive = CachedMultipleNegativesRankingLoss(model, mini_batch_size=c.mini_batch_size)
    else:
        contrastive = MultipleNegativesRankingLoss(model)
    losses = {name: OrderedDistanceLoss(model) if name == ORDERED else contrastive for name in datasets}
    return next(iter(losses.values())) if len(losses) == 1 else losses


def prepare(c: PretrainConfig) -> PairSet:
    """The pairs of config ``c``, the excluded levels' held-out names left out.

    With ``c.pairs_file``, the pairs prepared elsewhere (:mod:`trainer.pretrain.pairs_file`):
    the part of them ``c.objectives`` and ``c.sources`` name, sampled to ``c.max_pairs``.
    """
    if c.pairs_file:
        from trainer.pretrain.pairs_file import load_pairset, subset
        from trainer.pretrain.selection import stratified_sample

        pairs = subset(load_pairset(c.pairs_file)[0], c.objectives, c.sources)
        pairs.train = stratified_sample(pairs.train, c.max_pairs, c.seed)
        return pairs
    held = [held_out(parse_level(text), _split_spec(c)) for text in c.exclude_levels]
    if c.exclude_names:
        held.append(held_out_names(c.exclude_names))
    return build_pairs(c.sources, c.objectives, c.max_pairs, c.seed, held, c.validation_pairs, c.hard_negatives)


def _split_spec(c: PretrainConfig):
    from bioviz.ontology.splits import SplitSpec

    return SplitSpec(shots=c.shots, seed=c.split_seed, test_per_class=c.test_per_class,
                     zero_shot_classes=c.zero_shot_classes)


def _write_record(c, out: Path, model, pairs, fit, checkpoint, device, progress, before, seconds, started) -> dict:
    """After the model is saved: its validation figures, the hashed terms and ``pretrain.json``."""
    after = retrieval_figures(model, pairs.validation)
    result = {
        "base": c.base, "config": c.to_dict(), "device": device,
        "pairs": {**pairs.counts(), "available": pairs.available, "validation_overlap_dropped": pairs.overlap_dropped},
        "excluded": pairs.excluded,
        "steps": int(fit.state.global_step),
        "resumed_from_step": int(checkpoint.name.split("-")[-1]) if checkpoint else 0,
        "train_loss": progress["losses"],
        "seconds": {**seconds, "total": time.perf_counter() - started},
        "validation": {"before": before, "after": after},
    }
    # Which texts it trained on (hashed), for the Evaluation page's overlap mark: from the pairs
    # in hand, before pretrain.json marks the run finished (drawing them again costs as much
    # as building them: most of a minute for the bundled ontologies).
    write_terms(pairs.train, out)
    (out / RESULT_FILE).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def pretrain(c: PretrainConfig, out: str | Path, callbacks=(), cancel: CancelFlag | None = None,
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
    from datasets import Dataset, DatasetDict
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from bioviz.models.encoders import load_sentence_transformer

    out = Path(out)
    check_out_dir(out, resume)
    emit: Emit = broadcast(callbacks)
    cancel = cancel or CancelFlag()
    started = time.perf_counter()
    pairs = prepare(c)
    pairs_s = time.perf_counter() - started
    emit({"event": "pairs", **pairs.counts(), "excluded": pairs.excluded.get("total", 0), "seconds": pairs_s})
    device = _device(c.device)
    model = load_sentence_transformer(c.base, device=device)
    base_length = settable_length(model)
    if c.max_seq_length and base_length is None:
        raise BiovizError(f"--max-seq-length: the base {c.base} has no length to set (its first module is a "
                          f"{type(model[0]).__name__}); leave --max-seq-length out")
    out.mkdir(parents=True, exist_ok=True)
    state_file = out / "pretrain-state.json"
    checkpoint = _last_checkpoint(out) if resume else None
    if checkpoint is not None and state_file.is_file():
        before = json.loads(state_file.read_text(encoding="utf-8"))["before"]
    else:
        before = retrieval_figures(model, pairs.validation)
        (out / CONFIG_FILE).write_text(json.dumps(c.to_dict(), indent=1), encoding="utf-8")
        state_file.write_text(json.dumps({"before": before}), encoding="utf-8")
    if c.max_seq_length:
        # Truncated while training only: the validation figures before and after, and the
        # saved model, use the base's full length.
        model.max_seq_length = min(c.max_seq_length, base_length)

    # A last batch of one pair has no negative (its loss is 0): incomplete batches are dropped
    # unless the pairs do not fill one batch at all.
    drop_last = len(pairs.train) >= c.batch_size
    datasets = training_datasets(pairs.train, c.batch_size)
    steps_per_epoch = sum(len(d["anchor"]) // c.batch_size for d in datasets.values()) if drop_last else 1
    total_steps = steps_per_epoch * c.epochs
    progress = {"first_step": None, "first_time": None, "losses": []}

    class Reporter(TrainerCallback):
        """Step events with an ETA paced by this process's own steps; stop (and save) on cancel."""

        def on_step_end(self, args, train_state, control, **kwargs):
            now, step = time.perf_counter(), train_state.global_step
            if progress["first_step"] is None:
                progress["first_step"], progress["first_time"] = step - 1, train_start
            done_here = step - progress["first_step"]
            pace = (now - progress["first_time"]) / max(done_here, 1)
            emit({"event": "step", "step": step, "total_steps": total_steps, "epoch": train_state.epoch,
                  "elapsed_s": now - started, "eta_s": pace * (total_steps - step),
                  "loss": progress["losses"][-1] if progress["losses"] else None})
            if cancel.is_set():
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_log(self, args, train_state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                progress["losses"].append(float(logs["loss"]))

    emit({"event": "start", "encoder": "pretrain", "base": c.base, "train_pairs": len(pairs.train),
          "total_steps": total_steps, "max_epochs": c.epochs, "device": device,
          "resumed_from_step": int(checkpoint.name.split("-")[-1]) if checkpoint else 0})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / CHECKPOINTS),
        num_train_epochs=c.epochs,
        per_device_train_batch_size=c.batch_size,
        learning_rate=c.lr,
        weight_decay=c.weight_decay,
        warmup_steps=round(c.warmup_ratio * total_steps),
        lr_scheduler_type="linear",
        seed=c.seed,
        data_seed=c.seed,
        save_strategy="steps",
        save_steps=c.save_steps,
        save_total_limit=1,
        report_to="none",
        logging_steps=max(1, min(50, total_steps // 20)),
        disable_tqdm=True,
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
        dataloader_drop_last=drop_last,
        batch_sampler=ConceptNoDuplicatesBatchSampler,
    )
    train_data = {name: Dataset.from_dict(columns) for name, columns in datasets.items()}
    # One dataset: as is; triples and pairs: a DatasetDict, each batch drawn from one of them.
    train_dataset = next(iter(train_data.values())) if len(train_data) == 1 else DatasetDict(train_data)
    fit = SentenceTransformerTrainer(model=model, args=args, train_dataset=train_dataset,
                                     loss=_make_loss(c, model, datasets), callbacks=[Reporter()])
    # The printer callback writes log dicts to stdout, which carries only the JSON summary.
    fit.remove_callback(PrinterCallback)
    fit.remove_callback(ProgressCallback)
    train_start = time.perf_counter()
    fit.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if cancel.is_set():
        raise Cancelled("pretraining interrupted; continue it with --resume")
    training_s = time.perf_counter() - train_start
    model.eval()
    if c.max_seq_length:
        model.max_seq_length = base_length
    # The weights first: whatever fails after this line costs the record, never the training.
    model.save(str(out))
    try:
        result = _write_record(c, out, model, pairs, fit, checkpoint, device, progress, before,
                               {"pairs": pairs_s, "training": training_s}, started)
    except Exception as error:  # any failure here (a full disk, a bug) must not read as "nothing trained"
        reason = " ".join(f"{type(error).__name__}: {error}".split())
        raise BiovizError(f"the pretrained model is saved in {out}, but writing {RESULT_FILE} failed "
                          f"({reason}); its checkpoints are kept") from error
    # Done: the checkpoints and the resume files are no longer needed (a checkpoint is ~3x the model).
    shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
    for name in (CONFIG_FILE, state_file.name):
        (out / name).unlink(missing_ok=True)
    emit({"event": "done", "seconds": result["seconds"]["total"], "validation": result["validation"]})
    return result
