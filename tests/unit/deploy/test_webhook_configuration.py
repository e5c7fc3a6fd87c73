"""The chart's webhook configurations against Koordinator's chart v1.8.0 (``webhookconfiguration.yaml``):
every Koordinator webhook that is on by default and that pykoord serves has the same name, path and rules."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from helm import CHART, render

REPO = Path(__file__).resolve().parents[3]
OURS = REPO / "deploy" / "koord-scheduler" / "webhook.yaml"
NOT_SERVED = {"mpod-update.koordinator.sh"}
"""Koordinator re-runs the pod mutation on UPDATE for pods labelled ``pod.koordinator.sh/mutating-update``;
pykoord's mutation serves pod CREATE only (docs/colocation-profile.md)."""


def webhooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        if doc and doc.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            for hook in doc.get("webhooks") or ():
                out[hook["name"]] = {**hook, "kind": doc["kind"]}
    return out


def koordinators() -> dict[str, dict[str, Any]]:
    # Two actions on one line ("{{ if ... }}{{ else }}") are split so the renderer sees control lines.
    text = re.sub(r"\}\}\{\{", "}}\n{{", (CHART / "webhookconfiguration.yaml").read_text())
    return webhooks(list(yaml.safe_load_all(render(text))))


def shape(hook: dict[str, Any]) -> tuple[object, ...]:
    rules = [(tuple(r["apiGroups"]), tuple(sorted(r["operations"])), tuple(r["resources"])) for r in hook["rules"]]
    return hook["kind"], hook["clientConfig"]["service"]["path"], rules, hook["failurePolicy"]


def test_every_default_koordinator_webhook_is_served_with_its_name_path_and_rules() -> None:
    theirs = koordinators()
    ours = webhooks(list(yaml.safe_load_all(OURS.read_text())))
    want = {name: shape(hook) for name, hook in theirs.items() if name not in NOT_SERVED}
    assert sorted(want) == [
        "melasticquota.koordinator.sh",
        "mpod-create.koordinator.sh",
        "velasticquota.koordinator.sh",
        "vpod.koordinator.sh",
    ]
    assert {name: shape(ours[name]) for name in want if name in ours} == want


def test_pod_webhooks_skip_the_install_namespace() -> None:
    """Koordinator's own pods must start while its webhook is down: ours leave koordinator-system out."""
    ours = webhooks(list(yaml.safe_load_all(OURS.read_text())))
    for name in ("mpod-create.koordinator.sh", "vpod.koordinator.sh"):
        selector = ours[name]["namespaceSelector"]["matchExpressions"]
        assert {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["koordinator-system", "kube-system"],
        } in selector
