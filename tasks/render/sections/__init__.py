"""The audit report's sections, one module per feature.

An analysis computes its tables and notes and passes them to its module here, which returns the
:class:`~benchcert.tasks.render.report.Section` objects of report.html; so every piece of HTML is
made under ``tasks/render/`` and every string from a log goes through
:func:`~benchcert.tasks.render.escape.escape` (``tests/project/test_layout_render.py``).
"""
