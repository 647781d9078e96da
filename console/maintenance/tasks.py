"""Celery tasks of the maintenance jobs: thin shells over services.py.

Beat calls the ``*_all`` tasks; each finds the brokers through the nameservers and sends
one task per broker, so a slow or dead broker never holds up the others.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from broker_core.model.maintenance import FILE_EXPIRY, OFFSET_PERSISTENCE
from console.maintenance import services
from console.maintenance.services import BrokerTarget


@shared_task(name="console.maintenance.tasks.delay_scan_all", ignore_result=True)
def delay_scan_all() -> int:
    """Safety net: start a delay-scan chain on every master that has none; return how many."""
    started = 0
    for target in services.discover("delay_scan"):
        token = services.claim_chain(target.addr)
        if token is not None:
            delay_scan.apply_async((*target.to_args(), token))
            started += 1
    return started


@shared_task(name="console.maintenance.tasks.delay_scan", ignore_result=True)
def delay_scan(
    cluster: str, namesrv_addr: str, broker_name: str, addr: str, missing: bool, token: str
) -> None:
    """One pass of a broker's delay-scan chain; it schedules the next pass itself."""
    target = BrokerTarget(cluster, namesrv_addr, broker_name, addr, missing)

    def reschedule(seconds: float) -> None:
        # A pass that could not run in time is dropped; beat then starts a fresh chain.
        delay_scan.apply_async((*target.to_args(), token), countdown=seconds, expires=seconds + 5)

    services.delay_scan_pass(target, token, reschedule)


@shared_task(name="console.maintenance.tasks.offset_persistence_all", ignore_result=True)
def offset_persistence_all() -> int:
    """Persist offsets and record the offset history on every master."""
    targets = services.discover(OFFSET_PERSISTENCE)
    for target in targets:
        run_job.apply_async((OFFSET_PERSISTENCE, *target.to_args()), expires=60)
    return len(targets)


@shared_task(name="console.maintenance.tasks.file_expiry_all", ignore_result=True)
def file_expiry_all() -> int:
    """Let every broker check its disk and the hour, and delete expired files if either says so."""
    targets = services.discover(FILE_EXPIRY, masters_only=False)
    for target in targets:
        run_job.apply_async((FILE_EXPIRY, *target.to_args()), expires=600)
    return len(targets)


@shared_task(name="console.maintenance.tasks.run_job", ignore_result=True)
def run_job(
    job: str, cluster: str, namesrv_addr: str, broker_name: str, addr: str, missing: bool = False
) -> dict[str, Any]:
    """Run ``job`` on one broker (locked and recorded); return the run record."""
    target = BrokerTarget(cluster, namesrv_addr, broker_name, addr, missing)
    return services.run_on_broker(job, target).to_json()


@shared_task(name="console.maintenance.tasks.prune_history", ignore_result=True)
def prune_history() -> dict[str, Any]:
    """Delete offset-history partitions older than the retention."""
    return services.prune_history().to_json()
