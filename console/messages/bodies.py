"""How a message body is shown: text with its charset, pretty JSON, hex; binary marked."""

from __future__ import annotations

import json
from typing import Any

HEX_LIMIT = 64 * 1024
TEXT_LIMIT = 1024 * 1024


def _printable(text: str) -> bool:
    """Text a person can read: no control characters other than tab and line breaks."""
    return all(c in "\t\n\r" or c >= " " for c in text)


def body_views(body: bytes, charset: str = "utf-8") -> dict[str, Any]:
    """The body as text (or None when it does not decode as ``charset`` or is not printable),
    as pretty JSON when it parses, and as hex (first 64 KiB), with ``binary`` set when it is
    not text."""
    text: str | None
    try:
        text = body.decode(charset)
        if not _printable(text):
            text = None
    except (UnicodeDecodeError, LookupError):
        text = None
    pretty = None
    if text is not None and text.strip()[:1] in ("{", "["):
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = None
    return {
        "size": len(body),
        "charset": charset,
        "binary": text is None,
        "text": text[:TEXT_LIMIT] if text is not None else None,
        "textTruncated": text is not None and len(text) > TEXT_LIMIT,
        "json": pretty,
        "hex": body[:HEX_LIMIT].hex(),
        "hexTruncated": len(body) > HEX_LIMIT,
    }
