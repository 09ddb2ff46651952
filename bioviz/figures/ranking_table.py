"""Neighbour rankings as the Neighbours page shows and saves them: a table and a file name.

The table spells the shaded marks out ("synonym", "class") so they survive a copy or a
colour-blind reader; the file name is shared by the CSV download and the image export.
"""

from __future__ import annotations

import pandas as pd

from bioviz.figures.export import slug
from bioviz.figures.neighbours import rank_change_text

STEM_QUERY_CHARS = 40  # of the query in a file name: enough to recognise it, short enough for any file system


def ranking_table(rows: list[dict], score_label: str = "Cosine") -> pd.DataFrame:
    """One ranking as the Neighbours page shows it: rank, name, code, match, cosine (and Δ rank).

    Two of these tables sit side by side at 1440 px, so each keeps only what a reader compares:
    the neighbour's class is left out (whether it shares the query's class is the match and
    the row's shade; the query's class is stated above the tables; the CSV and the
    image-ready table carry every neighbour's class), and so is the rank under the other model
    (Δ rank says it relative to this one).

    Parameters
    ----------
    rows : list of dict
        Rows from :func:`bioviz.search.neighbours.rank_neighbours`; ``rank_change`` is there
        when the ranking was compared with another model's.
    score_label : str
        The score column's header: ``Score`` for a hybrid ranking (not a cosine).

    Returns
    -------
    pandas.DataFrame
        Columns ``Rank, Name, Code, Match, Cosine`` (then ``Δ rank``: ``▲3``, ``▼2``, ``=``), one
        row per ranking row, in order; ``Match`` is "synonym", "class" or "".

    Examples
    --------
    >>> row = {"rank": 1, "name": "heart attack", "concept_id": "I21", "class_label": "Circulatory",
    ...        "same_concept": True, "same_class": True, "score": 0.91, "rank_change": -2}
    >>> ranking_table([row]).values.tolist()
    [[1, 'heart attack', 'I21', 'synonym', 0.91, '▼2']]
    """
    records = []
    for row in rows:
        record = {"Rank": row["rank"], "Name": row["name"], "Code": row["concept_id"],
                  "Match": "synonym" if row["same_concept"] else ("class" if row["same_class"] else ""),
                  score_label: row["score"]}
        if "rank_change" in row:
            record["Δ rank"] = rank_change_text(row)
        records.append(record)
    return pd.DataFrame(records)


# What found a partial answer's name (bioviz.search.progressive), in the words the table shows.
FOUND_BY = {"exact": "exact match", "placed": "clinical vocabulary", "both": "spelling + meaning", "dense": "meaning",
            "lexical": "spelling"}


def partial_ranking_table(rows) -> pd.DataFrame:
    """A partial answer (:class:`bioviz.search.progressive.PartialAnswer`) as the Neighbours page shows it.

    Columns ``Rank, Name, Code, Match, Found by, Cosine`` (then ``Δ rank`` when the rows were compared
    with another model's, :func:`bioviz.search.progressive.with_rank_changes`: empty for a name not in
    the other's merged ranking yet); the cosine is empty (not NaN) for a name found by its spelling
    before it was encoded.

    Examples
    --------
    >>> row = {"rank": 1, "name": "Hesitancy of micturition", "concept_id": "R39.11", "same_concept": True,
    ...        "same_class": True, "score": float("nan"), "via": "exact"}
    >>> partial_ranking_table([row]).values.tolist()
    [[1, 'Hesitancy of micturition', 'R39.11', 'synonym', 'exact match', '']]
    """
    records = []
    for row in rows:
        record = {"Rank": row["rank"], "Name": row["name"], "Code": row["concept_id"],
                  "Match": "synonym" if row["same_concept"] else ("class" if row["same_class"] else ""),
                  "Found by": FOUND_BY.get(row["via"], row["via"]),
                  "Cosine": "" if row["score"] != row["score"] else f"{row['score']:.3f}"}  # NaN: not encoded
        if "rank_change" in row:
            record["Δ rank"] = rank_change_text(row)
        records.append(record)
    return pd.DataFrame(records)


def partial_coding_table(rows) -> pd.DataFrame:
    """A partial coding (:class:`bioviz.search.progressive.PartialCoding`) as the Code terms page shows it.

    Columns ``Term, Code, Concept, Found by, Cosine, Other codes``; the cosine is empty for a concept
    found by its spelling alone, 1.000 for an exact code or name.

    Examples
    --------
    >>> row = {"term": "R39.11", "match": "exact", "code": "R39.11", "name": "Hesitancy", "score": 1.0,
    ...        "via": "exact", "others": ""}
    >>> partial_coding_table([row]).values.tolist()
    [['R39.11', 'R39.11', 'Hesitancy', 'exact match', '1.000', '']]
    """
    return pd.DataFrame([{"Term": row["term"], "Code": row["code"], "Concept": row["name"],
                          "Found by": FOUND_BY.get(row["via"], row["via"]),
                          "Cosine": "" if row["score"] != row["score"] else f"{row['score']:.3f}",  # NaN: not encoded
                          "Other codes": row["others"]} for row in rows],
                        columns=["Term", "Code", "Concept", "Found by", "Cosine", "Other codes"])


def neighbours_file_stem(query: str) -> str:
    """File name (without extension) of a query's ranking downloads.

    Examples
    --------
    >>> neighbours_file_stem("Urinary hesitancy (R39.11)")
    'neighbours-urinary-hesitancy-r39.11'
    """
    return slug("neighbours", query.lower()[:STEM_QUERY_CHARS])
