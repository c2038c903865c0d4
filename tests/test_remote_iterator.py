"""`tpuplane.runtime.remote_iterator.RemoteIterator`: per-host data loading with colocated Python, and its positions.

Runs real JAX colocated Python on 8 CPU devices (one host: JAX runs the host side in this process after a
cloudpickle round trip). A second host cannot exist here, so the elastic tests simulate one by calling the
functions every host runs on restore (`read_position`, `open_dataset_at`) with a different `HostIdentity`.
"""

from __future__ import annotations

import json
import sys

import cpu_jax  # noqa: F401 (JAX on 8 CPU devices, set before any backend exists)
import jax

import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tpuplane.runtime.colocated import ColocatedUsageError, HostIdentity
from tpuplane.runtime.remote_iterator import (
    RemoteIterator,
    default_batches_per_call,
    open_dataset_at,
    read_position,
    write_position,
)

GLOBAL_SHAPE = (16, 4)


def global_batch(k: int) -> np.ndarray:
    """Global batch number k: distinct values in every cell and every step."""
    return np.arange(16 * 4, dtype=np.int32).reshape(GLOBAL_SHAPE) + 1000 * k


def host_rows(k: int, index: int, count: int) -> np.ndarray:
    rows = GLOBAL_SHAPE[0] // count
    return global_batch(k)[index * rows : (index + 1) * rows]


def finite_dataset(batches: int):
    """A dataset of `batches` global batches, split by host like `endless_dataset`."""

    def make_dataset(index: int, count: int):
        return (host_rows(k, index, count) for k in range(batches))

    return make_dataset


def assert_batches(iterator: RemoteIterator, ks) -> None:
    """The next batches of `iterator` are the global batches numbered `ks`."""
    for k in ks:
        np.testing.assert_array_equal(np.asarray(next(iterator)), global_batch(k))


def endless_dataset(index: int, count: int):
    """Host `index` of `count` yields its contiguous rows of each global batch, so any host count sees one stream."""
    k = 0
    while True:
        yield host_rows(k, index, count)
        k += 1


@pytest.fixture(scope="module")
def mesh() -> Mesh:
    if jax.device_count() < 8:
        pytest.skip(
            f"needs 8 CPU devices but JAX started with {jax.device_count()}: another module used JAX before this "
            f"one could set jax_num_cpu_devices; set it in tests/conftest.py"
        )
    return Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))


@pytest.fixture
def sharding(mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec("data"))


@pytest.fixture
def make_iterator(sharding, tmp_path):
    def make(make_dataset=endless_dataset, **options) -> RemoteIterator:
        options = {"global_shape": GLOBAL_SHAPE, "dtype": np.int32, "checkpoint_dir": tmp_path, **options}
        return RemoteIterator(make_dataset, sharding=sharding, **options)

    return make


# --- batches ----------------------------------------------------------------------------------------------------


def test_remote_iterator_yields_the_global_batches_in_order(make_iterator):
    iterator = make_iterator()
    for k in range(4):
        np.testing.assert_array_equal(np.asarray(next(iterator)), global_batch(k))


def test_remote_iterator_batches_are_on_the_requested_sharding(make_iterator, sharding):
    batch = next(make_iterator())
    assert batch.sharding == sharding
    assert batch.dtype == np.int32
    for shard in batch.addressable_shards:  # each of the 8 devices holds its own rows (replicated over "model")
        np.testing.assert_array_equal(np.asarray(shard.data), global_batch(0)[shard.index])


def test_remote_iterator_converts_batches_to_the_dtype(make_iterator):
    batch = next(make_iterator(lambda i, n: (host_rows(k, i, n).astype(np.int64) for k in range(1)), dtype=np.float32))
    assert batch.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(batch), global_batch(0).astype(np.float32))


def weights_and_tokens(index: int, count: int):
    """Dict batches whose leaves differ in dtype: fractional float weights and large integer token ids."""
    for rows in endless_dataset(index, count):
        yield {"weights": np.full(rows.shape, 0.5), "tokens": rows.astype(np.int64) + 100_000}


def test_remote_iterator_keeps_each_leafs_own_dtype_by_default(make_iterator):
    batch = next(make_iterator(weights_and_tokens, dtype=None))
    # As JAX holds them (64-bit data is 32-bit unless jax_enable_x64 is on).
    assert batch["weights"].dtype == jax.dtypes.canonicalize_dtype(np.float64)
    assert batch["tokens"].dtype == jax.dtypes.canonicalize_dtype(np.int64)
    np.testing.assert_array_equal(np.asarray(batch["weights"]), np.full(GLOBAL_SHAPE, 0.5))
    np.testing.assert_array_equal(np.asarray(batch["tokens"]), global_batch(0) + 100_000)


def test_remote_iterator_refuses_64_bit_data_that_jax_would_cut_to_32_bits(make_iterator):
    if jax.config.jax_enable_x64:
        pytest.skip("with jax_enable_x64, JAX holds 64-bit data as it is")
    huge = lambda i, n: iter([host_rows(0, i, n).astype(np.int64) + 2**40])  # noqa: E731
    with pytest.raises(ColocatedUsageError, match=r"int64 values for batch outside what int32 holds .*JAX holds int64 "
                                                 r"as int32 unless jax_enable_x64 is on"):
        next(make_iterator(huge, dtype=None))


def test_remote_iterator_per_leaf_dtypes_convert_each_leaf_to_its_own(make_iterator):
    batch = next(make_iterator(weights_and_tokens, dtype={"weights": np.float16, "tokens": None}))
    assert batch["weights"].dtype == np.float16
    np.testing.assert_array_equal(np.asarray(batch["weights"]), np.full(GLOBAL_SHAPE, 0.5, np.float16))
    np.testing.assert_array_equal(np.asarray(batch["tokens"]), global_batch(0) + 100_000)


@pytest.mark.parametrize(("dtype", "error"), [
    (np.int32, r"float64 values for \['weights'\], which int32 cannot hold without changing their kind "
               r"\(0.5 would become 0\)"),
    (np.float16, r"int64 values for \['tokens'\] outside what float16 holds \(100000 would become inf\); "
                 r"give \['tokens'\] a dtype that holds its values, e.g. dtype=\{'tokens': np.int64\}"),
    ({"weights": np.float32, "tokens": np.int8}, r"\['tokens'\] outside what int8 holds"),
])
def test_remote_iterator_refuses_a_dtype_that_would_change_values(make_iterator, dtype, error):
    with pytest.raises(ColocatedUsageError, match=error):
        next(make_iterator(weights_and_tokens, dtype=dtype))


def test_remote_iterator_per_leaf_dtype_of_a_key_the_batches_lack_is_refused(make_iterator):
    with pytest.raises(ColocatedUsageError, match=r"dtype names \['weight'\], which the batches"):
        next(make_iterator(weights_and_tokens, dtype={"weight": np.float32}))


@pytest.mark.parametrize("dtype", ["int33", object, "S5", [np.int32]])
def test_remote_iterator_dtype_that_jax_cannot_hold_is_refused_at_once(make_iterator, dtype):
    with pytest.raises(ColocatedUsageError, match=r"dtype\['tokens'\] must be a numpy dtype of numbers or booleans"):
        make_iterator(weights_and_tokens, dtype={"tokens": dtype})


def test_remote_iterator_batches_of_another_shape_than_the_first_are_refused(make_iterator):
    def changing(index, count):
        yield {"inputs": host_rows(0, index, count)}
        yield host_rows(1, index, count)

    iterator = make_iterator(changing, batches_per_call=1)
    next(iterator)
    with pytest.raises(ColocatedUsageError, match="every batch must have the same leaves"):
        next(iterator)


def test_remote_iterator_dict_batches_become_dicts_of_global_arrays(make_iterator, sharding):
    def inputs_and_targets(index, count):
        for rows in endless_dataset(index, count):
            yield {"inputs": rows, "targets": rows + 1}

    iterator = make_iterator(inputs_and_targets)
    next(iterator)
    batch = next(iterator)
    assert set(batch) == {"inputs", "targets"}
    np.testing.assert_array_equal(np.asarray(batch["targets"]), global_batch(1) + 1)
    assert batch["inputs"].sharding == sharding


def test_remote_iterator_stops_when_the_dataset_ends(make_iterator):
    batches = list(make_iterator(lambda i, n: (host_rows(k, i, n) for k in range(3))))
    assert len(batches) == 3
    np.testing.assert_array_equal(np.asarray(batches[-1]), global_batch(2))


def test_remote_iterators_keep_separate_positions(make_iterator):
    first, second = make_iterator(), make_iterator()
    next(first)
    next(first)
    np.testing.assert_array_equal(np.asarray(next(second)), global_batch(0))
    np.testing.assert_array_equal(np.asarray(next(first)), global_batch(2))


def test_remote_iterator_wrong_batch_shape_names_the_expected_shape(make_iterator):
    iterator = make_iterator(lambda i, n: iter([np.zeros((8, 4))]))
    with pytest.raises(ColocatedUsageError, match=r"shape \(8, 4\).*rows 0:16 .*must have shape \(16, 4\)"):
        next(iterator)


# --- several batches per colocated call --------------------------------------------------------------------------


@pytest.mark.parametrize("batches_per_call", [1, 3, 8])
def test_remote_iterator_yields_the_same_stream_whatever_the_batches_per_call(make_iterator, batches_per_call):
    assert_batches(make_iterator(batches_per_call=batches_per_call), range(10))


@pytest.mark.parametrize("batches", [5, 8])
def test_remote_iterator_stops_exactly_after_the_last_batch_of_a_group(make_iterator, batches):
    """5 batches in groups of 4 end in a partial group; 8 end on a group boundary with an empty group after it."""
    iterator = make_iterator(finite_dataset(batches), batches_per_call=4)
    assert_batches(iterator, range(batches))
    for _ in range(2):  # an exhausted iterator stays exhausted
        with pytest.raises(StopIteration):
            next(iterator)


def test_remote_iterator_partial_last_group_of_dict_batches(make_iterator):
    def inputs_and_targets(index, count):
        for rows in finite_dataset(3)(index, count):
            yield {"inputs": rows, "targets": rows + 1}

    batches = list(make_iterator(inputs_and_targets, batches_per_call=2))
    assert len(batches) == 3
    np.testing.assert_array_equal(np.asarray(batches[-1]["targets"]), global_batch(2) + 1)


def test_remote_iterator_over_an_empty_dataset_stops_at_once(make_iterator):
    with pytest.raises(StopIteration):
        next(make_iterator(finite_dataset(0), batches_per_call=4))


def test_remote_iterator_saves_the_batches_taken_not_the_batches_fetched(make_iterator, tmp_path):
    iterator = make_iterator(batches_per_call=4)
    assert_batches(iterator, range(2))  # the hosts have fetched 4
    iterator.save(2)
    saved = json.loads((tmp_path / "2" / "iter" / "process_0-of-1.json").read_text())
    assert saved["batches_consumed"] == 2


def test_remote_iterator_restore_drops_the_batches_fetched_ahead(make_iterator):
    iterator = make_iterator(batches_per_call=4)
    assert_batches(iterator, range(2))
    iterator.save(2)
    assert_batches(iterator, range(2, 7))  # into the second group
    iterator.restore(2)
    assert_batches(iterator, range(2, 7))


def test_remote_iterator_restores_an_over_fetched_position_with_another_batches_per_call(make_iterator):
    iterator = make_iterator(batches_per_call=4, elastic=True)
    assert_batches(iterator, range(5))  # 8 fetched
    iterator.save(5)
    restarted = make_iterator(batches_per_call=3, elastic=True)
    restarted.restore(5)
    assert_batches(restarted, range(5, 9))


def test_remote_iterator_restored_at_the_end_of_its_data_stops(make_iterator):
    iterator = make_iterator(finite_dataset(3), batches_per_call=2)
    assert_batches(iterator, range(3))
    iterator.save(3)
    restarted = make_iterator(finite_dataset(3), batches_per_call=2)
    restarted.restore(3)
    with pytest.raises(StopIteration):
        next(restarted)


@pytest.mark.parametrize("batches_per_call", [0, -1, 2.5, True])
def test_remote_iterator_batches_per_call_must_be_a_positive_int(make_iterator, batches_per_call):
    with pytest.raises(ValueError, match=rf"batches_per_call must be a positive int or None, got {batches_per_call}"):
        make_iterator(batches_per_call=batches_per_call)


@pytest.mark.parametrize(
    ("global_shape", "expected"),
    [((8, 1024), 8), ((256, 1024), 8), ((1024, 1024), 2), ((2048, 1024), 1), ((4096, 1024), 1)],
)
def test_default_batches_per_call_fetches_about_8_mib_per_call(global_shape, expected):
    assert default_batches_per_call(int(np.prod(global_shape)) * 4) == expected


def test_remote_iterator_default_batches_per_call_counts_every_leaf(make_iterator):
    """Two int64 leaves of a (16, 4) batch: 1 KiB per batch, so a call fetches the most, 8."""
    iterator = make_iterator(weights_and_tokens, dtype=None, batches_per_call=None)
    next(iterator)
    assert len(iterator._fetched) == 7


# --- save and restore by step -----------------------------------------------------------------------------------


def test_remote_iterator_restore_continues_exactly_after_the_saved_step(make_iterator):
    iterator = make_iterator()
    for _ in range(3):
        next(iterator)
    iterator.save(3)
    next(iterator)
    next(iterator)
    iterator.restore(3)
    for k in (3, 4, 5):
        np.testing.assert_array_equal(np.asarray(next(iterator)), global_batch(k))


def test_remote_iterator_restores_in_a_new_iterator(make_iterator):
    iterator = make_iterator()
    for _ in range(2):
        next(iterator)
    iterator.save(20)
    restarted = make_iterator()
    restarted.restore(20)
    np.testing.assert_array_equal(np.asarray(next(restarted)), global_batch(2))


def test_remote_iterator_saves_one_file_per_host(make_iterator, tmp_path):
    iterator = make_iterator()
    next(iterator)
    iterator.save(7)
    saved = tmp_path / "7" / "iter" / "process_0-of-1.json"
    assert json.loads(saved.read_text()) == {"batches_consumed": 1, "process_count": 1, "process_index": 0}
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]


def test_remote_iterator_without_checkpoint_dir_cannot_save(make_iterator):
    with pytest.raises(ValueError, match=r"without checkpoint_dir"):
        make_iterator(checkpoint_dir=None).save(1)


def test_per_host_positions_refuse_a_changed_process_count(make_iterator, tmp_path):
    iterator = make_iterator()
    next(iterator)
    iterator.save(5)
    with pytest.raises(FileNotFoundError, match=r"process_0-of-1\.json.*different process count.*elastic=True"):
        read_position(tmp_path, 5, HostIdentity(0, 2), elastic=False)


def test_restore_of_an_unsaved_step_says_nothing_was_saved(make_iterator):
    with pytest.raises(FileNotFoundError, match=r"nothing was saved for step 9"):
        make_iterator().restore(9)


# --- elastic positions ------------------------------------------------------------------------------------------


def test_elastic_iterator_saves_a_single_file(make_iterator, tmp_path):
    iterator = make_iterator(elastic=True)
    next(iterator)
    iterator.save(4)
    assert [p.name for p in (tmp_path / "4" / "iter").iterdir()] == ["elastic.json"]


def test_elastic_position_is_written_by_host_0_only(tmp_path):
    write_position(tmp_path, 1, HostIdentity(1, 2), 5, elastic=True)
    assert not (tmp_path / "1").exists()


def test_elastic_restore_with_two_hosts_continues_the_global_stream(make_iterator, tmp_path):
    iterator = make_iterator(elastic=True)
    for _ in range(3):
        next(iterator)
    iterator.save(3)

    # Simulated restart on 2 hosts: what each host's restore runs, with its own identity.
    resumed = []
    for index in range(2):
        host = HostIdentity(index, 2)
        resumed.append(next(open_dataset_at(endless_dataset, host, read_position(tmp_path, 3, host, elastic=True))))
    np.testing.assert_array_equal(np.concatenate(resumed), global_batch(3))


def test_elastic_iterator_restores_what_two_hosts_saved(make_iterator, tmp_path):
    write_position(tmp_path, 8, HostIdentity(0, 2), 6, elastic=True)  # simulated: host 0 of a 2-host run
    iterator = make_iterator(elastic=True)
    iterator.restore(8)
    np.testing.assert_array_equal(np.asarray(next(iterator)), global_batch(6))


def test_open_dataset_at_past_the_end_says_how_long_the_dataset_is():
    with pytest.raises(ValueError, match=r"resume at batch 5: the dataset of host 0 has only 2"):
        open_dataset_at(lambda i, n: iter([1, 2]), HostIdentity(0, 1), 5)


# --- usage errors -----------------------------------------------------------------------------------------------


def test_remote_iterator_needs_a_named_sharding(mesh):
    with pytest.raises(ColocatedUsageError, match=r"NamedSharding.*got Mesh"):
        RemoteIterator(endless_dataset, sharding=mesh, global_shape=GLOBAL_SHAPE, dtype=np.int32)


def test_remote_iterator_make_dataset_capturing_a_device_is_rejected(make_iterator, mesh):
    device = mesh.devices.flat[0]

    def dataset_on_device(index, count):
        return (jax.device_put(rows, device) for rows in endless_dataset(index, count))

    with pytest.raises(ColocatedUsageError, match=r"make_dataset .*captures jax\.Device"):
        make_iterator(dataset_on_device)


def test_remote_iterator_without_cloudpickle_gives_the_install_hint(make_iterator, monkeypatch):
    """Simulates an environment without cloudpickle: a None entry in sys.modules makes `import` fail."""
    monkeypatch.setitem(sys.modules, "cloudpickle", None)
    with pytest.raises(ImportError, match=r"pip install tpuplane\[runtime\]"):
        make_iterator()
