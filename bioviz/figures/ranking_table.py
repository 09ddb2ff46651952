"""Neighbour rankings as the Neighbours page shows and saves them: a table and a file name.

The table spells the shaded marks out ("synonym", "class") so they survive a copy or a
colour-blind reader; the file name is shared by the CSV download and the image export.
"""

from __future__ import annotations

import pandas as pd

from bioviz.figures.export import slug

STEM_QUERY_CHARS = 40  # of the query in a file name: enough to recognise it, short enough for any file system


def ranking_table(rows: list[dict]) -> pd.DataFrame:
    """One ranking as a table: rank, name, code, class, match and cosine (and the rank change).

    Parameters
    ----------
    rows : list of dict
        Rows from :func:`bioviz.search.neighbours.rank_neighbours`; ``other_rank`` and
        ``rank_change`` are there when the ranking was compared with another model's.

    Returns
    -------
    pandas.DataFrame
        Columns ``Rank, Name, Code, Class, Match, Cosine`` (then ``Other rank, Δ rank``), one
        row per ranking row, in order; ``Match`` is "synonym", "class" or "".

    Examples
    --------
    >>> row = {"rank": 1, "name": "heart attack", "concept_id": "I21", "class_label": "Circulatory",
    ...        "same_concept": True, "same_class": True, "score": 0.91}
    >>> ranking_table([row])[["Name", "Match"]].values.tolist()
    [['heart attack', 'synonym']]
    """
    records = []
    for row in rows:
        record = {"Rank": row["rank"], "Name": row["name"], "Code": row["concept_id"], "Class": row["class_label"],
                  "Match": "synonym" if row["same_concept"] else ("class" if row["same_class"] else ""),
                  "Cosine": row["score"]}
        if "other_rank" in row:
            record.update({"Other rank": row["other_rank"], "Δ rank": row["rank_change"]})
        records.append(record)
    return pd.DataFrame(records)


def neighbours_file_stem(query: str) -> str:
    """File name (without extension) of a query's ranking downloads.

    Examples
    --------
    >>> neighbours_file_stem("Urinary hesitancy (R39.11)")
    'neighbours-urinary-hesitancy-r39.11'
    """
    return slug("neighbours", query.lower()[:STEM_QUERY_CHARS])
