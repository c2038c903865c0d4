"""The fleet's Cloud Monitoring dashboard: TPU use per slice group and per workload, and Kueue's queues.

Built as the Monitoring API's `Dashboard` (https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards)
and checked against the API's published schema before it is sent (`tpuplane.infra.monitoring.discovery`).

- TPU tiles read GKE's system metrics `kubernetes.io/container/accelerator/duty_cycle` and `.../memory_used` on
  `k8s_container`, grouped by pod labels, which Cloud Monitoring exposes as `metadata.user_labels`: JobSet's
  `jobset.sigs.k8s.io/jobset-name` (as Google's "GKE - TPU Monitoring Dashboard" groups them,
  https://github.com/google/cloud-tpu-monitoring-debugging/blob/4c6097b1fd/gcp_resources/gke/resources/dashboard/
  monitoring_dashboard/dashboard_json/duty-cycle.json) and tpuplane's slice-group label. GKE reports them for TPU
  containers that expose the runtime's metrics port, which every TPU container `workload render` writes does
  (`tpuplane.infra.batch.workload.TPU_METRICS_PORT`, with its sources).
- Queue tiles are PromQL (`timeSeriesQuery.prometheusQuery`, a field of the API's TimeSeriesQuery) over Kueue's
  metrics, which Managed Prometheus collects (`tpuplane.infra.monitoring.kueue_metrics`); Managed Prometheus adds
  the `cluster` label to every series. Quota usage needs Kueue's `metrics.enableClusterQueueResources`.
  https://kueue.sigs.k8s.io/docs/reference/metrics/
- Left out: node pool health. GKE's `kubernetes.io/node_pool/*` metrics could not be confirmed from a primary source.

Every value that reaches a filter or a query is quoted for that language, so a name can never change a query.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Annotated, Any, Mapping

from pydantic import Field

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.scheduling import SLICE_GROUP_LABEL
from tpuplane.infra.model import ConfigModel, FromStack, Hint
from tpuplane.infra.monitoring.discovery import body_errors
from tpuplane.infra.monitoring.kueue_metrics import SCRAPE_INTERVAL
from tpuplane.infra.naming import GKE_NAME, PROJECT_ID

COLUMNS = 12
ALIGNMENT = "60s"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
DUTY_CYCLE = "kubernetes.io/container/accelerator/duty_cycle"
MEMORY_USED = "kubernetes.io/container/accelerator/memory_used"
TPU_RESOURCE = "google.com/tpu"
DASHBOARD_ARGS = "FleetDashboardArgs"
DISPLAY_NAME_MAX = 256
_INTERVAL = re.compile(r"[1-9][0-9]{0,4}(s|m)")


class InvalidDashboard(ValueError):
    """A dashboard the Monitoring API would refuse: a bug in the builder, never user input."""


def quoted(value: str) -> str:
    """A double-quoted string literal, for Monitoring filters and PromQL alike (both escape `\\` and `"`)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _metric_tile(title: str, metric: str, group_label: str, reducer: str) -> dict[str, Any]:
    group = f"metadata.user_labels.{quoted(group_label)}"
    return {"title": title, "xyChart": {
        "chartOptions": {"mode": "COLOR"},
        "dataSets": [{
            "minAlignmentPeriod": ALIGNMENT,
            "plotType": "LINE",
            "targetAxis": "Y1",
            "timeSeriesQuery": {"timeSeriesFilter": {
                "aggregation": {"alignmentPeriod": ALIGNMENT, "perSeriesAligner": "ALIGN_MEAN"},
                "filter": f"metric.type={quoted(metric)} resource.type=\"k8s_container\" ${{ClusterName}}",
                "secondaryAggregation": {"alignmentPeriod": ALIGNMENT, "crossSeriesReducer": reducer,
                                         "groupByFields": [group], "perSeriesAligner": "ALIGN_NONE"},
            }},
        }],
        "yAxis": {"scale": "LINEAR"},
    }}


def _promql_tile(title: str, query: str) -> dict[str, Any]:
    return {"title": title, "xyChart": {
        "chartOptions": {"mode": "COLOR"},
        "dataSets": [{"minAlignmentPeriod": ALIGNMENT, "plotType": "LINE", "targetAxis": "Y1",
                      "timeSeriesQuery": {"prometheusQuery": query}}],
        "yAxis": {"scale": "LINEAR"},
    }}


def _section(title: str, subtitle: str) -> dict[str, Any]:
    return {"sectionHeader": {"dividerBelow": True, "subtitle": subtitle}, "title": title}


def kueue_queries(cluster: str) -> dict[str, str]:
    """The queue tiles' PromQL, by title: pressure (pending, admitted, wait) and TPU quota use per ClusterQueue."""
    on = f"cluster={quoted(cluster)}"
    tpu = f"{on}, resource={quoted(TPU_RESOURCE)}"
    return {
        "Pending workloads per queue": f"sum by (cluster_queue) (kueue_pending_workloads{{{on}, status=\"active\"}})",
        "Admitted workloads per queue": f"sum by (cluster_queue) (kueue_admitted_active_workloads{{{on}}})",
        "TPU quota in use per queue": (f"sum by (cluster_queue) (kueue_cluster_queue_resource_usage{{{tpu}}}) / "
                                       f"sum by (cluster_queue) (kueue_cluster_queue_nominal_quota{{{tpu}}})"),
        "Admission wait, 90th percentile": ("histogram_quantile(0.9, sum by (le, cluster_queue) "
                                            f"(rate(kueue_admission_wait_time_seconds_bucket{{{on}}}[5m])))"),
    }


def build_dashboard(*, display_name: str, cluster: str) -> dict[str, Any]:
    """The dashboard of one cluster's fleet, laid out on a 12-column mosaic, half-width tiles."""
    widgets: list[tuple[dict[str, Any], int, int]] = [
        (_section("TPU utilisation", "GKE system metrics of TPU containers"), COLUMNS, 1),
        (_metric_tile("TPU duty cycle per slice group", DUTY_CYCLE, SLICE_GROUP_LABEL, "REDUCE_MEAN"), 6, 4),
        (_metric_tile("TPU duty cycle per workload", DUTY_CYCLE, JOBSET_LABEL, "REDUCE_MEAN"), 6, 4),
        (_metric_tile("TPU memory used per slice group", MEMORY_USED, SLICE_GROUP_LABEL, "REDUCE_SUM"), 6, 4),
        (_metric_tile("TPU memory used per workload", MEMORY_USED, JOBSET_LABEL, "REDUCE_SUM"), 6, 4),
        (_section("Queues", "Kueue's metrics, collected by Managed Service for Prometheus"), COLUMNS, 1),
        *((_promql_tile(title, query), 6, 4) for title, query in kueue_queries(cluster).items()),
    ]
    tiles, x, y, row_height = [], 0, 0, 0
    for widget, width, height in widgets:
        if x + width > COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        tiles.append({"height": height, "widget": widget, "width": width, "xPos": x, "yPos": y})
        x, row_height = x + width, max(row_height, height)
    return {
        "dashboardFilters": [{"filterType": "RESOURCE_LABEL", "labelKey": "cluster_name", "stringValue": cluster,
                              "templateVariable": "ClusterName"}],
        "displayName": display_name,
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
    }


class DashboardSpec(ConfigModel):
    """`FleetDashboardArgs`, or the `tpuplane:dashboard` section (the stack supplies its project and cluster)."""

    unicode_fields = frozenset({"display_name"})  # a title for people: any letters, no control characters

    project: Annotated[text("a GCP project id, e.g. acme-ml", PROJECT_ID), FromStack("gcp:project")]
    cluster_name: Annotated[text("a GKE cluster name", GKE_NAME), FromStack("tpuplane:cluster.name")]
    display_name: str | None = Field(None, max_length=DISPLAY_NAME_MAX,
                                      description="The dashboard's title in Cloud Monitoring (default `TPU fleet "
                                                  "<cluster>`).")
    scrape_interval: Annotated[str, Hint("a Prometheus duration of seconds or minutes, 5s to 10m, e.g. 30s")] = \
        Field(SCRAPE_INTERVAL, description="How often Managed Prometheus scrapes Kueue's metrics.")

    @property
    def title(self) -> str:
        return self.display_name or f"TPU fleet {self.cluster_name}"


def _seconds(interval: str) -> int:
    return int(interval[:-1]) * (60 if interval.endswith("m") else 1)


def dashboard_problems(spec: DashboardSpec, source: Source) -> list[Problem]:
    """A title that is not blank, and a scrape interval Managed Prometheus takes."""
    problems = []
    title = spec.display_name
    if title is not None and (not title.strip() or any(unicodedata.category(c).startswith("C") for c in title)):
        problems.append(Problem(source.path("display_name"), title, "a title, not blank, of one line without "
                                "control characters"))
    if not _INTERVAL.fullmatch(spec.scrape_interval) or not 5 <= _seconds(spec.scrape_interval) <= 600:
        problems.append(Problem(source.path("scrape_interval"), spec.scrape_interval,
                                "seconds or minutes between 5s and 10m, e.g. 30s or 1m"))
    return problems


def read_dashboard(raw: object, source: Source | None = None, *, supplied: Mapping[str, Any] | None = None
                   ) -> DashboardSpec:
    """`FleetDashboardArgs`, or the `tpuplane:dashboard` section."""
    return read_checked(DashboardSpec, raw, source or Source.args(DASHBOARD_ARGS, DashboardSpec), dashboard_problems,
                        supplied=supplied)


def dashboard_errors(dashboard: dict[str, Any]) -> list[str]:
    """What the Monitoring API would refuse: fields its schema lacks, and tiles outside the mosaic's columns."""
    errors = body_errors(dashboard, api="monitoring", version="v1", schema="Dashboard")
    if errors:  # the layout is read from a well-formed body
        return errors
    layout = dashboard.get("mosaicLayout", {})
    errors += [f"Dashboard.mosaicLayout.tiles[{i}]: spans columns {t.get('xPos', 0)}..{t.get('xPos', 0) + t['width']} "
               f"of {layout['columns']}" for i, t in enumerate(layout.get("tiles", []))
               if t.get("xPos", 0) + t.get("width", 0) > layout.get("columns", COLUMNS)]
    return errors


def dashboard_json(dashboard: dict[str, Any]) -> str:
    """The `dashboard_json` of `gcp.monitoring.Dashboard`: checked, with sorted keys (byte-identical plans)."""
    errors = dashboard_errors(dashboard)
    if errors:
        raise InvalidDashboard("\n".join(errors))
    return json.dumps(dashboard, sort_keys=True, separators=(",", ":"))
