"""What a pull keeps of a subscription: the tags' hash codes, or a SQL92 filter.

A tag subscription is filtered on the consume queue (each entry carries its tag's hash);
a SQL92 one (``MessageSelector.bySql``) on each record's properties, read from the commit
log.  SQL92 is served only with ``enablePropertyFilter`` (off by default, as in RocketMQ);
the refusals and their codes are RocketMQ's: SYSTEM_ERROR "The broker does not support
consumer to filter message by SQL92" when it is off, SUBSCRIPTION_PARSE_FAILED (with what
is wrong and where) for an expression that does not compile.  Compiled expressions are
cached by their text (``broker_core.sql92``), so a pull does not parse again.

Retry topics: a group's redeliveries come through ``%RETRY%<group>``, subscribed with
``*``.  With ``filterSupportRetry`` they are filtered too, each by the group's SQL92
subscription to the topic it was first sent to (its ``RETRY_TOPIC`` property).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker_core.errors import ResponseError
from broker_core.model.hashcode import tags_code
from broker_core.model.message import PROPERTY_RETRY_TOPIC, RecordFormatError, record_properties
from broker_core.remoting.codes import ResponseCode
from broker_core.sql92 import EXPRESSION_TYPE, Sql92Filter, Sql92SyntaxError, compile_sql92, is_sql92
from broker_core.tags import parse_tags

RecordFilter = Callable[[bytes], bool]


def not_supported_remark(expression_type: str) -> str:
    """RocketMQ's words for a filter type the broker does not serve."""
    return f"The broker does not support consumer to filter message by {expression_type}"


def sql_filter(expression: str, expression_type: str | None, *, enabled: bool) -> Sql92Filter:
    """The compiled filter of a SQL92 subscription.

    Raises:
        ResponseError: SYSTEM_ERROR when the broker does not serve SQL92 (or the type is
            unknown), SUBSCRIPTION_PARSE_FAILED when the expression does not compile.
    """
    kind = expression_type or EXPRESSION_TYPE
    if kind != EXPRESSION_TYPE or not enabled:
        raise ResponseError(not_supported_remark(kind), code=ResponseCode.SYSTEM_ERROR)
    try:
        return compile_sql92(expression)
    except Sql92SyntaxError as exc:
        raise ResponseError(
            f"the SQL92 expression is wrong: {exc}", code=ResponseCode.SUBSCRIPTION_PARSE_FAILED
        ) from None


def records_matching(flt: Sql92Filter) -> RecordFilter:
    """A store record filter: the records whose properties ``flt`` accepts (a record whose
    properties cannot be read is not handed out)."""

    def matches(record: bytes) -> bool:
        try:
            return flt.matches(record_properties(record))
        except RecordFormatError:
            return False

    return matches


def retry_records_matching(filters: Mapping[str, Sql92Filter]) -> RecordFilter:
    """For a group's retry topic: each record by the filter of the topic it came from
    (``filters`` by original topic); redeliveries of other topics all pass."""

    def matches(record: bytes) -> bool:
        try:
            props = record_properties(record)
        except RecordFormatError:
            return False
        flt = filters.get(props.get(PROPERTY_RETRY_TOPIC, ""))
        return flt is None or flt.matches(props)

    return matches


@dataclass(frozen=True)
class PullFilter:
    """How a pull's messages are chosen: by tag hash on the consume queue, by record, or not."""

    tag_codes: frozenset[int] | None = None
    records: RecordFilter | None = None


EVERYTHING = PullFilter()


def tag_filter(expression: str | None) -> PullFilter:
    tags = parse_tags(expression)
    return EVERYTHING if tags is None else PullFilter(tag_codes=frozenset(tags_code(t) for t in tags))


def pull_filter(expression: str | None, expression_type: str | None, *, enabled: bool) -> PullFilter:
    """The filter of a subscription (raises ResponseError as ``sql_filter`` does)."""
    if not is_sql92(expression_type):
        return tag_filter(expression)
    return PullFilter(
        records=records_matching(sql_filter(expression or "", expression_type, enabled=enabled))
    )
