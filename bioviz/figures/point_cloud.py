"""The two projection panels as binary arrays for the browser's point-cloud renderer.

Above ``POINT_CLOUD_ABOVE`` points the Projection page draws with the point-cloud component
(``ui/point_cloud``) instead of plotly: plotly's figure JSON holds every coordinate, name and
colour as text (19.5 MB for 2 x 100k points) and the browser's plotly needs seconds per
100k points. Here coordinates travel as float32 bytes, each point's class as one or two bytes
(colours come from the one palette, ``class_colours``), and the names for hover as one UTF-8
blob with uint32 offsets: about 9 bytes a point for both panels' positions and class, plus the
names' own length.

Points are packed in a seeded shuffled order, so no class is always drawn over the others;
the component answers a selection with positions in that order and :func:`selected_view_rows`
maps them back to the level's rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from bioviz.figures.density import bulk_range
from bioviz.figures.theme import class_colours, pair_colours, theme
from bioviz.ontology.levels import LevelView

POINT_CLOUD_ABOVE = 100_000  # more points than this: the point-cloud renderer; up to it: plotly
SHUFFLE_SEED = 0


def choose_renderer(n_points: int, above: int | None = None) -> tuple[str, str]:
    """``("plotly" | "point cloud", why)`` for a projection of ``n_points`` points per panel.

    ``above`` defaults to ``POINT_CLOUD_ABOVE`` (read at call time).

    >>> choose_renderer(20_000)[0], choose_renderer(200_000)[0]
    ('plotly', 'point cloud')
    """
    above = POINT_CLOUD_ABOVE if above is None else above
    if n_points > above:
        return "point cloud", (f"{n_points:,} points per panel: drawn by the point-cloud renderer (binary arrays, "
                               f"drawn in the browser; plotly is used up to {above:,} points)")
    return "plotly", (f"{n_points:,} points per panel: drawn with plotly (paper figures with PNG/SVG export; "
                      f"the point-cloud renderer takes over above {above:,} points)")


def _rgb(colour: str) -> list[int]:
    colour = colour.lstrip("#")
    return [int(colour[i:i + 2], 16) for i in (0, 2, 4)]


def point_size(n_points: int) -> int:
    """Pixels across one point: small when there are many, so dense regions keep their shape."""
    return 2 if n_points > 200_000 else 3 if n_points > 30_000 else 5


def _names_blob(names: list[str]) -> tuple[bytes, np.ndarray]:
    """``(UTF-8 of all names end to end, uint32 offsets)``: name ``i`` is ``blob[offsets[i]:offsets[i + 1]]``.

    One join and one encode (a million ``str.encode`` calls cost seconds); a name's byte length
    is its length in characters when the whole text is ASCII, else each is encoded to count.
    """
    text = "".join(names)
    blob = text.encode("utf-8")
    if len(blob) == len(text):
        lengths = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
    else:
        lengths = np.fromiter((len(name.encode("utf-8")) for name in names), dtype=np.int64, count=len(names))
    offsets = np.zeros(len(names) + 1, dtype=np.uint32)
    np.cumsum(lengths, out=offsets[1:])
    return blob, offsets


@dataclass(frozen=True)
class PointCloud:
    """What the point-cloud component draws: binary arrays as ``bytes`` plus small JSON settings.

    ``order`` is the level view row of each packed point (the shuffled order).
    """

    order: np.ndarray
    positions_a: bytes
    positions_b: bytes
    classes: bytes
    class_bytes: int
    names: bytes
    name_offsets: bytes
    settings: dict = field(default_factory=dict)

    @property
    def n_points(self) -> int:
        return len(self.order)

    @property
    def nbytes(self) -> int:
        """Bytes of binary payload (what the websocket message carries beyond a few kB of settings)."""
        return sum(len(b) for b in (self.positions_a, self.positions_b, self.classes, self.names, self.name_offsets))

    def args(self) -> dict:
        """Keyword arguments for the component: ``bytes`` values reach the browser as binary."""
        return {"positions_a": self.positions_a, "positions_b": self.positions_b, "classes": self.classes,
                "class_bytes": self.class_bytes, "names": self.names, "name_offsets": self.name_offsets,
                "points": self.n_points, **self.settings}


def pack_point_cloud(view: LevelView, rows: np.ndarray, coords_a: np.ndarray, coords_b: np.ndarray, *,
                     model_a: str, model_b: str, title: str, caption: str = "",
                     highlight_classes: list[str] | None = None, filename: str = "projection") -> PointCloud:
    """Pack two aligned 2-D layouts of the same names for the point-cloud component.

    Parameters
    ----------
    view : LevelView
        Gives names and classes (colours by class id, as in the plotly figure).
    rows : numpy.ndarray
        View rows of the points.
    coords_a, coords_b : numpy.ndarray
        ``(len(rows), 2)`` coordinates, ``coords_b`` aligned to ``coords_a``.
    model_a, model_b : str
        Panel titles (baseline, compared).
    title, caption : str
        The figure's title (model/run, ontology, level) and the line under it.
    highlight_classes : list of str, optional
        Classes drawn in colour; the others are grey and share one legend entry.
    filename : str
        Name of the PNG the component exports (without extension).

    Returns
    -------
    PointCloud
    """
    rows = np.asarray(rows, dtype=np.int64)
    coords_a, coords_b = np.asarray(coords_a), np.asarray(coords_b)
    if coords_a.shape != (len(rows), 2) or coords_b.shape != (len(rows), 2):
        raise ValueError("the point-cloud renderer draws 2-D layouts of the same rows in both panels")
    order_index = np.random.default_rng(SHUFFLE_SEED).permutation(len(rows))
    order = rows[order_index]
    labels = view.labels[order]
    n_classes = len(view.classes)
    class_dtype = np.uint8 if n_classes <= 256 else np.uint16
    names_blob, offsets = _names_blob([view.names[r] for r in order.tolist()])
    t = theme()
    chosen = set(highlight_classes or [])
    colours = class_colours(view.classes)
    if chosen:
        colours = {c: (colour if c in chosen else t["other_classes"]) for c, colour in colours.items()}
    present = np.unique(labels)
    legend = [{"label": f"{view.classes[c]} {view.class_labels[c]}", "colour": colours[view.classes[c]]}
              for c in present if not chosen or view.classes[c] in chosen]
    others = sum(1 for c in present if chosen and view.classes[c] not in chosen)
    if others:
        legend.append({"label": f"other classes ({others})", "colour": t["other_classes"]})
    both = np.vstack([coords_a, coords_b])
    (x0, x1), (y0, y1) = bulk_range(both[:, 0]), bulk_range(both[:, 1])
    positions = [np.ascontiguousarray(c[order_index], dtype="<f4").tobytes() for c in (coords_a, coords_b)]
    settings = {
        "palette": [_rgb(colours[c]) for c in view.classes],
        "class_labels": [f"{c} · {label}" for c, label in zip(view.classes, view.class_labels)],
        "legend": legend, "bounds": [float(x0), float(x1), float(y0), float(y1)],
        "title": title, "caption": caption, "panel_titles": [model_a, model_b], "panel_colours": list(pair_colours()),
        "point_size": point_size(len(order)), "filename": filename,
    }
    cloud = PointCloud(order=order, positions_a=positions[0], positions_b=positions[1],
                       classes=labels.astype(class_dtype).tobytes(), class_bytes=np.dtype(class_dtype).itemsize,
                       names=names_blob, name_offsets=offsets.astype("<u4").tobytes(), settings=settings)
    # The component rebuilds its arrays only when this changes (a rerun resends the same element).
    digest = hashlib.sha256()
    for part in (cloud.positions_a, cloud.positions_b, cloud.classes, repr(sorted(settings.items())).encode()):
        digest.update(part)
    settings["data_id"] = digest.hexdigest()[:16]
    return cloud


def selected_view_rows(value: dict | None, cloud: PointCloud) -> np.ndarray:
    """View rows of the points the component reports selected (``{"points": [...]}``), sorted.

    Positions outside the payload (a stale answer after the data changed) are ignored.
    """
    if not value:
        return np.zeros(0, dtype=np.int64)
    points = np.asarray(value.get("points") or [], dtype=np.int64)
    points = points[(points >= 0) & (points < cloud.n_points)]
    return np.unique(cloud.order[points])
