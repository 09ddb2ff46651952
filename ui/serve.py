"""``python -m ui.serve [streamlit run options]``: start the app with its upload bounds in force from the first request.

``streamlit run app.py`` bounds the server's upload memory on the router's first run
(:func:`ui.upload_memory.install`); until someone opens a page, a scripted client could
upload without the bounds. This launcher makes the server create its upload manager
bounded before it listens (docs/security.md: the command for a shared server).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit.web.server.server as streamlit_server
from streamlit.web import cli

from ui.upload_memory import BoundedUploadedFileManager

APP = Path(__file__).resolve().parent.parent / "app.py"


def main(argv: list[str]) -> int:
    """Run ``streamlit run app.py *argv`` with :class:`BoundedUploadedFileManager` as the server's upload store."""
    # The server builds its manager from this module-level name when it is created, after this point.
    streamlit_server.MemoryUploadedFileManager = BoundedUploadedFileManager
    return cli.main(["run", str(APP), *argv], standalone_mode=False) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
