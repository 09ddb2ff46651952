"""Neighbour search: the faiss index, type-ahead name search and neighbour rankings."""
