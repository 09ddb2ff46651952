"""bioviz: explore and train representations of biomedical names.

The library never imports streamlit; the app (``app.py``, ``pages/``, ``ui/``) sits on top.
"""

__version__ = "0.1.0"
