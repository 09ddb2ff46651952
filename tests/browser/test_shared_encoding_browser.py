"""One encoding of a level at a time, and its progress, in headless chromium (issue 27).

The app runs with ``BIOVIZ_TEST_ENCODE_DELAY_S`` so that an encoding lasts long enough to be
watched (seconds, not the minutes of a real first encoding), on generated table levels:

* a 10,000-name table uploaded on the Home page, whose last few hundred names are not encoded
  yet: Projection shows the estimate, then a bar with names done and the time left, which moves;
* Neighbours on a level another process (standing for the background warm-up) is encoding
  waits for that encoding, showing its progress, and encodes none of the names itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from tests.browser.support import ROOT, chromium, page_problems, require_browser, streamlit_app, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DELAY_S = "0.02"  # per encoded name
MISSING = 300  # names of the 10k level not yet encoded when Projection opens


def write_table(path, classes: int, per_class: int, word: str = "disorder"):
    rows = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", f"R\t{word}\t\t\t"]
    for c in range(classes):
        rows.append(f"C{c}\tclass {c} {word}\tR\t\t")
        rows += [f"C{c}_{i}\tkind {i} of class {c} {word}\tC{c}\t\t" for i in range(per_class)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def level_names(path, home) -> list[str]:
    from bioviz.ontology import LevelSpec

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(home))  # the parsed source is cached there, not in the project
        return LevelSpec(str(path), depth=1).load().names


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """(URL, home, data folder, 10k table to upload): the app with slowed encodings; the 10k level mostly
    encoded already."""
    require_browser()
    home = tmp_path_factory.mktemp("shared-encoding-home")
    data, outside = home / "data", home / "on-the-users-machine"
    data.mkdir()
    outside.mkdir()
    big = write_table(outside / "ten_thousand.tsv", classes=20, per_class=500)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(home))
        from bioviz.models.registry import load_encoder
        from bioviz.models.vector_cache import VectorCache

        names = list(dict.fromkeys(level_names(big, home)))
        assert len(names) >= 10_000
        ready = names[:-MISSING]  # stand-in vectors: what is tested is the bar, not the vectors
        vectors = np.random.default_rng(0).normal(size=(len(ready), 384)).astype(np.float32)
        VectorCache().put(load_encoder("minilm").fingerprint, ready, vectors / np.linalg.norm(vectors, axis=1)[:, None])
    env = {"BIOVIZ_DATA_DIRS": str(data), "BIOVIZ_TEST_ENCODE_DELAY_S": DELAY_S, "BIOVIZ_WARMUP": "0"}
    with streamlit_app(home, home / "streamlit.log", env=env) as url:
        yield url, home, data, big


@pytest.fixture(scope="module")
def browser(app):
    with chromium() as browser:
        yield browser


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(60_000)
    page.goto(url, wait_until="domcontentloaded")
    return page


def bar_texts(page, pattern: re.Pattern, seconds: float, first_only: bool = False) -> list[str]:
    """Every distinct progress-bar text matching ``pattern`` seen within ``seconds`` (polled 4 times a second).

    Until the bars are gone, or with ``first_only`` until one matches.
    """
    seen: list[str] = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        bars = page.locator('[data-testid="stProgress"]')
        for i in range(bars.count()):
            try:
                text = bars.nth(i).inner_text(timeout=1000)
            except Exception:  # noqa: BLE001 - the bar was replaced between count and read
                continue
            if pattern.search(text) and text not in seen:
                seen.append(text)
        if seen and (first_only or not page.locator('[data-testid="stProgress"]').count()):
            break
        page.wait_for_timeout(250)
    return seen


def test_projection_on_an_uploaded_10k_ontology_shows_names_done_and_the_time_left(app, browser):
    url, _, _, big = app
    home_page = open_page(browser, url)
    home_page.get_by_text("Use your own ontology").click()
    home_page.locator('[data-testid="stFileUploaderDropzoneInput"][accept*=".obo"]').set_input_files(str(big))
    home_page.get_by_text(f"Loaded {big.name}: selected as the source.").wait_for(timeout=120_000)
    wait_until_idle(home_page)
    uploaded = parse_qs(urlparse(home_page.url).query)["source"][0]  # the stored upload, as links name it
    home_page.close()
    page = open_page(browser, f"{url}/Projection?source={uploaded}&depth=1&model_a=minilm&one=1&method=pca")
    texts = bar_texts(page, re.compile(r"Encoding 10,000 names with minilm: [\d,]+ done"), 120)
    assert texts, "no encoding bar was shown"
    timed = [t for t in texts if re.search(r"names/s · about \d+ (s|min) left", t)]
    assert timed, f"no bar said the time left: {texts}"
    done = [int(re.search(r"([\d,]+) done", t).group(1).replace(",", "")) for t in texts]
    assert len(set(done)) >= 3 and done == sorted(done), f"the bar did not move every few seconds: {texts}"
    wait_until_idle(page, timeout_s=300)
    assert not page_problems(page), page_problems(page)
    assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1


def test_neighbours_waits_for_the_warm_ups_encoding_instead_of_encoding_again(app, browser):
    url, home, data, _ = app
    table = write_table(data / "being_warmed.tsv", classes=6, per_class=100, word="condition")  # none cached yet
    names = level_names(table, home)
    release = home / "release-the-warm-up"
    # The stand-in warm-up claims the level, then holds it until the page has been seen waiting (a busy
    # machine may take a minute to open the page), then encodes (slowed) and says how many it encoded.
    script = ("import json, pathlib, sys, time\n"
              "from bioviz.models.cached_encoding import encode_cached\n"
              "from bioviz.models.registry import load_encoder\n"
              "from bioviz.models.shared_encoding import claim, encode_claimed\n"
              "from bioviz.ontology import LevelSpec\n"
              "names, encoder = LevelSpec(sys.argv[1], depth=1).load().names, load_encoder('minilm')\n"
              "with claim(encoder, names, owner='the background warm-up') as claimant:\n"
              "    claimant.update(0, force=True)\n"
              "    while not pathlib.Path(sys.argv[2]).exists(): claimant.beat(); time.sleep(0.2)\n"
              "    encoded = encode_claimed(encoder, names, claimant, batch_size=32)\n"
              "    encode_cached(encoder, names)\n"
              "print(json.dumps(encoded))\n")
    env = {**os.environ, "BIOVIZ_HOME": str(home), "BIOVIZ_TEST_ENCODE_DELAY_S": "0.02", "PYTHONPATH": str(ROOT),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    warm_up = subprocess.Popen([sys.executable, "-c", script, str(table), str(release)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        claims = home / "encoding"
        deadline = time.time() + 240  # a fresh python importing torch on a busy machine
        while not list(claims.glob("*.json")) and time.time() < deadline and warm_up.poll() is None:
            time.sleep(0.2)
        assert list(claims.glob("*.json")), f"the stand-in warm-up never claimed the level: {warm_up.poll()}"
        page = open_page(browser, f"{url}/Neighbours?source=being_warmed.tsv&depth=1&model_a=minilm"
                                  "&query=kind%207%20of%20class%202%20condition")
        waiting = re.compile(r"Waiting for the background warm-up, which is encoding these 600 names with minilm")
        assert bar_texts(page, waiting, 240, first_only=True), "the page did not show that it waits for the warm-up"
        release.touch()
        texts = bar_texts(page, waiting, 120)
        output = warm_up.communicate(timeout=300)[0]
        # the slowed stand-in takes about 12 s: the page follows its count as it rises, poll after poll
        counts = [int(m.group(1).replace(",", "")) for t in texts if (m := re.search(r"([\d,]+) done", t))]
        rising = [c for c in counts if c > 0]
        assert len(set(rising)) >= 2 and rising == sorted(rising), f"no rising count followed: {texts} {output[-500:]}"
        encoded = json.loads(output.strip().splitlines()[-1])
    finally:
        warm_up.kill()
    assert encoded == len(set(names)), "the warm-up encoded every name: the page encoded none of them"
    wait_until_idle(page, timeout_s=300)
    assert not page_problems(page), page_problems(page)
    assert "kind 7 of class 2 condition" in page.inner_text("body")
