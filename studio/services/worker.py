"""Workers: take runs from the queue, execute them with the engine, record events.

The queue itself (claiming, leases, cancel requests, thread status) is
``studio.services.runs``; a worker loops over it: requeue the runs of dead
workers, claim one run, execute it while a heartbeat holds its lease. A run
whose worker died (lease expired) is queued again and continues from its last
checkpoint. Every engine event is appended to the run's event log first and
published to the thread's group second.

Runs started through the Agent Server API carry more (``Run.kwargs``): the
worker passes their ``context``, ``interrupt_before``/``after``, durability,
client ``configurable`` keys (under the studio's own, which always win) and
asks the engine for the chunks of ``Run.stream_modes``, stored as ``stream``
events (``studio.services.run_log.StreamRecorder``) for SSE clients. When such a
run ends it stores its final values, filtered by the graph's output schema, in
``Run.output["values"]`` (what ``runs.wait`` and ``runs.join`` answer), and a
temporary thread (a stateless run's) is marked for deletion.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from typing import Any

from django.db import close_old_connections, connections, transaction
from django.db.models import F
from django.utils import timezone

from engine import events as ev
from engine.checkpoint.base import BaseCheckpointSaver
from engine.errors import GraphDrained
from engine.runtime import RunControl
from engine.testing import fault_point
from engine.types import Command, Send
from studio.models import Run, RunEvent, Thread
from studio.observability import metrics
from studio.observability.heartbeats import HeartbeatThread
from studio.observability.observer import RunObserver
from studio.presentation.diff import plain
from studio.reviews import queue as review_queue
from studio.services import model_tokens, run_log
from studio.services.db_outage import lost_database
from studio.services.group_send import drain as drain_publishes
from studio.services.registered_graphs import runnable
from studio.services.runs import (
    HEARTBEAT_SECONDS,
    LEASE_SECONDS,
    LeaseHeartbeat,
    cancel_requested,
    claim,
    requeue_expired,
    settle_thread,
    sweep_temporary_threads,
    temporary_grace,
    wait_for_work,
    wake_workers,
)
from studio.services.saver import reset_saver

__all__ = ("LEASE_SECONDS", "Worker", "start_embedded_worker")

log = logging.getLogger(__name__)

CANCEL_CHECK_SECONDS = 0.5
SWEEP_SECONDS = 5.0
"""How often a worker deletes temporary threads whose time came."""
REQUEUE_SECONDS = 1.0
"""How often a worker looks for runs whose lease ran out (their worker died) and
queues them again: before its first claim, then at most this often, not before
every claim (a busy worker claims dozens of runs a second; a lease lasts
``LEASE_SECONDS``, so a dead worker's run waits at most this much longer)."""


class _Cancelled(Exception):
    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


def _raise_if_cancelled(run: Run) -> None:
    """Raise ``_Cancelled`` when someone asked to cancel ``run`` (read fresh)."""
    action = cancel_requested(run)
    if action:
        raise _Cancelled(action)


class Worker:
    """Runs queued runs one at a time.

    Args:
        name: lease owner name (default: host:pid:random).
        lease_seconds: how long a claim lasts without a heartbeat; also how long
            the engine's lease on the run's thread lasts without renewal (the
            saver's ``lease_seconds``), so a run re-queued after its worker
            died finds the dead run's thread lease expired, or waits for it
            (runs execute with ``on_busy="wait"``).
    """

    def __init__(
        self, name: str | None = None, lease_seconds: float = LEASE_SECONDS
    ) -> None:
        self.name = (
            name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        )
        self.lease_seconds = lease_seconds
        self.stopping = threading.Event()
        self._control: RunControl | None = None
        self._swept = 0.0
        self._requeued = float("-inf")  # the first claim looks

    def drain(self, reason: str = "worker stopping") -> None:
        """Stop: claim nothing more, and end the run in progress at its next step.

        The step in progress finishes and is saved; the run then goes back to the
        queue (``pending``, lease cleared, the attempt not counted) and the next
        worker continues it from that checkpoint. SIGTERM/SIGINT of
        ``studio_worker`` call this, so a supervisor's stop timeout needs to be as
        long as the longest step, not the longest run.
        """
        self.stopping.set()
        control = self._control
        if control is not None:
            control.request_drain(reason)

    # -- queue -------------------------------------------------------------------

    def requeue_expired(self) -> int:
        """Runs whose worker stopped heartbeating go back to the queue."""
        return requeue_expired()

    def claim(self) -> Run | None:
        """Take the next due run from the queue (:func:`studio.services.runs.claim`)."""
        return claim(self.name, self.lease_seconds)

    def run_once(self) -> bool:
        """Requeue expired leases (at most every ``REQUEUE_SECONDS``), claim one
        run and execute it. False when idle.

        Every few seconds it also deletes the temporary threads whose time came.
        """
        if time.monotonic() - self._requeued >= REQUEUE_SECONDS:
            self._requeued = time.monotonic()
            self.requeue_expired()
        if time.monotonic() - self._swept >= SWEEP_SECONDS:
            self._swept = time.monotonic()
            sweep_temporary_threads()
        run = self.claim()
        if run is None:
            return False
        fault_point("after_claim", run.graph)
        self.execute(run)
        return True

    def run_forever(self, poll: float = 1.0) -> None:
        """Work until :attr:`stopping` is set (sleeping on the in-process wake-up).

        Meanwhile a heartbeat thread says this worker is alive (``/readyz``).
        """
        beats = HeartbeatThread(self.name, HEARTBEAT_SECONDS)
        beats.start()
        try:
            self._work(poll)
        finally:
            beats.stop()

    def _work(self, poll: float) -> None:
        while not self.stopping.is_set():
            try:
                worked = self.run_once()
            except Exception:
                log.exception("worker %s: run loop failed", self.name)
                worked = False
            finally:
                close_old_connections()
            if not worked:
                wait_for_work(poll)

    def close(self) -> None:
        """Release what the process holds open: the checkpointer's pool, Django's pools.

        Called when the worker stops. Left to the interpreter's exit, psycopg's pool
        threads are each given 5 s to stop, so a worker took about 20 s to exit after
        SIGTERM and a supervisor's stop timeout killed it mid-run.
        """
        drain_publishes(1.0)  # notifications still queued for the channel layer
        reset_saver()
        metrics.process_stopped()
        for alias in connections:
            conn = connections[alias]
            if conn.in_atomic_block:  # a caller's transaction (tests): not ours to end
                continue
            conn.close()
            close_pool = getattr(conn, "close_pool", None)
            if close_pool is not None:
                close_pool()

    # -- execution -----------------------------------------------------------------

    def execute(self, run: Run) -> None:
        """Run the graph for ``run``; record its events; settle run and thread.

        A :class:`RunObserver` logs, counts and traces the attempt meanwhile.
        """
        with RunObserver(run) as observer:
            self._execute(run, observer)

    def _execute(self, run: Run, observer: RunObserver) -> None:
        writer = run_log.EventWriter(run, owner=self.name)
        # stored at once (a status is urgent), and only while this worker holds
        # the run: one taken over since its claim is not run here
        writer.add("run.status", {"status": Run.Status.RUNNING, "attempt": run.attempt})
        if writer.lost:
            return
        # after that first write: if it fails, nothing beats for a run not started
        heartbeat = LeaseHeartbeat(run.run_id, self.name, self.lease_seconds)
        heartbeat.start()
        status: str = Run.Status.SUCCESS
        error: dict[str, Any] | None = None
        output: dict[str, Any] = {}
        try:
            output = self._stream(run, observer, writer)
        except GraphDrained:  # a BaseException: the worker is stopping
            heartbeat.stop()
            self._give_back(run)
            return
        except _Cancelled as cancelled:
            status = Run.Status.CANCELLED
            output = {"cancelled": cancelled.action}
        except Exception as exc:
            if lost_database(exc):
                # not the graph's failure: the run stays ``running`` until its lease
                # ends, then a worker takes it again from its last checkpoint
                log.warning("run %s: the database went away; given back", run.run_id)
                raise
            status = Run.Status.ERROR
            error = {"error": type(exc).__name__, "message": str(exc)}
            log.info(
                "run %s failed: %s",
                run.run_id,
                "".join(traceback.format_exception_only(exc)).strip(),
            )
        finally:
            heartbeat.stop()
        observer.finished(status)
        if run.kwargs and status != Run.Status.ERROR:
            output["values"] = _final_values(run)
        now = timezone.now()
        # the outcome, the thread's status and the last event in one transaction: a
        # database lost in between leaves the run ``running`` (taken again when its
        # lease ends), never ``success`` without its terminal event
        with transaction.atomic():
            ended = Run.objects.filter(
                pk=run.pk, status=Run.Status.RUNNING, lease_owner=self.name
            ).update(
                status=status,
                error=error,
                output=output,
                finished_at=now,
                updated_at=now,
                lease_owner="",
                lease_expires_at=None,
            )
            if not ended:  # our lease ran out and the run moved on: not ours to end
                log.warning("run %s: lease lost before its end", run.run_id)
                return
            settle_thread(
                run.thread_id,
                ended=(status, output),
                has_state=bool(output.get("checkpointed")),
            )
            last = RunEvent.objects.create(
                run=run,
                thread_id=run.thread_id,
                kind="run.status",
                payload={"status": status, "error": error, **output},
            )
        run_log.publish(last)
        _sync_reviews(run.thread_id, run.graph)
        if run.kwargs.get("temporary"):  # last: from now on the thread may go
            Thread.objects.filter(pk=run.thread_id).update(
                delete_after=timezone.now() + temporary_grace()
            )

    def _give_back(self, run: Run) -> None:
        """Queue a drained run again: its last step is saved, the next worker goes on.

        The attempt is not counted against ``STUDIO_RUN_MAX_ATTEMPTS`` (nothing went
        wrong), and ``output["drained"]`` tells the next worker to continue from the
        thread's head instead of sending the input (or the resume) again.
        """
        now = timezone.now()
        with transaction.atomic():
            given = Run.objects.filter(
                pk=run.pk, status=Run.Status.RUNNING, lease_owner=self.name
            ).update(
                status=Run.Status.PENDING,
                lease_owner="",
                lease_expires_at=None,
                attempt=F("attempt") - 1,
                output={"drained": True},
                updated_at=now,
            )
            if not given:  # our lease ran out and the run moved on
                log.warning("run %s: lease lost before it was given back", run.run_id)
                return
            last = RunEvent.objects.create(
                run=run,
                thread_id=run.thread_id,
                kind="run.status",
                payload={"status": Run.Status.PENDING, "drained": True},
            )
        log.info("run %s: drained at a step boundary, queued again", run.run_id)
        run_log.publish(last)
        wake_workers()

    def _config(self, run: Run) -> dict[str, Any]:
        user = run.created_by
        # a client's own configurable keys first: the studio's keys always win (the
        # API refuses the reserved ones, this keeps them safe whatever is stored)
        client = run.config.get("configurable")
        configurable: dict[str, Any] = {
            k: v
            for k, v in (client.items() if isinstance(client, dict) else ())
            if not k.startswith(("__", "studio_", "checkpoint_"))
        }
        configurable["thread_id"] = run.thread_id
        # the engine's thread lease: a run re-queued after its worker died waits
        # (at most one lease) for the dead run's lease instead of failing
        configurable["on_busy"] = "wait"
        if run.checkpoint_id:
            configurable["checkpoint_id"] = run.checkpoint_id
        if user is not None:
            configurable["studio_user"] = user.get_username()
        metadata: dict[str, Any] = {
            "run_id": run.run_id,
            "graph_id": run.graph,
            "studio_user": user.get_username() if user is not None else "",
        }
        if run.assistant_id:
            metadata.update(assistant_id=run.assistant_id, thread_id=run.thread_id)
        config: dict[str, Any] = {
            "configurable": configurable,
            "metadata": metadata,
            "run_id": run.run_id,
        }
        if "recursion_limit" in run.config:  # else the engine's default (LangGraph's)
            config["recursion_limit"] = int(run.config["recursion_limit"])
        tags = run.config.get("tags")
        if isinstance(tags, list):
            config["tags"] = [str(t) for t in tags]
        return config

    def _input(self, run: Run, graph: Any, config: dict[str, Any]) -> Any:
        if run.attempt > 1 or (run.output or {}).get("drained"):
            # a retried or drained run continues from its own last checkpoint instead
            # of restarting (or answering its interrupt a second time)
            head = graph.get_state({"configurable": {"thread_id": run.thread_id}})
            if (head.metadata or {}).get("run_id") == run.run_id:
                config["configurable"].pop("checkpoint_id", None)
                return None
        if run.command:
            return _command(run.command)
        return run.input

    def _stream(
        self, run: Run, observer: RunObserver, writer: run_log.EventWriter
    ) -> dict[str, Any]:
        graph = runnable(run.graph)
        saver = getattr(graph, "checkpointer", None)
        if isinstance(saver, BaseCheckpointSaver):  # the engine's lease lasts as ours
            saver.lease_seconds = self.lease_seconds
        config = self._config(run)
        observer.configure(config)
        graph_input = self._input(run, graph, config)
        kwargs = run.kwargs or {}
        durability = kwargs.get("durability") or run.config.get("durability")
        last_check = time.monotonic()
        outcome: dict[str, Any] = {"checkpointed": False}
        recorder = None
        options: dict[str, Any] = {}
        if kwargs:
            options = {
                "context": kwargs.get("context"),
                "interrupt_before": kwargs.get("interrupt_before"),
                "interrupt_after": kwargs.get("interrupt_after"),
            }
        if run.stream_modes:
            subgraphs = bool(kwargs.get("subgraphs"))
            recorder = run_log.StreamRecorder(run.stream_modes, subgraphs=subgraphs)
            options["stream_mode"] = list(run_log.engine_modes(run.stream_modes))
            options["subgraphs"] = subgraphs
        # every run streams its models' tokens to the thread page (token events)
        options["stream_mode"] = sorted({*options.get("stream_mode", ()), "messages"})
        tokens = model_tokens.TokenRecorder()
        control = self._control = RunControl()
        if self.stopping.is_set():  # stopped while this run was being claimed
            control.request_drain("worker stopping")
        stream = graph.stream_events(
            graph_input, config, durability=durability, control=control, **options
        )
        try:
            for event in stream:
                observer.see(event)
                if recorder is not None:
                    for payload, urgent in recorder.records(event):
                        writer.add(run_log.STREAM, payload, urgent=urgent)
                for kind, payload in tokens.records(event):
                    writer.add(kind, payload)
                if isinstance(event, ev.RunFinished):
                    outcome["interrupted"] = event.status == "interrupted"
                    continue
                if isinstance(event, ev.CheckpointSaved):
                    outcome["checkpointed"] = True
                record = run_log.as_record(event)
                if record is not None:
                    writer.add(*record)
                if time.monotonic() - last_check > CANCEL_CHECK_SECONDS:
                    last_check = time.monotonic()
                    _raise_if_cancelled(run)
        finally:
            self._control = None
            stream.close()
            writer.flush()
        _raise_if_cancelled(run)
        return outcome


def _command(data: dict[str, Any]) -> Command[Any]:
    """A queued command (JSON) as the engine's ``Command``: ``goto`` entries written
    as ``{"node", "input"}`` become ``Send``s, ``update`` pairs become tuples."""
    options: dict[str, Any] = {}
    if "resume" in data:
        options["resume"] = data["resume"]
    update = data.get("update")
    if update is not None:
        options["update"] = (
            [tuple(pair) for pair in update] if isinstance(update, list) else update
        )
    goto = data.get("goto")
    if goto is not None:
        targets = goto if isinstance(goto, list) else [goto]
        sends = [
            Send(t["node"], t.get("input")) if isinstance(t, dict) else t
            for t in targets
        ]
        options["goto"] = sends if isinstance(goto, list) else sends[0]
    return Command(**options)


def _final_values(run: Run) -> Any:
    """The thread's state after the run, filtered by the graph's output schema,
    plus ``__interrupt__`` when it waits (what ``runs.wait`` answers)."""
    try:
        graph = runnable(run.graph)
        state = graph.get_state({"configurable": {"thread_id": run.thread_id}})
    except Exception:  # the answer is a convenience: the run's outcome stands
        log.warning("run %s: could not read its final state", run.run_id, exc_info=True)
        return None
    values = state.values
    keys = graph.output_channels
    if isinstance(values, dict) and not isinstance(keys, str):
        values = {k: values[k] for k in keys if k in values}
    result = plain(values)
    if state.interrupts:
        result = dict(result) if isinstance(result, dict) else {}
        result["__interrupt__"] = plain(list(state.interrupts))
    return result


def _sync_reviews(thread_id: str, graph: str) -> None:
    """Keep the reviewer console's queue in step with the thread (governed graphs only)."""
    try:
        review_queue.sync(thread_id, graph)
    except Exception:  # the queue is an index: the next run or page load re-syncs it
        log.exception("could not sync the review queue for thread %s", thread_id)


_embedded: Worker | None = None
_embedded_lock = threading.Lock()


EXIT_DRAIN_SECONDS = 10.0
"""How long a stopping web process waits for its embedded worker's step in progress."""


def start_embedded_worker() -> Worker:
    """The in-process worker of embedded mode (one daemon thread, started once).

    When the web process exits (Daphne stopped: Ctrl-C on ``make run``), the
    worker stops as ``studio_worker`` does on SIGTERM: it claims nothing more,
    its run in progress ends at its next step and goes back to the queue (the
    next start continues it), for at most :data:`EXIT_DRAIN_SECONDS`; then it
    closes its connections. Before, the thread was cut off mid-run at the
    interpreter's exit: its notifications failed with tracebacks, and the run
    waited for its lease to end before it was taken again.
    """
    global _embedded
    with _embedded_lock:
        if _embedded is None:
            worker = Worker(name=f"embedded:{os.getpid()}")
            thread = threading.Thread(
                target=_serve_until_drained,
                args=(worker,),
                name="studio-worker",
                daemon=True,
            )
            thread.start()
            _drain_at_exit(worker, thread)
            _embedded = worker
    return _embedded


def _serve_until_drained(worker: Worker) -> None:
    try:
        worker.run_forever()
    finally:
        worker.close()  # this thread's connections, the saver, queued notifications


def _drain_at_exit(worker: Worker, thread: threading.Thread) -> None:
    """Drain ``worker`` when the interpreter exits, while it still runs threads.

    ``atexit`` would be too late: the interpreter shuts its thread pools down
    first (the embedded channel layer's sends need one). ``threading``'s own
    exit hooks run before that, last registered first.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not in this Python: the thread is cut off as before
        return

    def drain() -> None:
        worker.drain("studio stopping")
        wake_workers()  # an idle worker stops now, not at its next poll
        thread.join(EXIT_DRAIN_SECONDS)

    register(drain)
