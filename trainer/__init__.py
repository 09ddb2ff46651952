"""Training the papers' encoders on ontology levels; runs are sentence-transformers models.

``python -m trainer train ...`` trains one configuration (:mod:`trainer.cli`);
:func:`trainer.runs.train_run` is the same from Python. See :mod:`trainer.loop` for the loop,
:mod:`trainer.encoders` and :mod:`trainer.losses` for the models and objectives.
"""
