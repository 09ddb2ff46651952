"""BioLORD-style fine-tuning (biolord-definitions §3): names pulled towards their definitions.

Pairs are ``(name, definition)``; where a concept has no definition, a description is
generated from the hierarchy with BioLORD's template ``[more generic concept] which
[relationship] [related concept]`` restricted to IS-A: ``"<parent> which has subtype
<child>"`` when the concept has children, else ``"a kind of <parent>"``. The base
sentence-transformer is trained with sentence-transformers' own
:class:`MultipleNegativesRankingLoss` (InfoNCE with in-batch negatives) and
:class:`SentenceTransformerTrainer` (AdamW, linear warm-up schedule), batches without
duplicate texts.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time

import numpy as np

from trainer.data import TrainingData

logger = logging.getLogger(__name__)


def describe(ontology, concept_id: str, rng: random.Random) -> str | None:
    """A generated description of a concept from its IS-A neighbours (None at a top concept)."""
    graph = ontology.graph
    parents = sorted(p for p in graph.predecessors(concept_id) if p in ontology.concepts)
    if not parents:
        return None
    parent = ontology.concepts[rng.choice(parents)]
    generic = rng.choice(parent.names)
    children = sorted(c for c in graph.successors(concept_id) if c in ontology.concepts)
    if children:
        child = ontology.concepts[rng.choice(children)]
        return f"{generic} which has subtype {rng.choice(child.names)}"
    return f"a kind of {generic}"


def definition_pairs(data: TrainingData, scope: str = "train", max_pairs: int = 20000,
                     seed: int = 0) -> tuple[list[str], list[str], dict]:
    """``(names, definitions)`` for the rows a run may learn from.

    Parameters
    ----------
    data : TrainingData
    scope : str
        ``train``: the split's training names; ``all``: every name of the view except
        validation, test and zero-shot names (those stay unseen).
    max_pairs : int
        Random subset above this many pairs (seeded).

    Returns
    -------
    (names, texts, counts)
        Paired lists and ``{"definitions": n, "descriptions": n, "skipped": n}``.
    """
    split = data.split
    if scope == "train":
        rows = split.train
    else:
        held = set(split.validation.tolist()) | set(split.test.tolist()) | set(split.zero_shot.tolist())
        rows = np.array([r for r in range(len(data.view.names)) if r not in held], dtype=np.int64)
    rng = random.Random(seed)
    names, texts = [], []
    counts = {"definitions": 0, "descriptions": 0, "skipped": 0}
    for row in rows.tolist():
        concept = data.ontology.concepts.get(data.view.name_concepts[row])
        if concept is None:
            counts["skipped"] += 1
            continue
        text = concept.definition or describe(data.ontology, concept.id, rng)
        if not text:
            counts["skipped"] += 1
            continue
        counts["definitions" if concept.definition else "descriptions"] += 1
        names.append(data.view.names[row])
        texts.append(text)
    if len(names) > max_pairs:
        keep = sorted(rng.sample(range(len(names)), max_pairs))
        names, texts = [names[i] for i in keep], [texts[i] for i in keep]
    return names, texts, counts


def fine_tune(trainer) -> "TrainResult":  # noqa: F821 - avoids a circular import
    """Fine-tune the base model of ``trainer.config`` on definition pairs.

    Reports an ``epoch`` event per epoch (training loss and validation mAP) through the
    trainer's callbacks and honours its cancel flag between steps.
    """
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    from bioviz.embeddings import load_sentence_transformer
    from bioviz.metrics import class_retrieval_map
    from trainer.loop import Cancelled, TrainResult

    c, data = trainer.config, trainer.data
    names, texts, counts = definition_pairs(data, c.definition_scope, c.max_pairs, c.seed)
    if len(names) < 2:
        from bioviz.errors import BiovizError

        raise BiovizError("definitions: fewer than two (name, definition) pairs in the training names")
    logger.info("definitions: %d pairs (%s)", len(names), counts)
    model = load_sentence_transformer(c.base, device=str(trainer.device))
    split, labels = data.split, data.view.labels
    eval_rows = np.concatenate([split.train, split.validation])
    eval_names = [data.view.names[i] for i in eval_rows]

    def encode(texts_: list[str]) -> np.ndarray:
        return model.encode(texts_, batch_size=128, convert_to_numpy=True, normalize_embeddings=True,
                            show_progress_bar=False)

    history: list[dict] = []
    per_epoch: list[float] = []
    started = time.perf_counter()
    state = {"epoch_started": started, "losses": []}

    class Reporter(TrainerCallback):
        """Bridges the Hugging Face trainer to bioviz callbacks and the cancel flag."""

        def on_step_end(self, args, train_state, control, **kwargs):
            if trainer.cancel.is_set():
                control.should_training_stop = True
            return control

        def on_log(self, args, train_state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                state["losses"].append(float(logs["loss"]))

        def on_epoch_end(self, args, train_state, control, **kwargs):
            if trainer.cancel.is_set():
                return control
            epoch = int(round(train_state.epoch or len(history) + 1))
            vectors = encode(eval_names)
            n_train = len(split.train)
            val_map = float(class_retrieval_map(vectors[n_train:], labels[split.validation], vectors[:n_train],
                                                labels[split.train])) if len(split.validation) else float("nan")
            loss = float(np.mean(state["losses"])) if state["losses"] else float("nan")
            state["losses"] = []
            now = time.perf_counter()
            per_epoch.append(now - state["epoch_started"])
            state["epoch_started"] = now
            elapsed = now - started
            losses = {"contrastive": loss, "total": loss}
            history.append({"epoch": epoch, "losses": losses, "val_mAP": val_map, "val_loss": None,
                            "seconds": per_epoch[-1]})
            trainer._emit({"event": "epoch", "epoch": epoch, "max_epochs": c.epochs, "losses": losses,
                           "val_metric": val_map, "val_name": "mAP", "val_mAP": val_map, "elapsed_s": elapsed,
                           "eta_s": elapsed / epoch * (c.epochs - epoch)})
            return control

    dataset = Dataset.from_dict({"anchor": names, "positive": texts})
    steps_per_epoch = max(1, int(np.ceil(len(names) / c.batch_size)))
    with tempfile.TemporaryDirectory(prefix="bioviz-definitions-") as scratch:
        args = SentenceTransformerTrainingArguments(
            output_dir=scratch,
            num_train_epochs=c.epochs,
            per_device_train_batch_size=c.batch_size,
            learning_rate=c.lr,
            weight_decay=c.weight_decay,
            warmup_steps=int(round(c.warmup_ratio * steps_per_epoch * c.epochs)),
            lr_scheduler_type="linear",
            batch_sampler=BatchSamplers.NO_DUPLICATES,
            seed=c.seed,
            data_seed=c.seed,
            save_strategy="no",
            report_to="none",
            logging_steps=max(1, steps_per_epoch // 4),
            disable_tqdm=True,
            use_cpu=trainer.device.type == "cpu",
            dataloader_num_workers=0,
        )
        fit = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model), callbacks=[Reporter()])
        # The printer callback writes log dicts to stdout, which carries only the JSON summary.
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        fit.remove_callback(PrinterCallback)
        fit.remove_callback(ProgressCallback)
        fit.train()
    if trainer.cancel.is_set():
        raise Cancelled("training cancelled")
    training_s = time.perf_counter() - started
    model.eval()
    vectors = encode(list(data.view.names))
    return TrainResult(None, model, None, vectors, history, len(history), False, training_s, per_epoch,
                       str(trainer.device), metrics={"pairs": {"pairs": len(names), **counts}})
