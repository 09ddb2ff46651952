"""No traceback reaches a remote user: the server config hides them, and bad input a page missed is one line."""

from __future__ import annotations

import tomllib

from streamlit.config import ShowErrorDetailsConfigOptions

from bioviz.errors import BiovizError
from test_app_support import DATA, ROOT, open_app, share
from ui.markdown import md


def test_the_server_shows_no_tracebacks_by_default():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    value = config.get("client", {}).get("showErrorDetails")
    hidden = {ShowErrorDetailsConfigOptions.TYPE.value, ShowErrorDetailsConfigOptions.NONE.value}
    assert value in hidden, f"client.showErrorDetails = {value!r}: tracebacks would reach the browser"
    assert config["server"]["address"] == "127.0.0.1" and config["server"]["enableXsrfProtection"] is True


def test_a_bioviz_error_a_page_did_not_catch_is_one_line_not_a_traceback(tmp_home, monkeypatch):
    import bioviz.figures

    def broken(*args, **kwargs):
        raise BiovizError("the class sizes cannot be drawn: **bold** [x](http://127.0.0.1:9/)")

    share(monkeypatch, DATA)
    monkeypatch.setattr(bioviz.figures, "class_size_bar", broken)
    at = open_app(None, {"source": str(DATA / "mini.obo")}).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == [md("the class sizes cannot be drawn: **bold** [x](http://127.0.0.1:9/)")]
    assert at.metric, "what the page drew before the error stays"
