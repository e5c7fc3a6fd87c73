"""The Koordinator fixtures the compatibility tests read are in the repository and are what the README says."""

import re
from typing import Any

import pytest
import yaml

from tests.fixtures import FIXTURES, KOORDINATOR, KOORDINATOR_CRDS


def _crd(file_name: str) -> dict[str, Any]:
    docs = [doc for doc in yaml.safe_load_all((KOORDINATOR_CRDS / file_name).read_text()) if doc]
    assert len(docs) == 1, f"{file_name}: want one document, got {len(docs)}"
    crd: dict[str, Any] = docs[0]
    return crd


@pytest.mark.parametrize(
    ("file_name", "want"),
    [
        pytest.param(
            "scheduling.koordinator.sh_reservations.yaml",
            ("scheduling.koordinator.sh", "Reservation", "Cluster", ["v1alpha1"]),
            id="reservation",
        ),
        pytest.param(
            "slo.koordinator.sh_nodemetrics.yaml",
            ("slo.koordinator.sh", "NodeMetric", "Cluster", ["v1alpha1"]),
            id="nodemetric",
        ),
        pytest.param(
            "slo.koordinator.sh_nodeslos.yaml", ("slo.koordinator.sh", "NodeSLO", "Cluster", ["v1alpha1"]), id="nodeslo"
        ),
        pytest.param(
            "scheduling.sigs.k8s.io_podgroups.yaml",
            ("scheduling.sigs.k8s.io", "PodGroup", "Namespaced", ["v1alpha1"]),
            id="podgroup",
        ),
        pytest.param(
            "scheduling.sigs.k8s.io_elasticquotas.yaml",
            ("scheduling.sigs.k8s.io", "ElasticQuota", "Namespaced", ["v1alpha1"]),
            id="elasticquota",
        ),
        pytest.param(
            "config.koordinator.sh_clustercolocationprofiles.yaml",
            ("config.koordinator.sh", "ClusterColocationProfile", "Cluster", ["v1alpha1"]),
            id="clustercolocationprofile",
        ),
        pytest.param(
            "scheduling.koordinator.sh_devices.yaml",
            ("scheduling.koordinator.sh", "Device", "Cluster", ["v1alpha1"]),
            id="device",
        ),
        pytest.param(
            "scheduling.koordinator.sh_clusternetworktopologies.yaml",
            ("scheduling.koordinator.sh", "ClusterNetworkTopology", "Cluster", ["v1alpha1"]),
            id="clusternetworktopology",
        ),
        pytest.param(
            "quota.koordinator.sh_elasticquotaprofiles.yaml",
            ("quota.koordinator.sh", "ElasticQuotaProfile", "Namespaced", ["v1alpha1"]),
            id="elasticquotaprofile",
        ),
        pytest.param(
            "topology.node.k8s.io_noderesourcetopologies.yaml",
            ("topology.node.k8s.io", "NodeResourceTopology", "Cluster", ["v1alpha1", "v1alpha2"]),
            id="noderesourcetopology",
        ),
    ],
)
def test_koordinator_crd_fixture(file_name: str, want: tuple[str, str, str, list[str]]) -> None:
    spec = _crd(file_name)["spec"]

    got = (spec["group"], spec["names"]["kind"], spec["scope"], [v["name"] for v in spec["versions"]])

    assert got == want
    assert file_name == f"{spec['group']}_{spec['names']['plural']}.yaml"


def test_readme_lists_exactly_the_fixture_files() -> None:
    """Every file under koordinator/ has a README row (a chart file through the chart-v1.8.0 row), and back."""
    rows = set(re.findall(r"^\| `(koordinator/[^`]+)` \|", (FIXTURES / "README.md").read_text(), re.MULTILINE))
    files = {str(path.relative_to(FIXTURES)) for path in KOORDINATOR.rglob("*") if path.is_file()}

    want_rows = {f for f in files if not f.startswith("koordinator/chart-v1.8.0/")} | {
        "koordinator/chart-v1.8.0/*.yaml"
    }
    assert rows == want_rows
