"""The same HTTP extender behind stock kube-scheduler v1.35.8 and behind koord-scheduler, on the real API
server: both place the same pods on the same nodes, and report the same reasons when the extender
rejects every node."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.extender_fake

from kubesched import SchedulerProcess, Scope, scheduler_config, wait_until

from tests.extender_fake import node_names, serve_extender

pytestmark = pytest.mark.integration

REJECTED_LABEL = "reject-all"


@pytest.fixture
def scope(control_plane: Any) -> Iterator[Scope]:
    s = Scope.create(control_plane, "extdiff")
    yield s
    s.cleanup()


def verbs(scope: Scope) -> dict[str, Any]:
    """Reject the scope's node "a" (every scope node for pods labelled reject-all); score "c" highest."""

    def filter_(body: dict[str, Any]) -> Any:
        names = node_names(body)
        reject_all = body["Pod"]["metadata"].get("labels", {}).get(REJECTED_LABEL) == "true"
        rejected = {n for n in names if n.startswith(scope.name) and (reject_all or n.endswith("-a"))}
        return {
            "NodeNames": [n for n in names if n not in rejected],
            "FailedNodes": dict.fromkeys(sorted(rejected), "extender says no"),
        }

    def prioritize(body: dict[str, Any]) -> Any:
        return [{"Host": n, "Score": 10 if n.endswith("-c") else 0} for n in node_names(body)]

    return {"filter": filter_, "prioritize": prioritize}


def messages(scope: Scope, pod: str) -> set[str]:
    events = scope.events(reason="FailedScheduling")
    return {e.get("note") or e.get("message", "") for e in events if e["regarding"]["name"] == pod}


def test_kube_scheduler_and_koord_scheduler_agree_with_one_extender(scope: Scope, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        scope.add_node(name)
    upstream_name = f"{scope.scheduler_name}-upstream"
    with serve_extender(verbs(scope)) as ext:
        extender = {
            "urlPrefix": ext.url,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 5,
            "nodeCacheCapable": True,
        }
        koord_config = {**scheduler_config(scope), "extenders": [extender]}
        koord = SchedulerProcess.start(scope.plane, koord_config, tmp_path)
        upstream_config = {
            "profiles": [{"schedulerName": upstream_name}],
            "extenders": [extender],
            "podInitialBackoffSeconds": 1,
            "podMaxBackoffSeconds": 2,
        }
        try:
            with scope.plane.start_kube_scheduler(upstream_config, name=f"extdiff-{scope.name}"):
                for who, scheduler_name in (("koord", None), ("kube", upstream_name)):
                    scope.add_pods(scope.pod_body(f"{who}-{i}", scheduler_name=scheduler_name) for i in range(3))
                    rejected = scope.pod_body(f"{who}-rejected", scheduler_name=scheduler_name)
                    rejected["metadata"]["labels"] = {REJECTED_LABEL: "true"}
                    scope.add_pods([rejected])
                scope.wait_all_bound(6, timeout=60)
                wait_until(
                    lambda: messages(scope, "koord-rejected") and messages(scope, "kube-rejected"),
                    timeout=30,
                    what="FailedScheduling events for both rejected pods",
                )
                placed = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in scope.pods()}
                c = f"{scope.name}-c"
                assert {k: v for k, v in placed.items() if not k.endswith("rejected")} == {
                    "koord-0": c,
                    "koord-1": c,
                    "koord-2": c,
                    "kube-0": c,
                    "kube-1": c,
                    "kube-2": c,
                }
                # The FitError's first sentence (the PostFilter part follows it).
                fit = {who: {m.split(". ")[0] for m in messages(scope, f"{who}-rejected")} for who in ("koord", "kube")}
                assert fit["koord"] == fit["kube"]
                assert all("3 extender says no" in m for m in fit["kube"]), fit
        except AssertionError:
            print(koord.log_tail())
            raise
        finally:
            koord.kill()
