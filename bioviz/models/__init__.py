"""Embedding models: loading, encoding, the vector cache and trained runs read back."""
