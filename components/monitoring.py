"""`FleetDashboard`: a Cloud Monitoring dashboard of the fleet, and Managed Service for Prometheus collection of
Kueue's metrics that its queue tiles read.

What it creates, decided by `tpuplane.infra.monitoring`:
- a `gcp.monitoring.Dashboard`: TPU duty cycle and memory per slice group and per workload, Kueue's pending and
  admitted workloads, TPU quota in use and admission wait per ClusterQueue; its JSON checked against the
  Monitoring API's published schema before anything is sent;
- in `kueue-system`, through the Kubernetes provider in `opts`: a PodMonitoring of Kueue's metrics endpoint and the
  service account, token Secret and RBAC it scrapes with (GKE's managed Prometheus must be on:
  `TpuClusterArgs.managed_prometheus`). Kueue must run there: pass the `BatchStack` in `opts.depends_on`.

Node pool health is not charted: GKE's `kubernetes.io/node_pool/*` metrics could not be confirmed from a primary
source.
"""

from typing import NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.monitoring.dashboard import build_dashboard, dashboard_json, read_dashboard
from tpuplane.infra.monitoring.kueue_metrics import render_kueue_metrics_collection


class FleetDashboardArgs(TypedDict):
    """A Cloud Monitoring dashboard of one cluster's TPU fleet and Kueue's queues."""

    project: str
    """The project whose Cloud Monitoring holds the dashboard (the cluster's)."""
    cluster_name: str
    """The cluster the dashboard charts."""
    display_name: NotRequired[str]
    """The dashboard's title (default `TPU fleet <cluster>`)."""
    scrape_interval: NotRequired[str]
    """How often Managed Prometheus scrapes Kueue's metrics (default 30s)."""


class FleetDashboard(pulumi.ComponentResource):
    """The fleet's dashboard and the collection of Kueue's metrics. Children: `dashboard`, and the Kubernetes
    objects of the collection."""

    dashboard_id: pulumi.Output[str]
    """The dashboard's resource id (`projects/<number>/dashboards/<id>`)."""

    def __init__(self, name: str, args: FleetDashboardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        # every check before the component registers anything (Args a stack config already read pass as they are)
        spec = read_dashboard(args)
        body = dashboard_json(build_dashboard(display_name=spec.title, cluster=spec.cluster_name))
        super().__init__("tpuplane:index:FleetDashboard", name, {}, opts)
        self.dashboard = gcp.monitoring.Dashboard(name, dashboard_json=body, project=spec.project,
                                                  opts=child_options(self, opts))
        created: list[pulumi.Resource] = []
        for manifest in render_kueue_metrics_collection(interval=spec.scrape_interval):  # in apply order
            created.append(manifest_resource(manifest, child_options(self, opts, depends_on=created[-1:])))
        self.dashboard_id = self.dashboard.id
        self.register_outputs({"dashboard_id": self.dashboard_id})
