"""Evaluation: metrics, the papers' protocols, relatedness benchmarks, orchestration and tables."""
