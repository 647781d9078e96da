"""Validate what the report endpoints accept."""

from __future__ import annotations

from typing import Any, get_args

from rest_framework import serializers

from console.reports.models import ReportRun
from console.reports.services import KINDS, MAX_RANGE_MS, now_ms
from console.reports.tables import ColumnType

TOPIC = r"^[%|a-zA-Z0-9_-]{1,127}$"


class RunCreate(serializers.Serializer):
    """A report to run now: its kind and period (``since``/``until`` epoch ms, or the last
    ``lastMinutes`` minutes), and optionally the topics it covers (default: all)."""

    kind = serializers.ChoiceField(choices=KINDS)
    since = serializers.IntegerField(required=False, min_value=0)
    until = serializers.IntegerField(required=False, min_value=0)
    lastMinutes = serializers.IntegerField(  # noqa: N815 (the API's field name)
        required=False, min_value=1, max_value=MAX_RANGE_MS // 60_000
    )
    topics = serializers.ListField(
        child=serializers.RegexField(TOPIC, error_messages={"invalid": "not a topic name"}),
        required=False,
        default=list,
        max_length=500,
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "lastMinutes" in attrs:
            if "since" in attrs:
                raise serializers.ValidationError("give since/until or lastMinutes, not both")
            attrs["until"] = attrs.get("until", now_ms())
            attrs["since"] = attrs["until"] - attrs.pop("lastMinutes") * 60_000
        elif "since" not in attrs:
            raise serializers.ValidationError(
                "give the period: since (and until, default now) or lastMinutes"
            )
        attrs.setdefault("until", now_ms())
        return attrs


# What the report endpoints answer (declared for the OpenAPI document; ``ReportRun.to_json``,
# ``tables.page`` and ``compare.compare`` build it).


class PeakOut(serializers.Serializer):
    """The busiest minute (epoch ms) and the messages stored in it."""

    minute = serializers.IntegerField()
    messages = serializers.IntegerField()


class GrowingLagOut(serializers.Serializer):
    """A group and topic whose lag grew over the period: its last lag and the slope."""

    group = serializers.CharField()
    topic = serializers.CharField()
    lastLag = serializers.IntegerField()  # noqa: N815
    slopePerMinute = serializers.FloatField()  # noqa: N815


class StalledLagOut(serializers.Serializer):
    """A group and topic whose consumption stalled, and its last lag."""

    group = serializers.CharField()
    topic = serializers.CharField()
    lastLag = serializers.IntegerField()  # noqa: N815


class WorstLagOut(serializers.Serializer):
    """One of the ten group/topic pairs furthest behind at the last snapshot."""

    group = serializers.CharField()
    topic = serializers.CharField()
    lag = serializers.IntegerField()
    secondsBehind = serializers.FloatField()  # noqa: N815


KIND_WORDS = " or ".join(KINDS)


class ReportSummaryOut(serializers.Serializer):
    """A succeeded run's headline figures (the contract of ``spark_reports/outputs.py``):
    the fields of every run, then those of a traffic report (``topics`` ... ``missingMessages``)
    or of a lag report (``groups`` ... ``worst``).  Times are epoch ms."""

    kind = serializers.CharField(help_text=KIND_WORDS)
    cluster = serializers.CharField()
    since = serializers.IntegerField()
    until = serializers.IntegerField()
    inputRows = serializers.IntegerField()  # noqa: N815
    inputBytes = serializers.IntegerField()  # noqa: N815
    durationSeconds = serializers.FloatField()  # noqa: N815
    # Traffic.
    topics = serializers.ListField(child=serializers.CharField(), required=False)
    messages = serializers.IntegerField(required=False)
    bytes = serializers.IntegerField(required=False)
    consumed = serializers.IntegerField(required=False)
    producers = serializers.IntegerField(
        required=False, help_text="distinct born hosts: producer connections (ip:port)"
    )
    producerGroups = serializers.IntegerField(required=False)  # noqa: N815
    peakMinute = PeakOut(required=False, allow_null=True)  # noqa: N815
    peakByTopic = serializers.DictField(child=PeakOut(), required=False)  # noqa: N815
    retryMessages = serializers.IntegerField(required=False)  # noqa: N815
    dlqMessages = serializers.IntegerField(required=False)  # noqa: N815
    retryShare = serializers.FloatField(required=False)  # noqa: N815
    dlqShare = serializers.FloatField(required=False)  # noqa: N815
    missingMessages = serializers.IntegerField(required=False)  # noqa: N815
    # Lag.
    groups = serializers.IntegerField(required=False, help_text="how many group/topic pairs")
    growing = GrowingLagOut(many=True, required=False)
    stalled = StalledLagOut(many=True, required=False)
    worst = WorstLagOut(many=True, required=False)


class ReportRunOut(serializers.Serializer):
    """One run (``ReportRun.to_json``): what was asked (kind, period in epoch ms, topics:
    empty for every topic), by whom (null: the schedule), its status and progress (Spark
    stages; ``percent`` null before Spark says), times (ISO 8601), its input, where its
    tables are, its summary once succeeded and its error once failed."""

    id = serializers.UUIDField()
    kind = serializers.CharField(help_text=KIND_WORDS)
    cluster = serializers.CharField()
    since = serializers.IntegerField()
    until = serializers.IntegerField()
    topics = serializers.ListField(child=serializers.CharField())
    status = serializers.CharField(help_text=", ".join(s for s, _ in ReportRun.STATUSES))
    requestedBy = serializers.CharField(allow_null=True)  # noqa: N815
    scheduled = serializers.BooleanField()
    created = serializers.DateTimeField(allow_null=True)
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)
    durationSeconds = serializers.FloatField(allow_null=True)  # noqa: N815
    stagesDone = serializers.IntegerField()  # noqa: N815
    stagesTotal = serializers.IntegerField()  # noqa: N815
    percent = serializers.FloatField(allow_null=True)
    inputRows = serializers.IntegerField(allow_null=True)  # noqa: N815
    inputBytes = serializers.IntegerField(allow_null=True)  # noqa: N815
    output = serializers.CharField(allow_blank=True)
    summary = ReportSummaryOut(allow_null=True)
    error = serializers.CharField(allow_blank=True)


class ReportRunPageOut(serializers.Serializer):
    """A page of the cluster's runs, newest first, with the total count."""

    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pageSize = serializers.IntegerField()  # noqa: N815
    results = ReportRunOut(many=True)


class ReportRunQueuedOut(ReportRunOut):
    """A run asked for and queued (202), and where to follow it."""

    url = serializers.URLField()


class ReportTableLinksOut(serializers.Serializer):
    """Where to read one table: its rows as JSON, and as CSV and Parquet downloads."""

    rows = serializers.URLField()
    csv = serializers.URLField()
    parquet = serializers.URLField()


class ReportRunDetailOut(ReportRunOut):
    """One run; once succeeded, its ``tables`` by name."""

    tables = serializers.DictField(child=ReportTableLinksOut(), required=False)


class TableSortOut(serializers.Serializer):
    """The column the rows are sorted by, and the direction."""

    column = serializers.CharField()
    descending = serializers.BooleanField()


class ReportTableOut(serializers.Serializer):
    """A page of a table's rows (each an object by column; times as epoch ms), its columns
    in order and what each holds, the total count, the page's ``offset`` and ``limit``,
    and the sort (null: file order)."""

    table = serializers.CharField()
    columns = serializers.ListField(child=serializers.CharField())
    types = serializers.DictField(child=serializers.ChoiceField(choices=list(get_args(ColumnType))))
    count = serializers.IntegerField()
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    sort = TableSortOut(allow_null=True)
    rows = serializers.ListField(child=serializers.DictField())


class DeltaOut(serializers.Serializer):
    """A figure in run a and in run b, ``delta`` (b - a) and its change in percent of a;
    both null when a figure is not a number (percent also when a is 0)."""

    a = serializers.JSONField(allow_null=True)
    b = serializers.JSONField(allow_null=True)
    delta = serializers.FloatField(allow_null=True)
    percent = serializers.FloatField(allow_null=True)


class FigureDeltaOut(DeltaOut):
    """A headline figure of both runs (the summary's, and for lag reports the counts of
    ``growing`` and ``stalled``)."""

    figure = serializers.CharField()


class TopicDeltaOut(serializers.Serializer):
    """A topic's messages and bytes in both runs (traffic)."""

    topic = serializers.CharField()
    messages = DeltaOut()
    bytes = DeltaOut()


class FlagPairOut(serializers.Serializer):
    """A yes/no of both runs (null: the pair is not in that run)."""

    a = serializers.BooleanField(allow_null=True)
    b = serializers.BooleanField(allow_null=True)


class GroupDeltaOut(serializers.Serializer):
    """A group and topic in both runs: traffic reports compare ``consumed``; lag reports
    the lag trend's columns (the table's names) and its ``growing``/``stalled`` flags."""

    group = serializers.CharField()
    topic = serializers.CharField()
    consumed = DeltaOut(required=False)
    last_lag = DeltaOut(required=False)
    max_lag = DeltaOut(required=False)
    max_seconds_behind = DeltaOut(required=False)
    drain_seconds = DeltaOut(required=False)
    growing = FlagPairOut(required=False)
    stalled = FlagPairOut(required=False)


class ReportCompareOut(serializers.Serializer):
    """Run b against run a (the baseline): both runs, the headline figures side by side,
    and what changed per group and topic (and per topic, for traffic), biggest change first."""

    kind = serializers.CharField(help_text=KIND_WORDS)
    a = ReportRunOut()
    b = ReportRunOut()
    figures = FigureDeltaOut(many=True)
    topics = TopicDeltaOut(many=True, required=False)
    groups = GroupDeltaOut(many=True)


class ReportErrorOut(serializers.Serializer):
    """Why a report answer is not there: ``bad_request`` (400), ``not_found`` (404: no such
    run, table or file), ``not_ready`` (409: the run has not succeeded) or
    ``queue_unavailable`` (503: the run could not be queued; it is recorded as failed)."""

    error = serializers.CharField()
    detail = serializers.CharField()
