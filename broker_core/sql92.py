"""SQL92 expressions, as subscriptions write them: ``"a > 5 AND region IN ('eu', 'us')"``.

RocketMQ's property filter (``MessageSelector.bySql``): a boolean expression over a
message's properties, evaluated by the broker for each message of a pull.  The language
is RocketMQ 4.9's subset of SQL92 (a JMS selector without arithmetic or LIKE), with the
string tests RocketMQ 5.1.3 added:

* literals: integers (``5``, ``-3``, ``7L``), decimals (``3.14``, ``1e3``), strings in single
  quotes (``'it''s'``: a quote is doubled), ``TRUE``, ``FALSE`` and ``NULL``;
* property names: letters, digits, ``_``, ``$`` and ``.``, not starting with a digit, case
  sensitive (``TAGS``, ``KEYS`` name the message's tag and keys like any property);
* ``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=``; ``[NOT] BETWEEN x AND y``; ``[NOT] IN ('a', 'b')``
  (strings only); ``IS [NOT] NULL``; ``[NOT] CONTAINS``, ``[NOT] STARTSWITH``,
  ``[NOT] ENDSWITH`` a string (RocketMQ 5.1.3);
* ``AND``, ``OR``, ``NOT``, parentheses, ``--`` and ``/* */`` comments; keywords in any case.

Evaluation follows RocketMQ's broker (facts read from ``rocketmq-filter`` 4.9.8):

* a property's value is a string; against a number it is read as a number of the
  literal's kind (``a > 5`` holds for ``a`` = ``"10"``; ``"10.0"`` is no integer), against
  ``TRUE``/``FALSE`` as Java's ``Boolean.valueOf``; two properties compare as strings with
  ``=`` and as decimals with ``<``, ``>``...;
* a missing property is NULL: a comparison with it is *unknown*, carried by ``AND``/``OR``/
  ``NOT`` as in SQL; only an expression that ends TRUE matches;
* a value that cannot be read as the number it is compared with makes the whole
  expression fail for that message: it does not match (RocketMQ evaluates by throwing).

Where RocketMQ 4.9 is looser we refuse with a clear error instead of guessing: trailing
words after a whole expression (4.9 ignores them), a bare property used as a condition
(4.9 accepts it and it never matches), ``!=`` (use ``<>``).  ``NOT`` binds
as in SQL (``NOT a > 5`` is ``NOT (a > 5)``, which 4.9 refuses to parse).

``compile_sql92(text)`` checks and compiles an expression once (cached by its text) into a
``Sql92Filter``; ``Sql92SyntaxError`` says what is wrong and at which character.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["EXPRESSION_TYPE", "Sql92Filter", "Sql92SyntaxError", "compile_sql92", "is_sql92"]

EXPRESSION_TYPE = "SQL92"
"""The ``expressionType`` of a SQL92 subscription (a tag one's is ``TAG``, or none)."""

MAX_EXPRESSION_LENGTH = 4096
"""Longest expression accepted (a subscription travels in every heartbeat)."""
MAX_NESTING = 64
"""Deepest nesting of parentheses and NOTs accepted."""

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

Value = str | int | float | bool | None
Props = Mapping[str, str]
Node = Callable[[Props], Value]
"""A compiled part: properties -> its value (a condition's is True, False or None)."""


def is_sql92(expression_type: str | None) -> bool:
    """Whether a subscription's ``expressionType`` is SQL92 (none, ``""`` or ``TAG`` is tags)."""
    return bool(expression_type) and expression_type != "TAG"


class Sql92SyntaxError(ValueError):
    """An expression that is not RocketMQ SQL92; ``position`` is the 0-based character."""

    def __init__(self, message: str, expression: str, position: int) -> None:
        shown = expression if len(expression) <= 200 else expression[:200] + "..."
        super().__init__(f"{message} at position {position + 1} of {shown!r}")
        self.position = position
        self.expression = expression


class _Unreadable(Exception):
    """A value that cannot be read as the number it is compared with: no match."""


# -- tokens ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?:
        (?P<comment>--[^\n]*|/\*.*?\*/)
      | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lLdDfF]?)
      | (?P<string>'(?:[^']|'')*')
      | (?P<name>[A-Za-z_$][A-Za-z0-9_$.]*)
      | (?P<op><>|>=|<=|=|>|<|\(|\)|,|-|\+)
      | (?P<unclosed>'|/\*)
      | (?P<bang>!=|==)
    )""",
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = frozenset(
    {
        "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE",
        "CONTAINS", "STARTSWITH", "ENDSWITH",
    }
)  # fmt: skip


@dataclass(frozen=True)
class _Token:
    kind: str  # number, string, name, keyword, op, end
    text: str
    position: int


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos].isspace():
            pos += 1
        if pos >= end:
            tokens.append(_Token("end", "", end))
            return tokens
        match = _TOKEN.match(text, pos)
        if match is None or match.lastgroup is None:
            raise Sql92SyntaxError(f"unexpected character {text[pos]!r}", text, pos)
        kind, word = match.lastgroup, match.group()
        if kind == "unclosed":
            what = "a string" if word == "'" else "a comment"
            raise Sql92SyntaxError(f"{what} is not closed", text, pos)
        if kind == "bang":
            raise Sql92SyntaxError(f"{word!r} is no SQL92 operator (use = or <>)", text, pos)
        if kind == "name" and word.upper() in _KEYWORDS:
            tokens.append(_Token("keyword", word.upper(), pos))
        elif kind != "comment":
            tokens.append(_Token(kind, word, pos))
        pos = match.end()


# -- operands ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operand:
    """What a predicate compares: a property, a literal or a parenthesised condition."""

    node: Node
    property: str | None = None
    literal: bool = False
    value: Value = None
    token: _Token | None = None


_JAVA_INT = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[dDfF]?\s*")


def _as_int(text: str) -> int:
    """Java's ``Long.valueOf``: digits and a sign, nothing else (no spaces, no ``_``)."""
    if _JAVA_INT.fullmatch(text):
        number = int(text)
        if _LONG_MIN <= number <= _LONG_MAX:
            return number
    raise _Unreadable(text)


def _as_float(text: str) -> float:
    """Java's ``Double.valueOf`` for decimal text (surrounding blanks allowed)."""
    if _JAVA_DOUBLE.fullmatch(text):
        return float(text.strip().rstrip("dDfF"))
    raise _Unreadable(text)


def _read_like(value: Value, literal: Value) -> Value:
    """``value`` (a property's string) read as the kind of ``literal`` it meets."""
    if type(value) is not str or type(literal) is str:
        return value
    if type(literal) is bool:
        return value.lower() == "true"  # Boolean.valueOf
    if type(literal) is int:
        return _as_int(value)
    return _as_float(value)


def _pair(left: Value, right: Value) -> tuple[Value, Value]:
    """Both sides as comparable values (a property's string read as the other side's kind)."""
    if type(left) is str and type(right) is not str:
        return _read_like(left, right), right
    if type(right) is str and type(left) is not str:
        return left, _read_like(right, left)
    return left, right


def _equal(left: Value, right: Value) -> bool | None:
    if left is None or right is None:
        return None
    a, b = _pair(left, right)
    if type(a) is bool or type(b) is bool:
        return a is b if type(a) is type(b) else False
    return a == b


def _order(left: Value, right: Value) -> int | None:
    """-1/0/1 for ``left`` against ``right``; None when either is NULL.  Two strings (two
    properties) compare as decimals, as RocketMQ does."""
    if left is None or right is None:
        return None
    if type(left) is str and type(right) is str:
        a: Value = _as_float(left)
        b: Value = _as_float(right)
    else:
        a, b = _pair(left, right)
    if type(a) is bool or type(b) is bool or type(a) is str or type(b) is str:
        raise _Unreadable(f"{left!r} and {right!r} cannot be ordered")
    return (a > b) - (a < b)  # type: ignore[operator]


def _truth(value: Value) -> bool | None:
    """A condition's value: a boolean, or None (unknown); anything else is no condition."""
    if value is None or type(value) is bool:
        return value
    return False


def _not_value(value: bool | None) -> bool | None:
    return None if value is None else not value


# -- parsing -----------------------------------------------------------------------------


class _Parser:
    """Recursive descent, lowest precedence first: OR, AND, NOT, then one predicate."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def _fail(self, message: str, token: _Token | None = None) -> Sql92SyntaxError:
        token = token or self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return Sql92SyntaxError(f"{message}, found {found}", self.text, token.position)

    def _keyword(self, *words: str) -> str | None:
        token = self.token
        if token.kind == "keyword" and token.text in words:
            self.at += 1
            return token.text
        return None

    def _op(self, *ops: str) -> str | None:
        token = self.token
        if token.kind == "op" and token.text in ops:
            self.at += 1
            return token.text
        return None

    def parse(self) -> Node:
        if self.token.kind == "end":
            raise self._fail("the expression is empty")
        node = self._or()
        if self.token.kind != "end":
            raise self._fail("expected AND, OR or the end")
        return node

    def _or(self) -> Node:
        node = self._and()
        while self._keyword("OR"):
            node = _junction(node, self._and(), True)
        return node

    def _and(self) -> Node:
        node = self._not()
        while self._keyword("AND"):
            node = _junction(node, self._not(), False)
        return node

    def _nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self._fail(f"the expression nests deeper than {MAX_NESTING} levels")

    def _not(self) -> Node:
        if self._keyword("NOT"):
            self._nested()
            inner = self._not()
            self.depth -= 1
            return lambda props: _not_value(_truth(inner(props)))
        return self._predicate()

    def _predicate(self) -> Node:
        left = self._operand()
        op_token = self.token
        op = self._op("=", "<>", ">", ">=", "<", "<=")
        if op is not None:
            right = self._operand()
            return _comparison(op, left, right, op_token, self.text)
        if self._keyword("IS"):
            negated = self._keyword("NOT") is not None
            if not self._keyword("NULL"):
                raise self._fail("expected NULL after IS")
            value = left.node
            if negated:
                return lambda props: value(props) is not None
            return lambda props: value(props) is None
        negated = self._keyword("NOT") is not None
        word_token = self.token
        word = self._keyword("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH")
        if word is None:
            if negated:
                raise self._fail("expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
            if left.property is not None or (left.literal and type(left.value) is not bool):
                raise self._fail("expected a comparison after the value")
            node = left.node
            return lambda props: _truth(node(props))
        if word == "BETWEEN":
            low = self._operand()
            if not self._keyword("AND"):
                raise self._fail("expected AND in BETWEEN")
            high = self._operand()
            found = _between(left, low, high, word_token, self.text)
        elif word == "IN":
            found = _in(left, self._string_list(), word_token, self.text)
        else:
            found = _string_test(word, left, self._string())
        if negated:
            return lambda props: _not_value(found(props))  # type: ignore[arg-type]
        return found

    def _operand(self) -> _Operand:
        token = self.token
        if self._op("("):
            self._nested()
            node = self._or()
            self.depth -= 1
            if self._op(")") is None:
                raise self._fail("expected ')'")
            return _Operand(node, token=token)
        if token.kind == "name":
            self.at += 1
            name = token.text
            return _Operand(lambda props: props.get(name), property=name, token=token)
        value = self._literal()
        return _Operand(lambda props: value, literal=True, value=value, token=token)

    def _literal(self) -> Value:
        sign = self._op("-", "+")
        token = self.token
        if token.kind == "number":
            self.at += 1
            number = _number_literal(token, self.text, sign == "-")
            return -number if sign == "-" else number
        if sign is not None:
            raise self._fail(f"expected a number after {sign!r}")
        if token.kind == "string":
            self.at += 1
            return token.text[1:-1].replace("''", "'")
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE", "NULL"):
            self.at += 1
            return {"TRUE": True, "FALSE": False, "NULL": None}[token.text]
        raise self._fail("expected a property name or a value")

    def _string(self) -> str:
        token = self.token
        if token.kind != "string":
            raise self._fail("expected a string in single quotes")
        self.at += 1
        return token.text[1:-1].replace("''", "'")

    def _string_list(self) -> tuple[str, ...]:
        if self._op("(") is None:
            raise self._fail("expected '(' after IN")
        values = [self._string()]
        while self._op(","):
            values.append(self._string())
        if self._op(")") is None:
            raise self._fail("expected ',' or ')' in the IN list")
        return tuple(values)


def _number_literal(token: _Token, text: str, negative: bool) -> int | float:
    raw = token.text
    if re.fullmatch(r"\d+[lL]?", raw):
        number = int(raw.rstrip("lL"))
        if number > (-_LONG_MIN if negative else _LONG_MAX):
            raise Sql92SyntaxError(f"the number {raw} is out of the 64-bit range", text, token.position)
        return number
    return float(raw.rstrip("dDfF"))


def _junction(left: Node, right: Node, decisive: bool) -> Node:
    """AND (``decisive`` False) or OR (True) in SQL's three-valued logic: a side equal to
    ``decisive`` decides; otherwise unknown if either side is, else the other value."""

    def evaluate(props: Props) -> bool | None:
        a = _truth(left(props))
        if a is decisive:
            return decisive
        b = _truth(right(props))
        if b is decisive:
            return decisive
        return None if a is None or b is None else not decisive

    return evaluate


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda order: order > 0,
    ">=": lambda order: order >= 0,
    "<": lambda order: order < 0,
    "<=": lambda order: order <= 0,
}


def _comparable(operand: _Operand, op: str, text: str) -> None:
    """RocketMQ refuses at parse time what can never compare: NULL with ``=``/``<>`` (use
    IS NULL), and strings or booleans with ``<``, ``>``..."""
    if not operand.literal or operand.token is None:
        return
    value = operand.value
    if value is None or (op in _ORDER_TESTS and type(value) in (str, bool)):
        shown = "NULL" if value is None else repr(value) if type(value) is str else str(value).upper()
        hint = " (use IS NULL)" if value is None else ""
        raise Sql92SyntaxError(f"{shown} cannot be compared with {op}{hint}", text, operand.token.position)


def _comparison(op: str, left: _Operand, right: _Operand, token: _Token, text: str) -> Node:
    _comparable(left, op, text)
    _comparable(right, op, text)
    a, b = left.node, right.node
    if op == "=":
        return lambda props: _equal(a(props), b(props))
    if op == "<>":
        return lambda props: _not_value(_equal(a(props), b(props)))
    test = _ORDER_TESTS[op]

    def evaluate(props: Props) -> bool | None:
        order = _order(a(props), b(props))
        return None if order is None else test(order)

    return evaluate


def _between(value: _Operand, low: _Operand, high: _Operand, token: _Token, text: str) -> Node:
    for bound in (value, low, high):
        _comparable(bound, ">=", text)
    if low.literal and high.literal and _order(low.value, high.value) == 1:
        raise Sql92SyntaxError(
            f"BETWEEN {low.value} AND {high.value}: the lower bound is above the upper one",
            text,
            token.position,
        )
    v, lo, hi = value.node, low.node, high.node

    def evaluate(props: Props) -> bool | None:
        current = v(props)
        above, below = _order(current, lo(props)), _order(current, hi(props))
        if above is None or below is None:
            return None
        return above >= 0 and below <= 0

    return evaluate


def _in(value: _Operand, options: tuple[str, ...], token: _Token, text: str) -> Node:
    if value.property is None:
        raise Sql92SyntaxError("IN needs a property name on its left", text, token.position)
    name, choices = value.property, frozenset(options)

    def evaluate(props: Props) -> bool | None:
        current = props.get(name)
        return None if current is None else current in choices

    return evaluate


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda value, part: part in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _string_test(word: str, value: _Operand, part: str) -> Node:
    test, node = _STRING_TESTS[word], value.node

    def evaluate(props: Props) -> bool | None:
        current = node(props)
        return test(current, part) if type(current) is str else None

    return evaluate


# -- the compiled filter -----------------------------------------------------------------


@dataclass(frozen=True)
class Sql92Filter:
    """A compiled expression: ``matches(properties)`` says whether a message is wanted."""

    expression: str
    _node: Node

    def matches(self, properties: Props) -> bool:
        """True only when the expression holds for ``properties``: unknown (a missing
        property) or a value that cannot be read as its number is no match."""
        try:
            return _truth(self._node(properties)) is True
        except _Unreadable:
            return False


@functools.lru_cache(maxsize=1024)
def compile_sql92(expression: str) -> Sql92Filter:
    """Check and compile ``expression`` (cached by its text).

    Raises:
        Sql92SyntaxError: it is empty, too long, or not RocketMQ SQL92 (with the position).
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise Sql92SyntaxError(
            f"the expression is {len(expression)} characters, over {MAX_EXPRESSION_LENGTH}",
            expression,
            MAX_EXPRESSION_LENGTH,
        )
    return Sql92Filter(expression, _Parser(expression).parse())
