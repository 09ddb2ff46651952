"""Comparison views: projection, per-class separation, similarity matrices and hierarchy trees."""
