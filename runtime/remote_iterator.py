"""Data loading with colocated Python: every host reads its own share, the controller sees one global batch.

Under Pathways a single controller drives many TPU hosts, so an ordinary input pipeline would read the whole
global batch on the controller and ship it over the network. `RemoteIterator` instead builds the dataset on each
host, next to the accelerators, from `make_dataset(process_index, process_count)`:

1. the controller creates one `_HostIterator` per host (`colocated_python_class`, so the state lives in that
   object and dies with the controller's iterator, not in module globals);
2. each `next()` sends a zero-payload call (a sharded "device carrier" array) to every host; the host takes its
   next batch and returns it as its shards of one global array on the colocated CPU devices;
3. the controller moves that global array onto the accelerator sharding with a single `jax.device_put`.

Positions are saved by training step under `<checkpoint_dir>/<step>/iter/`: one `process_<i>-of-<n>.json` per
host, or, with `elastic=True`, one `elastic.json` written by host 0 that any process count can resume from.
A position is the number of batches consumed; restoring rebuilds the dataset and skips that many.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental.colocated_python import colocated_python_class
from jax.sharding import NamedSharding, PartitionSpec

from tpuplane.runtime.colocated import (
    ColocatedUsageError,
    HostIdentity,
    colocated_cpu_mesh,
    device_carrier,
    host_identity,
    reject_captured_devices,
    require_cloudpickle,
)

Batch = np.ndarray | dict[str, np.ndarray]
MakeDataset = Callable[[int, int], Iterable[Batch]]


class RemoteIterator:
    """Iterate global `jax.Array` batches on `sharding`, each host loading its own rows with colocated Python.

    `make_dataset(process_index, process_count)` runs on every host and yields that host's rows of each global
    batch (an array, or a dict of arrays for several inputs): the rows from its devices' first to last row of
    `global_shape` under `sharding`, which for the usual batch-split sharding is `global_shape[0] // process_count`
    rows. Every leaf of a batch becomes one global array of `global_shape` and `dtype`. A host's dataset running
    out ends the iteration. With `elastic=True`, `make_dataset` must split one global stream, so that batch k is
    the same whatever the process count.

    `make_dataset` travels to the hosts by cloudpickle and this module by import: the colocated Python image
    needs `tpuplane[runtime]` installed.
    """

    def __init__(
        self,
        make_dataset: MakeDataset,
        *,
        sharding: NamedSharding,
        global_shape: tuple[int, ...],
        dtype: Any,
        checkpoint_dir: str | os.PathLike | None = None,
        elastic: bool = False,
    ):
        require_cloudpickle()
        if not isinstance(sharding, NamedSharding):
            raise ColocatedUsageError(
                f"sharding must be a jax.sharding.NamedSharding on the accelerator mesh, got {type(sharding).__name__}."
            )
        reject_captured_devices(make_dataset, what=f"make_dataset ({getattr(make_dataset, '__qualname__', '?')})")
        self.sharding = sharding
        self.global_shape = tuple(int(n) for n in global_shape)
        self.dtype = np.dtype(dtype)
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self.elastic = elastic

        cpu_mesh = colocated_cpu_mesh(sharding.mesh)
        # The host builds its shards on the CPU twin of the accelerator sharding, so the final device_put moves
        # each shard to its own accelerator without resharding.
        cpu_sharding = NamedSharding(cpu_mesh, sharding.spec)
        self._carrier = device_carrier(sharding.mesh)
        self._replicated = NamedSharding(cpu_mesh, PartitionSpec())
        self._hosts = colocated_python_class(_HostIterator)(
            make_dataset, cpu_sharding, self.global_shape, self.dtype, self.checkpoint_dir, elastic
        )

    def __iter__(self) -> RemoteIterator:
        return self

    def __next__(self) -> jax.Array | dict[str, jax.Array]:
        # Off CPU, colocated calls run asynchronously, so a host's StopIteration may not reach the controller as
        # one: for training, prefer a repeating dataset and stop by step count.
        cpu_batch = self._hosts.next_batch(self._carrier)
        return jax.device_put(cpu_batch, self.sharding)

    def save(self, step: int) -> None:
        """Write every host's position for `step`; returns once all hosts have written."""
        self._require_checkpoint_dir()
        jax.block_until_ready(self._hosts.save(self._step_array(step)))

    def restore(self, step: int) -> None:
        """Rewind or advance every host to the position saved at `step`."""
        self._require_checkpoint_dir()
        jax.block_until_ready(self._hosts.restore(self._step_array(step)))

    def _step_array(self, step: int) -> jax.Array:
        # Colocated calls carry only arrays: the step travels as a scalar replicated on every host.
        return jax.device_put(np.int32(step), self._replicated)

    def _require_checkpoint_dir(self) -> None:
        if self.checkpoint_dir is None:
            raise ValueError("RemoteIterator was created without checkpoint_dir, so it cannot save or restore.")


class _HostIterator:
    """The per-host half of `RemoteIterator`: one object per host, created there on the first call.

    Its methods run on the host's colocated CPU devices and take and return only `jax.Array`s.
    """

    def __init__(self, make_dataset, cpu_sharding, global_shape, dtype, checkpoint_dir, elastic):
        self.make_dataset = make_dataset
        self.layout = _HostLayout(cpu_sharding, global_shape, dtype, *host_rows(cpu_sharding, global_shape))
        self.checkpoint_dir = checkpoint_dir
        self.elastic = elastic
        self.batches: Iterator[Batch] | None = None
        self.consumed = 0

    def next_batch(self, carrier: jax.Array):
        if self.batches is None:
            self.batches = open_dataset_at(self.make_dataset, host_identity(carrier), 0)
        batch = next(self.batches)
        self.consumed += 1
        return jax.tree.map(self.layout.to_global_array, batch)

    def save(self, step: jax.Array) -> jax.Array:
        write_position(self.checkpoint_dir, _scalar(step), host_identity(step), self.consumed, elastic=self.elastic)
        return step

    def restore(self, step: jax.Array) -> jax.Array:
        host = host_identity(step)
        self.consumed = read_position(self.checkpoint_dir, _scalar(step), host, elastic=self.elastic)
        self.batches = open_dataset_at(self.make_dataset, host, self.consumed)
        return step


@dataclass(frozen=True)
class _HostLayout:
    """Where this host's rows go in the global array: rows `first:last` of `global_shape` under `sharding`."""

    sharding: NamedSharding
    global_shape: tuple[int, ...]
    dtype: np.dtype
    first: int
    last: int

    def to_global_array(self, rows: Any) -> jax.Array:
        """Place this host's rows as its shards of one global CPU array; the other hosts supply theirs."""
        rows = np.asarray(rows)
        expected = (self.last - self.first, *self.global_shape[1:])
        if rows.shape != expected:
            raise ColocatedUsageError(
                f"make_dataset yielded a batch of shape {rows.shape}, but this host holds rows "
                f"{self.first}:{self.last} of the global shape {self.global_shape}, so each batch must have "
                f"shape {expected}."
            )
        return jax.make_array_from_process_local_data(
            self.sharding, rows.astype(self.dtype, copy=False), self.global_shape
        )


def _scalar(array: jax.Array) -> int:
    return int(np.asarray(array.addressable_shards[0].data))


def host_rows(sharding: NamedSharding, global_shape: tuple[int, ...]) -> tuple[int, int]:
    """The range of dim-0 rows that this process's devices hold under `sharding`."""
    spans = [
        index[0].indices(global_shape[0])[:2]
        for index in sharding.addressable_devices_indices_map(global_shape).values()
    ]
    return min(start for start, _ in spans), max(stop for _, stop in spans)


# --- Positions on disk -------------------------------------------------------------------------------------------


def position_path(checkpoint_dir: str | os.PathLike, step: int, host: HostIdentity, *, elastic: bool) -> Path:
    """`<dir>/<step>/iter/process_<i>-of-<n>.json`, or the single `<dir>/<step>/iter/elastic.json`."""
    name = "elastic.json" if elastic else f"process_{host.index}-of-{host.count}.json"
    return Path(checkpoint_dir) / str(step) / "iter" / name


def write_position(
    checkpoint_dir: str | os.PathLike, step: int, host: HostIdentity, consumed: int, *, elastic: bool
) -> None:
    """Record that `host` has consumed `consumed` batches at `step` (in elastic mode only host 0 writes)."""
    if elastic and host.index != 0:
        return
    path = position_path(checkpoint_dir, step, host, elastic=elastic)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"batches_consumed": consumed, "process_count": host.count}
    if not elastic:
        state["process_index"] = host.index
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(state, sort_keys=True) + "\n")
    partial.replace(path)  # a reader never sees half a file


def read_position(checkpoint_dir: str | os.PathLike, step: int, host: HostIdentity, *, elastic: bool) -> int:
    """The number of batches `host` had consumed at `step`."""
    path = position_path(checkpoint_dir, step, host, elastic=elastic)
    if not path.exists():
        saved = sorted(p.name for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
        hint = (
            f"found {saved}: the positions were saved with a different process count or mode; per-host positions "
            f"resume only with the same process count, save with elastic=True to change it"
            if saved
            else f"nothing was saved for step {step}"
        )
        raise FileNotFoundError(f"no iterator position at {path}; {hint}.")
    return int(json.loads(path.read_text())["batches_consumed"])


def open_dataset_at(make_dataset: MakeDataset, host: HostIdentity, consumed: int) -> Iterator[Batch]:
    """Build `host`'s dataset and skip the `consumed` batches it has already produced."""
    batches = iter(make_dataset(host.index, host.count))
    skipped = sum(1 for _ in itertools.islice(batches, consumed))
    if skipped < consumed:
        raise ValueError(f"cannot resume at batch {consumed}: the dataset of host {host.index} has only {skipped}.")
    return batches
