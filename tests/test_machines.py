"""Machine shapes and GKE's allocatable: what Kueue's cpu/memory quotas are made of."""

import pytest

from tpuplane.infra.fleet.machines import Allocatable, MachineShape, gke_allocatable, machine_shape


@pytest.mark.parametrize("machine, shape", [("n2-standard-16", MachineShape(16, 65536)),
                                            ("n1-standard-4", MachineShape(4, 15360)),
                                            ("c3-highcpu-8", MachineShape(8, 16384)),
                                            ("e2-highmem-2", MachineShape(2, 16384)),
                                            ("n2-custom-6-20480", MachineShape(6, 20480)),
                                            ("e2-medium", None)])
def test_machine_shape_of_predefined_and_custom_types(machine, shape):
    assert machine_shape(machine) == shape


def test_machine_shape_of_a_tpu_host_comes_from_the_table():
    assert machine_shape("ct6e-standard-4t") == MachineShape(180, 720 * 1000**3 // 2**20)


def test_machine_shape_of_an_unknown_tpu_host_is_unknown():
    assert machine_shape("tpu7x-standard-4t") is None


def test_gke_allocatable_of_an_n2_standard_16_matches_gkes_table():
    """GKE documents 15.89 allocatable cores for 16 vCPUs, and reserves 5.48 GiB of 64 GiB plus 100 MiB."""
    allocatable = gke_allocatable(MachineShape(16, 65536))
    assert allocatable.millicores == 15890
    assert allocatable.memory_mib == 65536 - (1024 + 819 + 819 + 2949 + 100)


def test_gke_allocatable_of_a_one_core_machine_reserves_six_percent():
    assert gke_allocatable(MachineShape(1, 4096)) == Allocatable(millicores=940, memory_mib=4096 - 1024 - 100)
