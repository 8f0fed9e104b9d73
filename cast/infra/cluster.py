"""Scaling out on Ray: a pool of Ray actors that apply one worker object to a stream of items, results in order.

This is the only module that imports ``ray`` (lazily, inside the functions that use it, so that ``cast --help``
stays instant). A *worker* is a picklable object, cheap to ship, that builds its heavy state (models, indexes) on
first use in whichever process it lands: each actor holds one copy, built once, and calls it on every item it is
given (``worker(item)``), or calls one of its methods on every actor (:meth:`WorkerPool.call_all`). The same
worker runs in this process when no Ray address is given (:func:`map_in_order`), so a local and a Ray run share
every line that computes something.

Fault tolerance is Ray's: an actor whose process or machine dies is restarted (on another machine when its own is
gone) and the call it was running is retried, up to :data:`RETRIES` times. Callers keep calls free of side
effects (the driver writes every output), so a retried call neither loses nor repeats work in the outputs.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from cast.errors import CastError
from cast.infra.extras import require_extra

Item = TypeVar("Item")

# How often an actor is restarted, and a call retried, after its process or machine died.
RETRIES = 3
# Calls queued per actor beyond the one it runs: keeps it busy while the driver handles a result, and bounds the
# items (chunks of a collection) held in memory at once.
QUEUED_PER_ACTOR = 1
# Set before Ray starts in a process: Ray's crash handler would take over SIGSEGV, which the JVM (cast/infra/jvm.py)
# raises and handles itself in normal operation, so a process running both would die at the JVM's next one.
RAY_ENVIRONMENT = {"RAY_DISABLE_FAILURE_SIGNAL_HANDLER": "1"}


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide to run.

    Attributes:
        address: ``local`` (start a Ray runtime in this process, on this machine's cores), ``auto`` (the cluster
            that ``ray start`` runs on this machine) or a head's ``HOST:PORT`` / ``ray://HOST:10001``.
        workers: the number of actors.
        cpus_per_worker: CPU cores Ray reserves for each actor.
        gpus_per_worker: GPUs Ray reserves for each actor (0: CPU actors).
    """

    address: str = "local"
    workers: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise CastError(f"--ray-workers must be at least 1, got {self.workers}")
        if self.cpus_per_worker < 0 or self.gpus_per_worker < 0:
            raise CastError("--ray-cpus-per-worker and --ray-gpus-per-worker must be >= 0")


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``, ``--ray-workers``, ``--ray-cpus-per-worker`` and ``--ray-gpus-per-worker``."""
    group = parser.add_argument_group("running on Ray (README: Running on a cluster)")
    group.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="spread the work over Ray actors: `local` (the default when no ADDRESS is given: a Ray runtime on "
        "this machine), `auto` (the cluster `ray start` joined this machine to) or the head's HOST:PORT",
    )
    group.add_argument("--ray-workers", type=int, default=2, metavar="N", help="Ray actors (default: 2)")
    group.add_argument(
        "--ray-cpus-per-worker", type=float, default=1.0, metavar="N", help="CPU cores per actor (default: 1)"
    )
    group.add_argument(
        "--ray-gpus-per-worker",
        type=float,
        metavar="N",
        help="GPUs per actor (default: 1 where the config's device is cuda, else 0)",
    )


def ray_options(args: argparse.Namespace, device: str | None = None) -> RayOptions | None:
    """The options of :func:`add_ray_arguments`, or None without ``--ray``; ``device``: the config's."""
    if args.ray is None:
        return None
    require_extra("ray", "--ray")
    gpus = args.ray_gpus_per_worker
    if gpus is None:
        gpus = 1.0 if str(device or "").startswith("cuda") else 0.0
    return RayOptions(args.ray, args.ray_workers, args.ray_cpus_per_worker, gpus)


def connect(options: RayOptions) -> Any:
    """The ``ray`` module, connected to the runtime ``options.address`` names (joined once per process).

    Raises:
        CastError: no Ray cluster answers at the address, saying how to start one.
    """
    import ray

    if ray.is_initialized():
        return ray
    for name, value in RAY_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    # Workers import the toolkit as this process does: from the installed package, or (in a checkout) the
    # folders on PYTHONPATH, which a local runtime's workers inherit.
    try:
        if options.address == "local":
            ray.init(include_dashboard=False, log_to_driver=True)
        else:
            _check_reachable(options.address)  # Ray itself retries an unreachable head for minutes
            ray.init(address=options.address, log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        raise CastError(
            f"cannot reach a Ray cluster at --ray {options.address} ({str(e).splitlines()[0]}); start one with "
            "`ray start --head` on the head machine and `ray start --address HEAD:6379` on the others, then "
            "pass --ray auto on one of them (or --ray HEAD:6379), or run on this machine alone with --ray local"
        ) from e
    return ray


def _check_reachable(address: str, seconds: float = 5.0) -> None:
    """A ConnectionError unless something listens at a ``HOST:PORT`` or ``ray://HOST:PORT`` address."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return  # `auto`, or a form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=seconds).close()
    except OSError as e:
        raise ConnectionError(f"nothing answers at {host}:{port}: {e.strerror or e}") from e


def require_path(path: str | Path, what: str, setting: str) -> Path:
    """``path`` where a worker runs, or an error naming the machine and what to mount or copy there.

    Args:
        path: a file or folder every worker must see at the same path (an index, an entity dictionary).
        what: what it is, for the message ("the index").
        setting: the option or setting that names it (``--index``).
    """
    found = Path(path).expanduser()
    if not found.exists():
        raise CastError(
            f"{what} {found} ({setting}) is not on the Ray worker at {socket.gethostname()} (PID {os.getpid()}): "
            "every worker reads it at the same path, so put it on storage all machines mount there (NFS, a "
            "Kubernetes volume) or copy it to that path on each machine"
        )
    return found


@cache
def _actor_class() -> Any:
    import ray

    @ray.remote
    class WorkerActor:
        """Holds one worker object; Ray re-creates it from the same argument when the actor restarts."""

        def __init__(self, worker: Any):
            self.worker = worker

        def apply(self, item: Any) -> Any:
            return self.worker(item)

        def call(self, method: str, *args: Any) -> Any:
            return getattr(self.worker, method)(*args)

        def pid(self) -> int:
            return os.getpid()

    return WorkerActor


class WorkerPool:
    """``options.workers`` Ray actors, each holding a copy of ``worker``.

    Args:
        worker: a picklable callable (see the module docstring).
        options: where and how wide to run.
    """

    def __init__(self, worker: Callable[[Any], Any], options: RayOptions):
        self.ray = connect(options)
        self.options = options
        actor = _actor_class().options(
            num_cpus=options.cpus_per_worker,
            num_gpus=options.gpus_per_worker,
            max_restarts=RETRIES,
            max_task_retries=RETRIES,
        )
        # Shipped once, not once per actor; held for as long as the pool, since a restarted actor reads it again.
        self.worker_ref = self.ray.put(worker)
        self.actors = [actor.remote(self.worker_ref) for _ in range(options.workers)]

    def call_all(self, method: str, *args: Any) -> list[Any]:
        """``worker.method(*args)`` on every actor (e.g. to build each one's models before the first item)."""
        return self._get([actor.call.remote(method, *args) for actor in self.actors])

    def map(self, items: Iterable[Item]) -> Iterator[tuple[Item, Any]]:
        """``(item, worker(item))`` for each item, in the order of ``items``, spread over the actors.

        At most ``workers * (1 + QUEUED_PER_ACTOR)`` items are in flight, so a collection streams through.
        """
        pending: deque[tuple[Item, Any]] = deque()
        window = len(self.actors) * (1 + QUEUED_PER_ACTOR)
        for number, item in enumerate(items):
            if len(pending) == window:
                done, ref = pending.popleft()
                yield done, self._get(ref)
            pending.append((item, self.actors[number % len(self.actors)].apply.remote(item)))
        while pending:
            done, ref = pending.popleft()
            yield done, self._get(ref)

    def shutdown(self) -> None:
        """Stop the actors (the Ray runtime stays up for the rest of this process)."""
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)

    def _get(self, refs: Any) -> Any:
        """``ray.get``, with a worker's own error (a :class:`CastError`: a missing index, a bad topic) raised as
        itself, one line, rather than wrapped in Ray's traceback."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, CastError):
                raise e.cause from None
            raise


def map_in_order(
    worker: Callable[[Item], Any], items: Iterable[Item], options: RayOptions | None
) -> Iterator[tuple[Item, Any]]:
    """``(item, worker(item))`` for each item in order: in this process, or on Ray actors with ``options``."""
    if options is None:
        for item in items:
            yield item, worker(item)
        return
    pool = WorkerPool(worker, options)
    try:
        yield from pool.map(items)
    finally:
        pool.shutdown()
