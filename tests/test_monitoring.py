"""The fleet dashboard, checked against the Monitoring API's published schema, and Managed Prometheus collection of
Kueue's metrics, checked against the PodMonitoring CRD."""

import copy
import json

import pytest

from tpuplane.infra.k8s_validation import manifest_errors, validate_manifests
from tpuplane.infra.monitoring.dashboard import (
    InvalidDashboard,
    build_dashboard,
    dashboard_errors,
    dashboard_json,
    kueue_queries,
    quoted,
)
from tpuplane.infra.monitoring.discovery import body_errors
from tpuplane.infra.monitoring.kueue_metrics import render_kueue_metrics_collection, render_pod_monitoring


@pytest.fixture
def dashboard():
    return build_dashboard(display_name="tpuplane - train", cluster="train")


def widgets(dashboard):
    return [t["widget"] for t in dashboard["mosaicLayout"]["tiles"]]


def test_the_dashboard_is_a_body_the_monitoring_api_accepts(dashboard):
    assert dashboard_errors(dashboard) == []


@pytest.mark.parametrize(("change", "error"), [
    (lambda d: d.update(bogus=1), "Dashboard: unknown field 'bogus'"),
    (lambda d: d["mosaicLayout"].update(columns="12"), "Dashboard.mosaicLayout.columns: '12' is not a 32-bit integer"),
    (lambda d: d["mosaicLayout"]["tiles"][1]["widget"]["xyChart"]["dataSets"][0].update(plotType="PIE"),
     "plotType: 'PIE' is not one of"),
    (lambda d: d["mosaicLayout"]["tiles"][1]["widget"].update(xyChart=[]), "xyChart: [] is not an object"),
    (lambda d: d["dashboardFilters"][0].update(filterType="LABEL"), "filterType: 'LABEL' is not one of"),
    (lambda d: d["mosaicLayout"]["tiles"][1].update(xPos=8), "spans columns 8..14 of 12"),
])
def test_what_the_api_would_refuse_is_found_before_anything_is_sent(dashboard, change, error):
    broken = copy.deepcopy(dashboard)
    change(broken)

    assert any(error in e for e in dashboard_errors(broken)), dashboard_errors(broken)
    with pytest.raises(InvalidDashboard):
        dashboard_json(broken)


def test_a_map_field_checks_every_value_against_its_declared_type():
    assert body_errors({"labels": {"team": "ml"}}, api="monitoring", version="v1", schema="Dashboard") == []
    [error] = body_errors({"labels": {"a": 1}}, api="monitoring", version="v1", schema="Dashboard")
    assert error == "Dashboard.labels.a: 1 is not a string"


def test_tpu_tiles_chart_duty_cycle_and_memory_per_slice_group_and_per_workload(dashboard):
    grouped = {(w["title"], w["xyChart"]["dataSets"][0]["timeSeriesQuery"]["timeSeriesFilter"]["secondaryAggregation"]
                ["groupByFields"][0]) for w in widgets(dashboard) if "xyChart" in w
               and "timeSeriesFilter" in w["xyChart"]["dataSets"][0]["timeSeriesQuery"]}

    assert grouped == {
        ("TPU duty cycle per slice group", 'metadata.user_labels."tpuplane.dev/slice-group"'),
        ("TPU duty cycle per workload", 'metadata.user_labels."jobset.sigs.k8s.io/jobset-name"'),
        ("TPU memory used per slice group", 'metadata.user_labels."tpuplane.dev/slice-group"'),
        ("TPU memory used per workload", 'metadata.user_labels."jobset.sigs.k8s.io/jobset-name"'),
    }


def test_queue_tiles_are_promql_on_the_clusters_kueue_metrics(dashboard):
    queries = [w["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"] for w in widgets(dashboard)
               if "xyChart" in w and "prometheusQuery" in w["xyChart"]["dataSets"][0]["timeSeriesQuery"]]

    assert queries == list(kueue_queries("train").values())
    assert all('cluster="train"' in q for q in queries)
    assert "kueue_cluster_queue_nominal_quota" in queries[2] and 'resource="google.com/tpu"' in queries[2]


def test_the_cluster_filter_selects_the_stacks_cluster(dashboard):
    assert dashboard["dashboardFilters"] == [{"filterType": "RESOURCE_LABEL", "labelKey": "cluster_name",
                                              "stringValue": "train", "templateVariable": "ClusterName"}]


def test_a_hostile_name_stays_inside_its_string_literal():
    assert quoted('a"} or up{x="\\') == '"a\\"} or up{x=\\"\\\\"'
    query = kueue_queries('x"}) or vector(1) #')["Admitted workloads per queue"]
    assert query == 'sum by (cluster_queue) (kueue_admitted_active_workloads{cluster="x\\"}) or vector(1) #"})'


def test_the_json_is_deterministic_and_compact(dashboard):
    text = dashboard_json(dashboard)

    assert text == dashboard_json(build_dashboard(display_name="tpuplane - train", cluster="train"))
    assert json.loads(text) == dashboard and ": " not in text


def test_tiles_do_not_overlap(dashboard):
    cells = [(x, y) for t in dashboard["mosaicLayout"]["tiles"]
             for x in range(t["xPos"], t["xPos"] + t["width"]) for y in range(t["yPos"], t["yPos"] + t["height"])]

    assert len(cells) == len(set(cells))


# ---- Kueue's metrics --------------------------------------------------------------------------------------------


def test_the_collection_objects_pass_their_schemas_and_the_crds_rules():
    validate_manifests(render_kueue_metrics_collection())


def test_the_pod_monitoring_scrapes_kueues_https_port_with_the_readers_token():
    [endpoint] = render_pod_monitoring()["spec"]["endpoints"]

    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("metrics", "https", "/metrics")
    assert endpoint["authorization"] == {"credentials": {"secret": {"key": "token", "name": "tpuplane-kueue-metrics"}},
                                         "type": "Bearer"}


def test_the_reader_is_bound_to_kueues_metrics_role_and_the_collector_may_read_only_its_token():
    objects = {o["kind"]: o for o in render_kueue_metrics_collection()}

    assert objects["ClusterRoleBinding"]["roleRef"]["name"] == "kueue-metrics-reader"
    assert objects["Role"]["rules"] == [{"apiGroups": [""], "resourceNames": ["tpuplane-kueue-metrics"],
                                         "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]
    assert objects["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": "collector",
                                                   "namespace": "gmp-system"}]
    assert objects["Secret"]["type"] == "kubernetes.io/service-account-token" and "data" not in objects["Secret"]


@pytest.mark.parametrize(("change", "error"), [
    ({"timeout": "1m"}, "must not be greater than scrape interval"),
    ({"interval": "30 seconds"}, "Prometheus durations"),
    ({"basicAuth": {"username": "me"}}, "at most one of authorization, basicAuth and oauth2"),
    ({"authorization": {"type": "Basic"}}, 'cannot be set to "basic"'),
    ({"tls": {"ca": {"secret": {"name": "ca", "key": "ca", "namespace": "other"}}}}, "Namespace not allowed"),
])
def test_the_crds_rules_are_enforced(change, error):
    monitoring = render_pod_monitoring()
    monitoring["spec"]["endpoints"][0].update(change)

    errors = manifest_errors(monitoring)

    assert any(error in e for e in errors), errors


def test_an_int64_field_travels_as_a_decimal_string_or_a_number():
    assert body_errors({"columns": "2"}, api="monitoring", version="v1", schema="GridLayout") == []
    assert body_errors({"columns": 2}, api="monitoring", version="v1", schema="GridLayout") == []
    [error] = body_errors({"columns": "two"}, api="monitoring", version="v1", schema="GridLayout")
    assert error == "GridLayout.columns: 'two' is not a 64-bit integer in decimal"
