"""Template filters of the maintenance page."""

from __future__ import annotations

import datetime as dt

from django import template

register = template.Library()


@register.filter
def epoch_ms(value: object) -> str:
    """Epoch milliseconds as a UTC time stamp (``2026-11-23 14:05:09.123Z``); '' when absent."""
    if not isinstance(value, int | float) or value <= 0:
        return ""
    moment = dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
