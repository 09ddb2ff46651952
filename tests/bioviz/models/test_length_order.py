"""Batches are cut from names sorted by tokens (little padding), and the vectors come back in the names' order."""

from __future__ import annotations

import numpy as np

from bioviz.models.encoders import Encoder, token_lengths
from bioviz.models.registry import load_encoder


class _Recording(Encoder):
    """Encodes a name as its length in characters; remembers each chunk it was given."""

    spec = label = fingerprint = "recording"
    dim = 2

    def __init__(self, lengths: dict[str, int]):
        self.lengths, self.chunks = lengths, []

    def _lengths(self, texts):
        return [self.lengths[t] for t in texts]

    def _encode(self, texts, batch_size):
        self.chunks.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_chunks_follow_the_encoders_lengths_and_rows_keep_the_names_order():
    names = ["bb", "a", "cccc", "ddd"]
    encoder = _Recording({"bb": 1, "a": 9, "cccc": 2, "ddd": 5})
    vectors = encoder.encode(names, batch_size=1)
    # CHUNK_BATCHES batches of one name per chunk: all four in one chunk, longest (by the encoder's count) first
    assert encoder.chunks == [["a", "ddd", "cccc", "bb"]]
    assert vectors[:, 0].tolist() == [2, 1, 4, 3]


def test_token_lengths_count_the_models_tokens_not_characters():
    model = load_encoder("minilm").model
    short_word, rare_word = "hypertension", "xqzvbnmwplkj"  # the same 12 characters
    counts = token_lengths(model, [short_word, rare_word, "a"])
    assert counts[0] < counts[1] and counts[2] == 3  # [CLS] a [SEP]


def test_a_model_without_a_tokenizer_falls_back_to_characters():
    class Bare:
        tokenizer = None

    assert token_lengths(Bare(), ["abc", "de"]) == [3, 2]
