"""Ontology pretraining (issue 17): SapBERT/BioLORD/HiPrBERT-style pairs from whole sources.

:mod:`~trainer.pretrain.pairs` builds the pairs of each objective, :mod:`~trainer.pretrain.leakage`
keeps a level's held-out names out of them, :mod:`~trainer.pretrain.selection` samples and
holds out a validation slice, :mod:`~trainer.pretrain.fit` trains a sentence-transformer on
them and :mod:`~trainer.pretrain.command` is ``python -m trainer pretrain``.
"""
