"""The bulk DLQ resend as a long Celery task: one outcome per message, progress as it goes."""

from __future__ import annotations

from functools import partial
from typing import Any

from celery import Task, shared_task

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from console.core.brokers import admin_call
from console.core.longtasks import Progress
from console.dlq import services


async def _republish(admin: AdminClient, msg_id: str, target: str | None) -> Any:
    """Publish one stored message again, to its original topic or ``target``."""
    return await admin.republish_dead_letter(msg_id, target)


@shared_task(bind=True, name="console.dlq.tasks.long_resend_dlq", ignore_result=False, track_started=True)
def long_resend_dlq(
    self: Task,
    namesrv_addr: str,
    group: str,
    msg_ids: list[str],
    target_topic: str = "",
    long_task_id: str = "",
    topic: str = "",
    spans: list[list[Any]] | None = None,
) -> dict[str, Any]:
    """Re-publish ``msg_ids`` (offset msgIds of ``group``'s dead letters) to their original
    topic (or ``target_topic``), one at a time: no consumer needs to be online.

    With ``spans`` (``[broker, queueId, first, stop]`` of ``topic``: "select all"), the
    messages stored there are resent instead, the ones the person saw counted: the task
    first reads their ids, then goes on exactly as for chosen ones.

    Each message succeeds or fails on its own; the result lists every outcome.
    """
    if spans:
        progress = Progress(
            self,
            services.span_count(spans),
            f"finding the {services.span_count(spans):,} messages of {group}",
        )
        msg_ids = admin_call(namesrv_addr, lambda admin: services.ids_in(admin, topic, spans))
        progress.total = len(msg_ids)
        progress.note = f"resending {len(msg_ids)} message(s) of {group}"
    else:
        progress = Progress(self, len(msg_ids), f"resending {len(msg_ids)} message(s) of {group}")
    outcomes = []
    for msg_id in msg_ids:
        try:
            outcome = admin_call(
                namesrv_addr, partial(_republish, msg_id=msg_id, target=target_topic or None)
            )
            outcomes.append({"msgId": msg_id, "ok": outcome.ok, "detail": outcome.detail})
        except (AdminError, TimeoutError) as exc:
            outcomes.append({"msgId": msg_id, "ok": False, "detail": str(exc) or "timed out"})
        progress.advance(note=f"{msg_id}: {'sent' if outcomes[-1]['ok'] else 'failed'}")
    failed = sum(1 for o in outcomes if not o["ok"])
    note = f"{len(outcomes) - failed} resent, {failed} failed"
    return {**progress.meta(), "note": note, "result": outcomes}
