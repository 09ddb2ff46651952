"""bioviz.views.fast_umap: numba's on-disk cache for umap-learn and the background warm-up."""

import pytest

from bioviz.views import fast_umap


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_numba_cache_is_switched_on_for_umap_functions(monkeypatch):
    from numba.core.caching import NullCache
    from umap import umap_

    monkeypatch.setattr(fast_umap, "_cache_enabled", False)
    fast_umap.enable_numba_cache()
    # umap-learn declares it without cache=True; compiled code now goes to numba's disk cache
    assert not isinstance(umap_.smooth_knn_dist._cache, NullCache)
    assert fast_umap.start_warm_up() is fast_umap.start_warm_up()  # one warm-up per process
    fast_umap.start_warm_up().join(timeout=600)
