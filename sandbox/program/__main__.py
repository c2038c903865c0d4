"""The sandbox's Pulumi program: the stack's Kubernetes half (`tpuplane.components.kubernetes_half`, the very
composition `stacks/__main__.py` uses) on the sandbox's API server.

GCP's half cannot exist here, so it is given as what it would have made: the nodes' service account by its email,
the sidecar image by the reference its build pushes, the scratch bucket it would create by its name (used, never
created or granted), no IAM grant for the teams, and Kueue and JobSet as already installed (the sandbox runs them
itself). Reservations are not
looked up in Compute Engine. `tpuplane sandbox up` runs this program with the real Pulumi engine; the environment gives the stack
project's folder (relative paths in the config start there) and the sandbox's kubeconfig.
"""

import os
from pathlib import Path

import pulumi_kubernetes as k8s

from tpuplane.components.kubernetes_half import GcpSide, compose_kubernetes_half
from tpuplane.components.stack_config import read_stack_config
from tpuplane.infra.pathways.service import scratch_bucket_name
from tpuplane.infra.pathways.sidecar_image import sidecar_image_ref
from tpuplane.infra.stack import node_service_account_email
from tpuplane.runtime.sidecar_wheel import WHEEL_FOLDER, build_runtime_wheel

cfg = read_stack_config(Path(os.environ["TPUPLANE_PROJECT_DIR"]), look_up_reservations=False)
provider = k8s.Provider("sandbox", kubeconfig=Path(os.environ["KUBECONFIG"]).read_text())
build = cfg.sidecar
if build is not None:  # the context as SidecarImage builds it: the runtime wheel goes in before the tag is hashed
    build_runtime_wheel(build.context_dir / WHEEL_FOLDER)
    sidecar_image = sidecar_image_ref(build.project, build.region, build.repository_id, build.image_name,
                                      build.context_dir, build.base.ref, build.requirements_file,
                                      build.base.jax_version)
else:
    sidecar_image = cfg.pathways.sidecar_image if cfg.pathways else None
compose_kubernetes_half(cfg, GcpSide(
    provider=provider,
    node_service_account=node_service_account_email(cfg.project, cfg.cluster.name),
    sidecar_image=sidecar_image,
    install_controllers=False,
    iam_grants=False,
    existing_bucket=f"gs://{scratch_bucket_name(cfg.project, cfg.cluster.name, cfg.pathways.service_name)}"
    if cfg.pathways else None))
