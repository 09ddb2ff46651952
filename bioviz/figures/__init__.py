"""Plotly figure builders. Each returns a ``go.Figure`` and never shows it."""

from bioviz.figures.levels import class_size_bar
from bioviz.figures.theme import apply_theme, class_colour, class_colours, export_config, theme
from bioviz.figures.training import baseline_vs_trained, training_curves

__all__ = ["apply_theme", "class_colour", "class_colours", "class_size_bar", "export_config", "theme"]
__all__ += ["baseline_vs_trained", "training_curves"]
from bioviz.figures.evaluation import cross_level_heatmap, metric_bars, model_colours

__all__ += ["cross_level_heatmap", "metric_bars", "model_colours"]
