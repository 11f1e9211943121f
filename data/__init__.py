"""The bundled real data, installed as ``benchcert.data``.

A regular package (not a namespace one), so that ``importlib.resources`` finds it both in an
installed wheel and in the editable install of a checkout; ``benchcert demo`` reads the
MMLU-Pro logs from it.  Which files a wheel carries: pyproject.toml's package-data.
"""
