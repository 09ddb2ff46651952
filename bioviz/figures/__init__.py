"""Plotly figure builders. Each returns a ``go.Figure`` and never shows it."""

from bioviz.figures.levels import class_size_bar
from bioviz.figures.theme import apply_theme, class_colour, class_colours, export_config, pair_colours, theme
from bioviz.figures.training import base_weight_choice, baseline_vs_trained, training_curves
from bioviz.figures.export import export_config_as, slug
from bioviz.figures.hierarchy import hierarchy_figure
from bioviz.figures.hypernyms import hypernym_ranking_figure
from bioviz.figures.projection import projection_map_figure, projection_pair_figure, projection_table, selected_rows
from bioviz.figures.separation import separation_figure
from bioviz.figures.similarity import similarity_figures, similarity_heatmap, similarity_pair_figure

__all__ = ["apply_theme", "class_colour", "class_colours", "class_size_bar", "export_config", "pair_colours", "theme"]
__all__ += ["base_weight_choice", "baseline_vs_trained", "training_curves"]
__all__ += ["export_config_as", "hierarchy_figure", "hypernym_ranking_figure", "projection_map_figure",
            "projection_pair_figure",
            "projection_table", "selected_rows", "separation_figure", "similarity_figures", "similarity_heatmap",
            "similarity_pair_figure", "slug"]
from bioviz.figures.evaluation import cross_level_heatmap, metric_bars, model_colours

__all__ += ["cross_level_heatmap", "metric_bars", "model_colours"]
from bioviz.figures.neighbours import neighbour_table_figure

__all__ += ["neighbour_table_figure"]
