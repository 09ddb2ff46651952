"""Side-by-side projections of two Spaces over the same names, coloured by class.

One figure with two panels (baseline left, compared right) so a box or lasso selection in
either panel can highlight the same names in both, and so one PNG/SVG export holds the
comparison. Classes keep their colour in both panels (``class_colours``), one legend entry
per class toggles it in both; train / validation / test / zero-shot names differ by marker.
WebGL (``Scattergl``) draws 2-D panels, so tens of thousands of points stay interactive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.density import bulk_range, class_densities
from bioviz.figures.text import line_height, shorten, text_width, wrap_html
from bioviz.figures.theme import apply_theme, class_colours, pair_colours, text_lines, theme
from bioviz.ontology.levels import LevelView

# Names outside the split ("unused") are the majority: plain dots; the few split names
# stand out by shape and a slightly larger size.
PART_SYMBOLS = {
    "unused": "circle",
    "train": "square",
    "validation": "diamond",
    "test": "x",
    "zero-shot": "triangle-up",
}
# 3-D scenes know fewer symbols than WebGL 2-D panels.
PART_SYMBOLS_3D = {"unused": "circle", "train": "square", "validation": "diamond", "test": "cross",
                   "zero-shot": "circle-open"}
DIMMED_OPACITY = 0.15
OTHER_OPACITY = 0.35      # classes not among those highlighted: grey, behind
MAP_OPACITY = 0.45        # points under the contours and names of a labelled map
OUTSIDE_SYMBOL = "circle-open"
OUTSIDE_RING = "#3e4c59"
LEGEND_FONT = 12
LEGEND_ROW_PX = 21
LABEL_FONT = 11           # class names written on the map
LABEL_WIDTH_PX = 150
LABEL_GAP_PX = 4          # kept free around each class name
SPACING = 0.04            # between the panels, of the plot width
SIDE = 20                 # left and right margins
# Above this Procrustes disparity the layouts share too little for one scale to mean
# anything: each panel gets axes fitted to its own points, and the caption says so.
DISPARATE = 0.5


def _ranges(coords: list[np.ndarray]) -> list[list[float]]:
    """Axis ranges fitted to the bulk of all panels (far outliers left out), one scale for both."""
    stacked = np.vstack(coords)
    return [list(bulk_range(stacked[:, d])) for d in range(stacked.shape[1])]


def _inside(coords: np.ndarray, ranges: list[list[float]]) -> np.ndarray:
    return np.all([(coords[:, d] >= lo) & (coords[:, d] <= hi) for d, (lo, hi) in enumerate(ranges)], axis=0)


def _at_edge(coords: np.ndarray, ranges: list[list[float]]) -> np.ndarray:
    """``coords`` with the points outside ``ranges`` moved onto the range's edge."""
    out = coords.copy()
    for d, (lo, hi) in enumerate(ranges):
        inset = (hi - lo) * 0.005  # just inside, so the marker is drawn whole
        out[:, d] = np.clip(out[:, d], lo + inset, hi - inset)
    return out


def projection_pair_figure(
    view: LevelView,
    rows: np.ndarray,
    coords_a: np.ndarray,
    coords_b: np.ndarray | None,
    *,
    model_a: str,
    model_b: str | None,
    parts: np.ndarray | None = None,
    highlight: np.ndarray | None = None,
    method: str = "UMAP",
    caption: str | None = None,
    title: str | None = None,
    height: int | None = None,
    width: int | None = None,
    highlight_classes: list[str] | None = None,
    contours: bool = False,
    disparity: float | None = None,
) -> go.Figure:
    """Two aligned scatter panels of the same names under two models (one panel for one model).

    The axes fit the bulk of the points (:func:`bioviz.figures.density.bulk_range`): the few
    far outliers a UMAP leaves are drawn at the panel's edge, ringed, instead of squeezing
    the cloud into a corner. Panels are as tall as the layout's
    shape asks at ``width``, so no band is left empty between them and the legend.

    Parameters
    ----------
    view : LevelView
        Gives names, concept codes and classes (colours are by class id).
    rows : numpy.ndarray
        Row indices into ``view.names`` of the plotted points.
    coords_a, coords_b : numpy.ndarray
        ``(len(rows), 2 or 3)`` coordinates; ``coords_b`` already aligned to ``coords_a``,
        or None for a map of one model (one panel, :func:`projection_map_figure`).
    model_a, model_b : str
        Panel titles (baseline, compared; ``model_b`` None with one model).
    parts : numpy.ndarray, optional
        Split part per view row (``Split.part_of``); drawn as marker symbols.
    highlight : numpy.ndarray, optional
        View rows selected by the user: drawn on top with an outline in both panels,
        everything else dimmed.
    method : str
        ``UMAP`` or ``PCA`` (axis titles).
    caption : str, optional
        Parameters under the plot; ``<br>`` starts another line.
    title : str, optional
        Figure title; by default states the models, the method and the level view.
    height : int, optional
        Panel height in pixels; by default from the layout's aspect ratio at ``width``.
    width : int, optional
        Width the figure is laid out for (the theme's ``export_width`` by default): legend
        columns, label lengths and the panel height are computed for it.
    highlight_classes : list of str, optional
        Class ids to show in colour; every other class is drawn grey behind them and shares
        one legend entry. Distinct colours are then spent on the few classes that matter.
    contours : bool
        Draw, per class (the highlighted ones when given), the contour of the region holding
        half of its names, and write the class's name at its density peak (2-D only); the
        legend then lists no classes, the map names them.
    disparity : float, optional
        The pair's Procrustes disparity: above :data:`DISPARATE` each panel has axes fitted
        to its own points (the caption says so), as one scale would squeeze one of them.

    Returns
    -------
    plotly.graph_objects.Figure
        Every point carries ``customdata = [view row, name, concept]``; one trace per class
        and split part (its class and part are in the trace's hover text).
    """
    width = width or theme()["export_width"]
    rows = np.asarray(rows, dtype=np.int64)
    panels = _panels(coords_a, coords_b, disparity)
    points = _points(view, rows, parts, highlight, highlight_classes)
    two = coords_b is not None
    plot_px = width - 2 * SIDE
    panel_px = plot_px * (1 - SPACING) / 2 if two else plot_px
    fig = make_subplots(rows=1, cols=len(panels.drawn), specs=[[{"type": "scene" if panels.three_d else "xy"}]
                                                              * len(panels.drawn)],
                        horizontal_spacing=SPACING,
                        subplot_titles=_panel_titles(model_a, model_b if two else None, panel_px, panels.apart,
                                                     theme()))
    legend = _add_legend(fig, view, panels, points, split_shown=parts is not None, contours=contours,
                         plot_px=plot_px)
    _add_points(fig, view, panels, points, contours=contours)
    panel_height = _set_axes(fig, view, panels, points, method=method, panel_px=panel_px, height=height,
                             contours=contours)
    if panels.apart:
        note = (f"layouts too different for one scale (Procrustes disparity {disparity:.3f}): "
                "each panel has its own axes")
        caption = f"{caption}<br>{note}" if caption else note
    title = title or (f"{method} · {model_a} vs {model_b} · {view.title}" if two
                      else f"{method} · {model_a} · {view.title}")
    _finish_layout(fig, title=title, caption=caption, width=width, panel_height=panel_height, legend=legend,
                   three_d=panels.three_d)
    return fig


def projection_map_figure(view: LevelView, rows: np.ndarray, coords: np.ndarray, model: str,
                          *, parts: np.ndarray | None = None, **options) -> go.Figure:
    """One model's map: a single panel of the level's names, coloured by class.

    The pair figure with one panel (:func:`projection_pair_figure` with ``coords_b`` None);
    ``options`` are that function's keyword arguments (``contours``, ``caption``, ...).
    """
    return projection_pair_figure(view, rows, coords, None, model_a=model, model_b=None, parts=parts, **options)


@dataclass(frozen=True)
class _Panels:
    """Where each panel's points are drawn: its axis ranges, its points clipped to them."""

    ranges: list            # per panel, ``[[lo, hi], ...]`` per dimension
    drawn: dict             # panel column -> coordinates moved inside the ranges
    outside: dict           # panel column -> mask of the points outside the ranges
    apart: bool             # each panel has axes of its own (layouts too different)
    three_d: bool
    dims: int


@dataclass(frozen=True)
class _Points:
    """What every point looks like: its class, split part, selection and hover data."""

    labels: np.ndarray
    parts: np.ndarray
    selected: np.ndarray
    customdata: np.ndarray
    colours: dict
    chosen: frozenset
    size: int

    @property
    def dim_others(self) -> bool:
        return bool(self.selected.any())


def _panels(coords_a: np.ndarray, coords_b: np.ndarray | None, disparity: float | None) -> _Panels:
    """Axis ranges fitted to the bulk of the points, one scale for both panels unless they differ too much."""
    # float32 is ample for drawing and halves the coordinates in the JSON sent to the browser.
    panels = [np.asarray(c, dtype=np.float32) for c in (coords_a, coords_b) if c is not None]
    apart = len(panels) == 2 and disparity is not None and disparity > DISPARATE
    ranges = [_ranges([c]) for c in panels] if apart else [_ranges(panels)] * len(panels)
    outside = {col: ~_inside(c, r) for col, (c, r) in enumerate(zip(panels, ranges), start=1)}
    drawn = {col: _at_edge(c, r) for col, (c, r) in enumerate(zip(panels, ranges), start=1)}
    dims = panels[0].shape[1]
    return _Panels(ranges, drawn, outside, apart, dims == 3, dims)


def _points(view: LevelView, rows: np.ndarray, parts: np.ndarray | None, highlight: np.ndarray | None,
            highlight_classes: list[str] | None) -> _Points:
    colours = class_colours(view.classes)
    chosen = frozenset(highlight_classes or [])
    if chosen:
        colours = {c: (colour if c in chosen else theme()["other_classes"]) for c, colour in colours.items()}
    selected = np.zeros(len(rows), dtype=bool)
    if highlight is not None and len(highlight):
        selected = np.isin(rows, np.asarray(highlight, dtype=np.int64))
    # Hover: the per-point name and concept travel as customdata; the class and split part
    # are the same for every point of a trace and go into its hovertemplate as text, which
    # keeps the figure JSON small for tens of thousands of points.
    customdata = np.column_stack([rows.astype(str), [view.names[r] for r in rows],
                                  [view.name_concepts[r] for r in rows]])
    return _Points(
        labels=view.labels[rows],
        parts=parts[rows] if parts is not None else np.full(len(rows), "unused", dtype=object),
        selected=selected, customdata=customdata, colours=colours, chosen=chosen,
        size=4 if len(rows) > 20_000 else 6 if len(rows) > 3_000 else 8,
    )


def _hover(class_label: str, part: str) -> str:
    safe = class_label.replace("%", "%%").replace("{", "(").replace("}", ")")
    return f"<b>%{{customdata[1]}}</b><br>%{{customdata[2]}} · {safe}<br>{part}<extra></extra>"


def _scatter(three_d: bool, coords: np.ndarray, mask: np.ndarray, **kwargs):
    if three_d:
        return go.Scatter3d(x=coords[mask, 0], y=coords[mask, 1], z=coords[mask, 2], mode="markers", **kwargs)
    return go.Scattergl(x=coords[mask, 0], y=coords[mask, 1], mode="markers", **kwargs)


def _legend_proxy(three_d: bool, name: str, group: str, marker: dict):
    # Legend entries are drawn with the first point's symbol; a point-less proxy trace
    # gives each entry a plain marker, and its legend group toggles the real traces.
    common = dict(name=name, legendgroup=group, showlegend=True, marker=marker, hoverinfo="skip", mode="markers")
    if three_d:
        return go.Scatter3d(x=[None], y=[None], z=[None], **common)
    return go.Scattergl(x=[None], y=[None], **common)


def _present_classes(view: LevelView, points: _Points) -> list[int]:
    present = [int(c) for c in np.unique(points.labels)]
    # Grey classes first, so the highlighted ones are drawn over them.
    present.sort(key=lambda c: bool(points.chosen) and view.classes[c] in points.chosen)
    return present


def _add_legend(fig: go.Figure, view: LevelView, panels: _Panels, points: _Points, *, split_shown: bool,
                contours: bool, plot_px: float) -> tuple[int, int, float]:
    """Add the legend's proxy entries; returns the legend's entries, columns and entry width (of the plot's)."""
    symbols = PART_SYMBOLS_3D if panels.three_d else PART_SYMBOLS
    present = _present_classes(view, points)
    shown_parts = [p for p in PART_SYMBOLS if p in set(points.parts.tolist())]
    entries = _legend_entries(view, present, set(points.chosen), contours and not panels.three_d,
                              points.colours, theme())
    entries += [(f"<i>{part}</i>", f"part-{part}", {"color": "#52606d", "size": 9, "symbol": symbols[part]})
                for part in (shown_parts if split_shown and len(shown_parts) > 1 else [])]
    n_outside = int(sum(out.sum() for out in panels.outside.values()))
    if n_outside:
        entries.append((f"outside the view, drawn at its edge ({n_outside})", "outside",
                        {"color": "#52606d", "size": 9, "symbol": OUTSIDE_SYMBOL, "line": {"width": 1.5}}))
    if points.dim_others:
        entries.append((f"selected ({int(points.selected.sum())})", "selected",
                        {"color": "#52606d", "size": 10, "line": {"width": 1.5, "color": "#111111"}}))
    columns, entry_px = _legend_columns([name for name, _, _ in entries], plot_px)
    for name, group, marker in entries:
        if group != "selected":
            shown = shorten(name, entry_px, LEGEND_FONT) if "<i>" not in name else name
            fig.add_trace(_legend_proxy(panels.three_d, shown, group, marker), row=1, col=1)
    return len(entries), columns, entry_px / plot_px


def _add_points(fig: go.Figure, view: LevelView, panels: _Panels, points: _Points, *, contours: bool) -> None:
    """One trace per class and split part on each panel, then the outliers' rings and the selection."""
    symbols = PART_SYMBOLS_3D if panels.three_d else PART_SYMBOLS
    present = _present_classes(view, points)
    for col, coords in panels.drawn.items():
        # One trace per class and split part, so symbol and size are single values: plotly
        # validates per-point symbol lists element by element, which dominates the build
        # time of a 20k-point figure.
        for class_index in present:
            class_id = view.classes[class_index]
            grey = bool(points.chosen) and class_id not in points.chosen
            for part in PART_SYMBOLS:
                mask = (points.labels == class_index) & (points.parts == part)
                if not mask.any():
                    continue
                marker = {
                    "color": points.colours[class_id],
                    # Split names a little larger than the rest, told apart by shape alone.
                    "size": points.size if part == "unused" else points.size + 2,
                    "symbol": symbols[part],
                    "opacity": (DIMMED_OPACITY if points.dim_others else OTHER_OPACITY if grey
                                else MAP_OPACITY if contours and not panels.three_d else 0.8),
                    "line": {"width": 0},
                }
                group = class_id if not grey else "other classes"
                fig.add_trace(_scatter(panels.three_d, coords, mask, name=class_id, legendgroup=group,
                                       showlegend=False, marker=marker, customdata=points.customdata[mask],
                                       hovertemplate=_hover(view.class_labels[class_index], part)), row=1, col=col)
        _add_marks(fig, view, panels, points, col)


def _add_marks(fig: go.Figure, view: LevelView, panels: _Panels, points: _Points, col: int) -> None:
    """Rings on the outliers drawn at the edge, and the user's selection on top, on one panel."""
    coords, out = panels.drawn[col], panels.outside[col]
    if out.any():
        # Outliers stay in their class's trace (hover, selection and split markers as for
        # any name), moved onto the edge; a ring around each says it is not where it lies.
        marker = {"color": OUTSIDE_RING, "size": points.size + 7, "symbol": OUTSIDE_SYMBOL, "line": {"width": 1.5}}
        fig.add_trace(_scatter(panels.three_d, coords, out, name="outside the view", legendgroup="outside",
                               showlegend=False, marker=marker, hoverinfo="skip"), row=1, col=col)
    if points.dim_others:
        selected = points.selected
        marker = {"color": [points.colours[view.classes[c]] for c in points.labels[selected]], "size": points.size + 5,
                  "symbol": "circle", "line": {"width": 1.5, "color": "#111111"}, "opacity": 1.0}
        fig.add_trace(_scatter(panels.three_d, coords, selected, name=f"selected ({int(selected.sum())})",
                               legendgroup="selected", showlegend=col == 1, marker=marker,
                               customdata=points.customdata[selected], hovertemplate=_hover("selected", "")),
                      row=1, col=col)



def _set_axes(fig: go.Figure, view: LevelView, panels: _Panels, points: _Points, *, method: str,
              panel_px: float, height: int | None, contours: bool) -> int:
    """Unit-less axes per panel (and the class map when asked); returns the panel height in pixels."""
    axis_names = [f"{method} {i + 1}" for i in range(panels.dims)]
    if panels.three_d:
        for col, r in enumerate(panels.ranges, start=1):
            # Projection axes have no units: neither tick labels nor the gridlines they would name.
            fig.update_layout({"scene" if col == 1 else f"scene{col}": {
                **{f"{axis}axis": {"title": name, "range": r[i], "showticklabels": False, "showgrid": False}
                   for i, (axis, name) in enumerate(zip("xyz", axis_names))},
                "aspectmode": "cube",
            }})
        return height or 560
    # The tallest panel's shape sets the height (panels with their own axes differ in shape).
    aspect = max((r[1][1] - r[1][0]) / max(r[0][1] - r[0][0], 1e-9) for r in panels.ranges)
    panel_height = height or int(np.clip(panel_px * aspect, 300, 720))
    for col, r in enumerate(panels.ranges, start=1):
        # Projection axes have no units: no tick labels, no gridlines; the method is in the title.
        fig.update_xaxes(range=r[0], showticklabels=False, zeroline=False, showgrid=False, row=1, col=col)
        # Same x/y scale within each panel, so distances are not stretched.
        fig.update_yaxes(range=r[1], showticklabels=False, zeroline=False, showgrid=False,
                         scaleanchor="x" if col == 1 else f"x{col}", scaleratio=1, row=1, col=col)
        if contours:
            spans = [hi - lo for lo, hi in r]
            scale = min(panel_px / spans[0], panel_height / spans[1])  # pixels per map unit
            inside = ~panels.outside[col]
            _class_map(fig, col, panels.drawn[col][inside], points.labels[inside], view, r, points.colours,
                       set(points.chosen), scale)
    return panel_height


def _finish_layout(fig: go.Figure, *, title: str, caption: str | None, width: int, panel_height: int,
                   legend: tuple[int, int, float], three_d: bool) -> None:
    """Title, caption, and the legend under the panels, at a height fixed in pixels."""
    entries, columns, entry_width = legend
    legend_rows = int(np.ceil(entries / columns)) if entries else 0
    legend_px = 10 + LEGEND_ROW_PX * legend_rows
    apply_theme(fig, title, caption=caption, height=None, width=width,
                margin={"l": SIDE, "r": SIDE, "b": legend_px + 12},
                top=30, caption_offset=legend_px + 8)
    total = int(fig.layout.margin.t + panel_height + fig.layout.margin.b)
    fig.update_layout(
        height=total,
        # 10 px under the panels, in pixels from the top: the figure's height is fixed, so
        # this holds at any width (plotly limits a legend placed below the plot area itself).
        legend={"orientation": "h", "x": 0.0, "y": 1 - (total - fig.layout.margin.b + 10) / total,
                "yref": "container", "yanchor": "top", "xanchor": "left",
                "itemsizing": "constant", "font": {"size": LEGEND_FONT},
                # the text's share of the plot width: the marker and padding come on top
                "entrywidth": entry_width, "entrywidthmode": "fraction", "tracegroupgap": 0},
        dragmode="lasso" if not three_d else "orbit",
        hoverlabel={"font": {"size": 13}},
    )


def _panel_titles(model_a: str, model_b: str | None, panel_px: float, apart: bool, t: dict) -> list[str]:
    """Panel titles: the model's coloured square, its name cut to the panel, its role."""
    baseline_colour, compared_colour = pair_colours()
    if model_b is None:
        return [f"<span style='color:{baseline_colour}'>■</span> "
                f"<b>{shorten(model_a, panel_px - 110, t['font_size'], bold=True)}</b>"]
    # "rotated": with axes of its own the compared panel is turned to match, not scaled.
    return [f"<span style='color:{colour}'>■</span> <b>{shorten(model, panel_px - 110, t['font_size'], bold=True)}"
            f"</b> ({role})" for model, colour, role in ((model_a, baseline_colour, "baseline"),
                                                         (model_b, compared_colour, "rotated" if apart else "aligned"))]


def _legend_entries(view: LevelView, present: list[int], chosen: set, map_labels: bool, colours: dict,
                    t: dict) -> list[tuple[str, str, dict]]:
    """``(name, legend group, marker)`` of the class entries: none when the map names the
    classes, only the highlighted ones (and "other classes") when some are highlighted."""
    if map_labels and not chosen:
        return []
    out = []
    for class_index in present:
        class_id = view.classes[class_index]
        if chosen and class_id not in chosen:
            continue
        if not map_labels:
            out.append((f"{class_id} {view.class_labels[class_index]}", class_id,
                        {"color": colours[class_id], "size": 10}))
    others = sum(1 for c in present if chosen and view.classes[c] not in chosen)
    if others:
        out.append((f"other classes ({others})", "other classes", {"color": t["other_classes"], "size": 10}))
    return out


def _legend_columns(names: list[str], plot_px: float) -> tuple[int, float]:
    """Columns of the legend under the panels, and the text width each entry gets.

    As many columns as the longest entry allows (1 to 4), at least two when there are many
    entries (their names are then shortened to fit).
    """
    symbol_px = 46  # the marker, its gap and plotly's padding
    longest = max((text_width(n, LEGEND_FONT) for n in names), default=0.0)
    columns = int(np.clip(plot_px // (longest + symbol_px + 8), 1, 4))
    if len(names) > 6:
        columns = max(columns, 2)
    return columns, plot_px / columns - symbol_px - 8


def _class_map(fig: go.Figure, col: int, coords: np.ndarray, labels: np.ndarray, view: LevelView,
               ranges: list[list[float]], colours: dict, chosen: set, scale: float) -> None:
    """Each class's half-mass contour and its name at its density peak, on one panel.

    Names are placed largest class first (a greedy placement on measured text extents); a
    name that would cover one already placed is nudged up, down or sideways by its size
    (:func:`_nudges`), and is left out (the hover and the contour still show the class)
    when no place near its peak is free.
    """
    suffix = "" if col == 1 else str(col)
    placed: list[tuple[float, float, float, float]] = []
    # Collected and added at once: plotly validates every annotation again on each add.
    traces, notes = [], []
    (x0, x1), (y0, y1) = ranges[0], ranges[1]
    for density in class_densities(coords, labels, (x0, x1), (y0, y1)):
        class_id = view.classes[density.class_index]
        if chosen and class_id not in chosen:
            continue
        colour = colours[class_id]
        traces.append(go.Contour(
            x=np.round(density.x, 4), y=np.round(density.y, 4), z=np.round(density.z, 3),
            contours={"start": density.level, "end": density.level, "size": 1, "coloring": "lines"},
            colorscale=[[0, colour], [1, colour]], line={"width": 2}, showscale=False, hoverinfo="skip",
            legendgroup=class_id, showlegend=False, name=class_id,
        ))
        text = wrap_html(view.class_labels[density.class_index], LABEL_WIDTH_PX, LABEL_FONT, max_lines=2)
        # The box as drawn (text, padding and border) and a few pixels' gap, so fonts a
        # little wider than the measured one still leave labels apart.
        w = (text_width(text, LABEL_FONT) + 8 + LABEL_GAP_PX) / scale
        h = (line_height(LABEL_FONT) * text_lines(text) + 6 + LABEL_GAP_PX) / scale
        px, py = density.peak
        for dx, dy in _nudges(w, h):
            cx, cy = px + dx, py + dy
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            if box[0] < x0 or box[2] > x1 or box[1] < y0 or box[3] > y1:
                continue
            if any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                continue
            placed.append(box)
            notes.append({"text": text, "x": cx, "y": cy, "xref": f"x{suffix}", "yref": f"y{suffix}",
                          "showarrow": False, "font": {"size": LABEL_FONT, "color": theme()["text"]},
                          "bgcolor": "rgba(255,255,255,0.8)", "bordercolor": colour, "borderwidth": 1,
                          "borderpad": 2})
            break
    fig.add_traces(traces, rows=1, cols=col)
    # Assigned whole: update_layout would walk every annotation's properties again (0.5 s).
    fig.layout.annotations = (*fig.layout.annotations, *(go.layout.Annotation(note) for note in notes))


def _nudges(w: float, h: float) -> list[tuple[float, float]]:
    """Offsets from a class's peak tried in turn for its name: on it, then a box away, then two."""
    return [(0, 0), (0, h), (0, -h), (w * 0.6, 0), (-w * 0.6, 0), (0, 2 * h), (0, -2 * h),
            (w * 0.6, h), (-w * 0.6, h), (w * 0.6, -h), (-w * 0.6, -h)]


def selected_rows(selection: dict | None) -> np.ndarray:
    """View rows of the points in a Streamlit plotly selection (``event["selection"]``).

    Reads the row from each point's ``customdata[0]`` (see :func:`projection_pair_figure`),
    so it works whichever panel and trace the points were selected in.
    """
    if not selection:
        return np.zeros(0, dtype=np.int64)
    rows = []
    for point in selection.get("points", []) or []:
        data = point.get("customdata")
        if data is not None and len(data):
            try:
                rows.append(int(data[0]))
            except (TypeError, ValueError):
                continue
    return np.unique(np.asarray(rows, dtype=np.int64))


def projection_table(view: LevelView, rows: np.ndarray, coords_a: np.ndarray, coords_b: np.ndarray, *,
                     parts: np.ndarray | None = None):
    """The numbers behind a projection figure, for CSV download."""
    rows = np.asarray(rows, dtype=np.int64)
    frame = pd.DataFrame({
        "name": [view.names[r] for r in rows],
        "concept": [view.name_concepts[r] for r in rows],
        "class": [view.classes[view.labels[r]] for r in rows],
        "class_label": [view.class_labels[view.labels[r]] for r in rows],
        "part": parts[rows] if parts is not None else "",
    })
    for prefix, coords in (("a", coords_a), ("b", coords_b)):
        for d in range(coords.shape[1]):
            frame[f"{prefix}_{d + 1}"] = np.round(coords[:, d], 5)
    return frame


def sample_map_figure(view: LevelView, sample, model: str, *, highlight_classes: list[str] | None = None,
                      width: int | None = None) -> go.Figure:
    """The map drawn while a level encodes: a PCA of a sample of the names encoded so far, coloured by class.

    The one-model map (:func:`projection_map_figure`), so classes keep the colours and legend of
    the final layout; its title says it is a PCA sample map of so many names, and the caption
    carries the sample's marker, so a saved image is not mistaken for the final UMAP.

    Parameters
    ----------
    view : LevelView
        The level (names, classes; its title names the ontology and level).
    sample : SampleMap
        From :func:`bioviz.views.sample_map.sample_map`.
    model : str
        The model's label.
    highlight_classes : list of str, optional
        Classes drawn in colour, the rest grey (as on the final map).
    width : int, optional
        Width the figure is laid out for (the theme's export width by default).

    Returns
    -------
    plotly.graph_objects.Figure
        Points carry ``customdata = [view row, name, concept]`` as on the final map.
    """
    title = f"PCA sample map of {len(sample.rows):,} names · {model} · {view.title}"
    caption = (f"{sample.marker} · a class-stratified sample of the names encoded so far, PCA 2D; "
               "the UMAP layout follows when every name is encoded")
    return projection_map_figure(view, sample.rows, sample.coords, model, method="PCA", title=title,
                                 caption=caption, highlight_classes=highlight_classes, width=width)
