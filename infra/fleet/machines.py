"""Compute Engine machine shapes and what GKE leaves of them to pods: one table and one parser, used by Kueue
quotas (the CPU pool and every TPU flavor's cpu/memory), the Pathways checks and the scheduling check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Memory per vCPU (MiB) of GCE predefined shapes; highcpu differs between generations.
_MIB_PER_VCPU = {"standard": 4096, "highmem": 8192, "highcpu": 1024}
_FAMILY_MIB_PER_VCPU = {
    "n1": {"standard": 3840, "highmem": 6656, "highcpu": 922},
    **{f: {"highcpu": 2048} for f in ("c2d", "c3", "c3d", "c4", "c4a", "c4d", "n4", "n4d")},
}
_MACHINE = re.compile(r"^(?P<family>[a-z][a-z0-9]*)-(?P<kind>standard|highmem|highcpu)-(?P<vcpus>\d+)$")
_CUSTOM_MACHINE = re.compile(r"^(?P<family>[a-z][a-z0-9]*-)?custom-(?P<vcpus>\d+)-(?P<mib>\d+)(-ext)?$")

@dataclass(frozen=True)
class MachineShape:
    """vCPUs and memory (MiB) of one VM."""

    vcpus: int
    memory_mib: int


@dataclass(frozen=True)
class Allocatable:
    """What pods may request on one node: GKE's allocatable cpu (millicores) and memory (MiB)."""

    millicores: int
    memory_mib: int

    def holds(self, need: "Allocatable") -> bool:
        return self.millicores >= need.millicores and self.memory_mib >= need.memory_mib


# TPU host VMs as GKE's TPU docs list them (vCPUs, memory GB): their names do not encode the shape. Hosts
# missing here (tpu7, tpu7x) have no published shape this project could check; see `gke_allocatable`.
_TPU_HOSTS_GB = {
    "ct4p-hightpu-4t": (240, 407),
    "ct5lp-hightpu-1t": (24, 48),
    "ct5lp-hightpu-4t": (112, 192),
    "ct5lp-hightpu-8t": (224, 384),
    "ct5p-hightpu-4t": (208, 448),
    "ct6e-standard-1t": (44, 176),
    "ct6e-standard-4t": (180, 720),
    "ct6e-standard-8t": (180, 1440),
}
TPU_HOST_SHAPES = {name: MachineShape(vcpus, gb * 1000**3 // 2**20) for name, (vcpus, gb) in _TPU_HOSTS_GB.items()}


def machine_shape(machine_type: str) -> MachineShape | None:
    """The shape of a GCE machine type: TPU hosts from the table, predefined and custom types from their name;
    None when neither says (shared-core types, an unknown TPU host)."""
    if machine_type in TPU_HOST_SHAPES:
        return TPU_HOST_SHAPES[machine_type]
    if m := _CUSTOM_MACHINE.fullmatch(machine_type):
        return MachineShape(int(m["vcpus"]), int(m["mib"]))
    if m := _MACHINE.fullmatch(machine_type):
        per_vcpu = _FAMILY_MIB_PER_VCPU.get(m["family"], {}).get(m["kind"], _MIB_PER_VCPU[m["kind"]])
        return MachineShape(int(m["vcpus"]), int(m["vcpus"]) * per_vcpu)
    return None


def _reserved_millicores(vcpus: int) -> int:
    """GKE's CPU reservation for system daemons: 6% of the first core, 1% of the next, 0.5% of the next two,
    0.25% of every core above four."""
    cores = [(1, 60), (1, 10), (2, 5)]
    reserved, left = 0, vcpus * 1000
    for count, per_mille in cores:
        take = min(left, count * 1000)
        reserved += take * per_mille // 1000
        left -= take
    return reserved + left * 25 // 10000


def _reserved_memory_mib(memory_mib: int) -> int:
    """GKE's memory reservation: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next
    112, 2% above 128 GiB; plus kubelet's 100 MiB eviction threshold."""
    bands = [(4096, 25), (4096, 20), (8192, 10), (114688, 6)]
    reserved, left = 0, memory_mib
    for size, percent in bands:
        take = min(left, size)
        reserved += take * percent // 100
        left -= take
    return reserved + left * 2 // 100 + 100


def gke_allocatable(shape: MachineShape) -> Allocatable:
    """What pods can request on a GKE node of `shape`: its capacity less GKE's documented reservations."""
    return Allocatable(millicores=shape.vcpus * 1000 - _reserved_millicores(shape.vcpus),
                       memory_mib=shape.memory_mib - _reserved_memory_mib(shape.memory_mib))
