"""Folded into :mod:`nbest_eval.selection.report` (the result renders itself) and
:mod:`nbest_eval.cli.select`; this name remains only for :mod:`.select_source`'s import of
:func:`system_name` until it imports it from :mod:`nbest_eval.selection.report`."""

from ..selection.report import system_name

__all__ = ["system_name"]
