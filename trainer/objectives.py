"""What each encoder type trains for: one objective object per head type, and the fine-tuning paths.

An objective knows everything that differs between the head types of :data:`OBJECTIVES`
(residual, dan, cca, hierarchical): the head's inputs (the base vectors, or their CCA
projection), the head itself (:mod:`trainer.encoders`), the fixed targets, each epoch's
batches (:mod:`trainer.sampling`), the loss terms of a training batch and of the validation
names (:mod:`trainer.losses`), and what the trained head becomes for inference. The epoch
loop, early stopping and the base weight (:class:`trainer.loop.Trainer`) are the same for
every type and never ask which type they train.

The encoder types that fine-tune the base transformer instead of training a head
(``definitions``, ``hierarchical --finetune``) are whole training paths of their own;
:func:`fine_tuning` is the one place that tells them apart from the heads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import cached_property

import numpy as np
import torch
from torch import nn

from bioviz.errors import BiovizError
from bioviz.space import l2_normalise
from trainer import encoders, losses, sampling
from trainer.config import TrainConfig
from trainer.data import TrainingData
from trainer.definitions import fine_tune
from trainer.events import TrainResult
from trainer.finetune import fine_tune_hierarchy

Terms = dict[str, torch.Tensor]


class Objective(ABC):
    """The training objective of one head type on prepared data.

    Parameters
    ----------
    config : TrainConfig
        A validated configuration whose ``encoder`` is this objective's :attr:`name`.
    data : TrainingData
        View, split and base vectors.
    device : torch.device
        Where the head trains; the fixed targets and inputs are moved there once.
    generator : torch.Generator
        The run's sampling generator: every epoch's tuples, order and synonym dropout draw from it.

    Attributes
    ----------
    name : str
        The encoder type (the key in :data:`OBJECTIVES`).
    inputs : torch.Tensor
        The head's input for every name of the view, on the CPU.
    device_inputs : torch.Tensor
        The same on the training device.
    projection : trainer.encoders.LinearMap or None
        A fixed map the head's inputs went through, saved with the run on its own (``cca``).
    """

    name: str
    projection: encoders.LinearMap | None = None

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        self.config, self.data, self.device, self.generator = config, data, device, generator
        self.train_rows, self.val_rows = data.split.train, data.split.validation
        self.labels = data.view.labels
        self.train_index = torch.from_numpy(self.train_rows)
        # A level's vectors may be a read-only memory-mapped block: torch needs them writable (copied then).
        self.base = torch.from_numpy(np.require(data.vectors, requirements="W"))
        self.inputs = self.base

    @cached_property
    def device_inputs(self) -> torch.Tensor:
        """The head's inputs on the training device, copied there once (the same tensor on the CPU)."""
        return self.inputs.to(self.device)

    def build_head(self) -> nn.Module:
        """A fresh trainable head on the training device.

        Draws its initial weights from torch's global generator, so it must be called at the
        same point of a run for runs to repeat under a seed.
        """
        c = self.config
        try:
            return encoders.build_head(self.name, self.data.dim, c.hidden, c.dropout,
                                       identity_start=c.identity_start).to(self.device)
        except ValueError as error:  # e.g. an identity start with too narrow a hidden layer
            raise BiovizError(f"{error} for base vectors of {self.data.dim} dimensions") from None

    @abstractmethod
    def epoch_batches(self, encoded_train: torch.Tensor) -> list[torch.Tensor]:
        """This epoch's batches (drawn from the run's generator), as indices into the training names.

        Parameters
        ----------
        encoded_train : torch.Tensor
            Eval-mode encodings of the training names at the end of the previous epoch (CPU).
        """

    @abstractmethod
    def batch_terms(self, model: nn.Module, batch: torch.Tensor) -> Terms:
        """The loss terms of one training batch (one of :meth:`epoch_batches`), in training mode."""

    @abstractmethod
    def validation_terms(self, encoded_val: torch.Tensor) -> Terms:
        """The loss terms on the validation names from their eval-mode encodings (CPU).

        Only called when there are validation names, and under ``torch.no_grad``.
        """

    def trained_head(self, model: nn.Module) -> encoders.Head:
        """The trained model (on the CPU) as the run's head from base vectors."""
        return model

    def metrics(self, figures: Callable[[np.ndarray], dict]) -> dict:
        """Figures of the run that only this type has (added to the run's metrics).

        ``figures`` scores vectors of every name of the view (the loop's retrieval figures).
        """
        return {}


class TripletObjective(Objective):
    """Triplet loss over random positives and distance-weighted negatives, plus grounding terms.

    Each epoch draws one positive and one negative per training name among the training
    names (encoded by the previous epoch's head), then visits the names in random order.
    Subclasses add their grounding terms (:meth:`grounding_terms`).
    """

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        super().__init__(config, data, device, generator)
        self.labels_t = torch.from_numpy(self.labels)
        prototypes = encoders.class_prototypes(data.vectors[self.train_rows], self.labels[self.train_rows],
                                               len(data.view.classes))
        self.prototypes = torch.from_numpy(prototypes)
        self.triplet = losses.TripletLoss(config.margin)
        self.grounding = losses.GroundingLoss()
        self.positives = self.negatives = None

    def sample_tuples(self, encoded: torch.Tensor, rows: np.ndarray, generator: torch.Generator):
        """Local indices of a random positive and a distance-weighted negative per row."""
        lab = self.labels_t[torch.from_numpy(rows)]
        pos = sampling.random_positives(lab, generator)
        neg = sampling.distance_weighted_negatives(encoded, lab, encoded, lab, generator=generator)
        return pos, neg

    def epoch_batches(self, encoded_train: torch.Tensor) -> list[torch.Tensor]:
        # Tuples are drawn before the order: the generator's draws must come in this sequence
        # for a seed to repeat earlier runs.
        pos_local, neg_local = self.sample_tuples(encoded_train, self.train_rows, self.generator)
        self.positives, self.negatives = self.train_index[pos_local], self.train_index[neg_local]
        n_train = len(self.train_rows)
        order = torch.randperm(n_train, generator=self.generator)
        return [order[s : s + self.config.batch_size] for s in range(0, n_train, self.config.batch_size)]

    def batch_terms(self, model: nn.Module, batch: torch.Tensor) -> Terms:
        rows, pos, neg = self.train_index[batch], self.positives[batch], self.negatives[batch]
        # One forward pass over anchors, positives and negatives together.
        out = model(self.device_inputs[torch.cat([rows, pos, neg])])
        a, p, n = out.split(len(rows))
        return self.terms(a, p, n, rows=rows.to(self.device), pos=pos.to(self.device), training=True)

    def validation_terms(self, encoded_val: torch.Tensor) -> Terms:
        # Its own generator: the validation tuples are the same every epoch and draw
        # nothing from the training generator.
        generator = torch.Generator().manual_seed(self.config.seed + 1)
        enc = encoded_val.to(self.device)
        pos, neg = self.sample_tuples(encoded_val, self.val_rows, generator)
        rows = torch.from_numpy(self.val_rows)
        return self.terms(enc, enc[pos.to(self.device)], enc[neg.to(self.device)], rows=rows.to(self.device),
                          pos=rows[pos].to(self.device), training=False)

    def terms(self, a, p, n, *, rows: torch.Tensor, pos: torch.Tensor, training: bool) -> Terms:
        """The triplet term, then :meth:`grounding_terms` (the order of the weighted sum)."""
        return {"triplet": self.triplet(a, p, n), **self.grounding_terms(a, p, rows=rows, pos=pos, training=training)}

    @abstractmethod
    def grounding_terms(self, a: torch.Tensor, p: torch.Tensor, *, rows: torch.Tensor, pos: torch.Tensor,
                        training: bool) -> Terms:
        """The type's terms besides the triplet, from anchor and positive encodings.

        ``rows`` and ``pos`` are the global indices of anchors and positives, on the device.
        """


class ResidualObjective(TripletObjective):
    """Few-shot residual head: triplet + grounding ``d(f(n), (u_c + u_n) / 2)`` (fewshot §2.2)."""

    name = "residual"

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        super().__init__(config, data, device, generator)
        self.ground_target = ((self.prototypes[self.labels_t] + self.base) / 2).to(device)

    def grounding_terms(self, a, p, *, rows, pos, training) -> Terms:
        return {"ground": self.grounding(a, self.ground_target[rows])}


class DANObjective(TripletObjective):
    """DAN: triplet + contextual ``d(f(n), u_n)`` + grounding ``d(f(n), (u_p + u_n) / 2)`` (higher-level §3.2)."""

    name = "dan"

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        super().__init__(config, data, device, generator)
        self.context_target = self.base.to(device)
        self.ground_target = ((self.prototypes[self.labels_t] + self.base) / 2).to(device)

    def grounding_terms(self, a, p, *, rows, pos, training) -> Terms:
        return {"context": self.grounding(a, self.context_target[rows]),
                "ground": self.grounding(a, self.ground_target[rows])}


class CCAObjective(TripletObjective):
    """CCA then DAN: triplet + prototypical grounding against CCA-projected prototypes (grounding §3.2).

    The CCA is fitted on the training names once, before the head is built; the head trains
    on the projected names, and the projection is stacked in front of it afterwards. With a
    ``context_weight``, the name's own projected vector is a contextual target as in the DAN.
    """

    name = "cca"

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        super().__init__(config, data, device, generator)
        self.projection, prototype_map, self.components = encoders.fit_cca(
            data.vectors[self.train_rows], self.labels[self.train_rows], config.seed)
        self.inputs = self.projection(self.base)
        self.labels_dev = self.labels_t.to(device)  # indexed with on-device rows in every batch
        self.proto_target = prototype_map(self.prototypes).to(device)
        self.context_target = self.inputs.to(device) if config.context_weight > 0 else None
        self.prototype_loss = losses.PrototypeLoss(config.synonym_dropout)

    def grounding_terms(self, a, p, *, rows, pos, training) -> Terms:
        proto_loss = self.prototype_loss.train(training)  # synonym dropout only while training
        names = torch.cat([a, p])
        name_labels = self.labels_dev[torch.cat([rows, pos])]
        terms = {"ground": proto_loss(names, name_labels, self.proto_target, generator=self.generator)}
        if self.context_target is not None:
            terms["context"] = self.grounding(a, self.context_target[rows])
        return terms

    def trained_head(self, model: nn.Module) -> encoders.Head:
        return encoders.Stack(self.projection, model)

    def metrics(self, figures: Callable[[np.ndarray], dict]) -> dict:
        return {"cca_projection": figures(l2_normalise(self.inputs.numpy())),
                "cca_components": self.components}


class HierarchicalObjective(Objective):
    """HiPrBERT on a residual head: multi-similarity loss over hierarchy distance categories (§3.3-3.5).

    Batches pair every anchor with its closest related name (:func:`sampling.hierarchy_batches`).
    """

    name = "hierarchical"

    def __init__(self, config: TrainConfig, data: TrainingData, device: torch.device, generator: torch.Generator):
        super().__init__(config, data, device, generator)
        parents = data.parents()
        concepts = data.view.name_concepts
        self.categories = sampling.hierarchy_categories([concepts[i] for i in self.train_rows],
                                                        self.labels[self.train_rows], parents)
        self.val_categories = None
        if len(self.val_rows):
            self.val_categories = sampling.hierarchy_categories([concepts[i] for i in self.val_rows],
                                                                self.labels[self.val_rows], parents)
        self.loss = losses.MultiSimilarityLoss(config.ms_alpha, config.ms_beta, config.ms_lambda)

    def epoch_batches(self, encoded_train: torch.Tensor) -> list[torch.Tensor]:
        return sampling.hierarchy_batches(self.categories, self.config.batch_size, self.generator)

    def batch_terms(self, model: nn.Module, batch: torch.Tensor) -> Terms:
        rows = self.train_index[batch]
        categories = self.categories[batch][:, batch]
        return {"ms": self.loss(model(self.device_inputs[rows]), categories.to(self.device).long())}

    def validation_terms(self, encoded_val: torch.Tensor) -> Terms:
        return {"ms": self.loss(encoded_val.to(self.device), self.val_categories.to(self.device).long())}


OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (ResidualObjective, DANObjective, CCAObjective, HierarchicalObjective)
}
"""The objective of each head type, keyed by encoder name (``TrainConfig.encoder``)."""

FineTuning = Callable[..., TrainResult]


def fine_tuning(config: TrainConfig) -> FineTuning | None:
    """The fine-tuning path of a configuration, or ``None`` when it trains a head.

    Fine-tuning trains the base sentence-transformer itself with its own trainer, so it is a
    whole path (``path(config, data, device, emit, cancel) -> TrainResult``), not an objective.

    Examples
    --------
    >>> fine_tuning(TrainConfig(source="icd10", encoder="residual")) is None
    True
    """
    if config.encoder == "definitions":
        return fine_tune
    if config.encoder == "hierarchical" and config.finetune:
        return fine_tune_hierarchy
    return None
