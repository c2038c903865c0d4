"""The policy pack Pulumi starts for `--policy-pack policy`.

Constructing `PolicyPack` starts the analyzer gRPC server, prints its port and blocks until Pulumi stops it,
which is why nothing else imports this file.
"""

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack

# The wrappers sit next to this file; make them importable however the pack is launched.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpuplane_pack import pulumi_policies  # noqa: E402

PolicyPack(
    name="tpuplane",
    policies=pulumi_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="Guard rails for TPU fleets on GKE: capacity modes, Kueue quota, reservations, identity, secrets.",
)
