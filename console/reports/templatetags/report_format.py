"""Template filters of the report pages: the one way a report's times and figures are shown
(display.py), so the summary, the charts' tables, the tables of rows and the comparison
agree."""

from __future__ import annotations

from typing import Any

from django import template

from console.reports import display

register = template.Library()


@register.filter
def report_time(value: Any) -> str:
    """A report time (epoch ms, or ISO 8601 from an older run) as a UTC date-time."""
    return display.format_time(value)


@register.filter
def report_number(value: Any) -> str:
    """A figure with thousands separators and a sensible number of decimals."""
    return display.format_number(value)


@register.filter
def report_percent(share: Any) -> str:
    """A share of 0..1 as a percentage."""
    return display.format_percent(share)


@register.filter
def report_ms(value: Any) -> int | str:
    """A report time as epoch ms (a sortable cell's ``data-sort``); '' when there is none."""
    ms = display.as_epoch_ms(value)
    return "" if ms is None else ms


@register.filter
def figure_label(name: str) -> str:
    """A summary figure's name as a person reads it."""
    return display.figure_label(name)
