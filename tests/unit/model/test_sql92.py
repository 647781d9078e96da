"""SQL92 property filters: RocketMQ 4.9's grammar and evaluation, case by case.

The expectations are RocketMQ's (its filter module's ExpressionTest and ParserTest, and
expressions run through the 4.9.8 filter), restated here as facts; where Quiver is
stricter (a clear error instead of a silently ignored word) the test says so.
"""

from __future__ import annotations

import pytest

from broker_core.sql92 import Sql92SyntaxError, compile_sql92, is_sql92

CASES = [
    # (expression, properties, matches)
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "3"}, True),
    ("a in ('3','4','5')", {"a": "4"}, True),
    ("a in ('3','4','5')", {"a": "8"}, False),
    ("a not in ('3','4','5')", {"a": "8"}, True),
    ("a not in ('3','4','5')", {}, False),
    ("a between 2 and 10", {"a": "2"}, True),
    ("a between 2 and 10", {"a": "10"}, True),
    ("a between 2 and 10", {"a": "1"}, False),
    ("a between 2 and 10", {"a": "11"}, False),
    ("a not between 2 and 10", {"a": "11"}, True),
    ("a not between 2 and 10", {"a": "5"}, False),
    ("a is null", {"abc": "2"}, True),
    ("a is not null", {"abc": "2"}, False),
    ("a is not null", {"a": ""}, True),
    ("a is not null and a='hello'", {}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a=TRUE", {"a": "TRUE"}, True),
    ("a is null OR a='hello'", {}, True),
    ("a is null OR a='hello'", {"a": "abc"}, False),
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagB"}, True),
    ("a > 3.1E10", {"a": "3.1415E10"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a < b", {"a": "10", "b": "20"}, True),  # two properties order as decimals, not text
    ("a = b", {"a": "10", "b": "10.0"}, False),  # ... but are equal only as strings
    ("a > 5", {"a": "10"}, True),
    ("a > 5", {"a": "abc"}, False),  # no number: the message does not match
    ("a > 5", {}, False),
    ("a > 5 OR b = '1'", {"a": "abc", "b": "1"}, False),  # RocketMQ throws: no match at all
    ("a = 10", {"a": "10.0"}, False),  # an integer literal reads the value as an integer
    ("a = 10.0", {"a": "10"}, True),
    ("a = 10", {"a": " 10"}, False),
    ("a = 10", {"a": "+10"}, True),
    ("a <> 'abc'", {}, False),
    ("NOT a = 'x'", {"a": "y"}, True),  # SQL precedence (4.9 reads (NOT a) = 'x')
    ("NOT (a > 5)", {"a": "3"}, True),
    ("NOT (a > 5)", {}, False),  # unknown stays unknown
    ("a = 1 OR b = 2 AND c = 3", {"b": "2"}, False),
    ("a = 1 OR b = 2 AND c = 3", {"a": "1"}, True),
    ("a = -3", {"a": "-3"}, True),
    ("a >= 7L", {"a": "7"}, True),
    ("A = 1", {"a": "1"}, False),  # names are case sensitive
    ("TRUE", {}, True),
    ("FALSE OR a = 'x'", {"a": "x"}, True),
    ("a <= now", {"a": "1", "now": "2"}, True),  # now is just a property
    (
        "region = 'eu' /* the region */ AND -- and the price\n price > 100",
        {"region": "eu", "price": "120"},
        True,
    ),
    ("s CONTAINS 'bc'", {"s": "abcd"}, True),
    ("s NOT STARTSWITH 'ab'", {"s": "abcd"}, False),
    ("s ENDSWITH 'cd'", {"s": "abcd"}, True),
    ("s CONTAINS 'x'", {}, False),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), CASES)
def test_an_expression_matches_as_rocketmq_evaluates_it(
    expression: str, properties: dict[str, str], expected: bool
) -> None:
    assert compile_sql92(expression).matches(properties) is expected


REFUSED = [
    ("", "empty", 1),
    ("   ", "empty", 4),
    ("a and between 2 and 10", "expected a comparison", 3),
    (" a between 10 and 0", "lower bound is above", 4),
    ("a > 100000000000000000000000", "64-bit range", 5),
    ("a > '5'", "cannot be compared", 5),
    ("a < TRUE", "cannot be compared", 5),
    ("a = NULL", "use IS NULL", 5),
    ("a in (1, 2)", "string in single quotes", 7),
    ("'x' in ('x')", "property name on its left", 5),
    ("a = 1 xyz", "expected AND, OR or the end", 7),
    ("a != 1", "use = or <>", 3),
    ('a = "x"', "unexpected character", 5),
    ("a = 'x", "string is not closed", 5),
    ("a = 1 /* open", "comment is not closed", 7),
    ("a # 1", "unexpected character", 3),
    ("(a > 1", "expected ')'", 7),
    ("a IS 5", "expected NULL", 6),
    ("a NOT 5", "expected BETWEEN, IN", 7),
    ("a BETWEEN 1", "expected AND in BETWEEN", 12),
    ("a", "expected a comparison", 2),  # 4.9 accepts a bare property that never matches
    ("a AND b = 1", "expected a comparison", 3),
]


@pytest.mark.parametrize(("expression", "why", "position"), REFUSED)
def test_a_bad_expression_is_refused_with_where(expression: str, why: str, position: int) -> None:
    with pytest.raises(Sql92SyntaxError) as refused:
        compile_sql92(expression)
    assert why in str(refused.value)
    assert refused.value.position + 1 == position
    assert f"at position {position} " in str(refused.value)


def test_a_long_expression_is_refused_and_compiles_are_cached() -> None:
    with pytest.raises(Sql92SyntaxError, match="over 4096"):
        compile_sql92("a = 1 OR " * 600 + "a = 2")
    assert compile_sql92("x > 1") is compile_sql92("x > 1")


def test_expression_types() -> None:
    assert is_sql92("SQL92")
    assert not is_sql92("TAG") and not is_sql92("") and not is_sql92(None)


def test_nesting_past_the_limit_is_a_syntax_error_not_a_crash() -> None:
    for deep in ("(" * 100 + "a = 1" + ")" * 100, "NOT " * 100 + "a = 1"):
        with pytest.raises(Sql92SyntaxError, match="nests deeper than 64"):
            compile_sql92(deep)
    assert compile_sql92("(" * 60 + "a = 1" + ")" * 60).matches({"a": "1"})


def test_a_record_too_short_to_hold_properties_is_a_format_error() -> None:
    from broker_core.model.message import RecordFormatError, record_properties

    for size in (0, 20, 60, 91):
        with pytest.raises(RecordFormatError):
            record_properties(bytes(size))
    overrun = bytearray(120)
    overrun[84:88] = (1000).to_bytes(4, "big")  # a body longer than the record
    with pytest.raises(RecordFormatError):
        record_properties(bytes(overrun))
