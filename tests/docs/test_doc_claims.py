"""Claims the docs make about the code, checked against the code, so they cannot drift:

- ``config/scheduler/README.md``: the plugins it says ``koordinator.yaml`` enables are the ones it
  enables, and the plugins it gives as examples of unknown ones are not registered;
- ``docs/*.md``: a plugin argument a page says pykoord refuses is refused by the configuration loader, and
  one it says pykoord has is accepted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.config.plugin_args import IN_TREE_ARGS, decode_args
from apis.config.profile import DEFAULT_MULTIPOINT

REPO = Path(__file__).resolve().parents[2]
SCHEDULER_README = REPO / "config" / "scheduler" / "README.md"
KOORDINATOR_YAML = REPO / "config" / "scheduler" / "koordinator.yaml"
BOLD = re.compile(r"\*\*([A-Za-z]+)\*\*")
PLUGIN_WORD = re.compile(r"\b([A-Z][A-Za-z]*[A-Z][A-Za-z]*)\b")
"""A word with two capitals or more (``DeviceShare``, ``NodeNUMAResource``): a plugin name."""


def _readme_row(name: str) -> str:
    return next(line for line in SCHEDULER_README.read_text().splitlines() if line.startswith(f"| `{name}` |"))


def _enabled_plugins(path: Path) -> set[str]:
    config = yaml.safe_load(path.read_text())
    names: set[str] = set()
    for profile in config["profiles"]:
        for point in (profile.get("plugins") or {}).values():
            names.update(p["name"] for p in (point or {}).get("enabled") or () if p["name"] != "*")
    return names


def test_readme_names_every_koordinator_plugin_koordinator_yaml_enables() -> None:
    defaults = {p.name for p in DEFAULT_MULTIPOINT} | {"PrioritySort", "DefaultPreBind"}
    named = set(BOLD.findall(_readme_row("koordinator.yaml")))
    enabled = _enabled_plugins(KOORDINATOR_YAML) - defaults
    assert named - {"DefaultPreBind"} == enabled
    # The row it once had left NodeNUMAResource and DeviceShare out: this test fails on it.
    old = (
        "cut down to the plugins pykoord has: **SchedulingHint**, **Reservation** (at postFilter too, before "
        "DefaultPreemption), **LoadAwareScheduling**, **ElasticQuota** and **Coscheduling** on top of the defaults"
    )
    assert enabled - set(BOLD.findall(old)) == {"NodeNUMAResource", "DeviceShare"}


def unknown_plugin_examples(readme: str) -> list[str]:
    """The plugins the README gives as examples of names that are not registered."""
    text = " ".join(readme.split())
    sentence = re.search(r"not registered is an error\.(.*?)(?: - |$)", text)
    assert sentence is not None and "for example" in sentence.group(1)
    return PLUGIN_WORD.findall(sentence.group(1).split("for example", 1)[1])


def test_readme_examples_of_unknown_plugins_are_not_registered() -> None:
    from koord_scheduler.plugins.registry import in_tree_registry

    examples = unknown_plugin_examples(SCHEDULER_README.read_text())
    assert examples, "the README gives no example of an unknown plugin"
    registered = set(in_tree_registry().names())
    assert [name for name in examples if name in registered] == []
    # The wording it once had names two plugins that are registered: this test fails on it.
    old = (
        "- Naming a plugin that is not registered is an error. The error lists every unknown plugin, for\n"
        "  example Koordinator's NodeNUMAResource and DeviceShare.\n- Score weights"
    )
    assert [n for n in unknown_plugin_examples(old) if n in registered] == ["NodeNUMAResource", "DeviceShare"]


def _arg_value(model: Any, field: str) -> Any:
    """A value other than the field's default that the field's type accepts."""
    default = model.model_fields[field].default
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    return None


def claims_in(text: str) -> list[tuple[str, str, str]]:
    """(plugin, argument, "refused" or "accepted") for each sentence of ``text`` that names a plugin
    argument (``monitorAllQuotas`` or ``monitorAllQuotas: true`` in backticks) and says pykoord refuses it or
    has it."""
    out = []
    sentences = re.split(r"(?<=\.)\s+|\n\n", text)
    for plugin, model in IN_TREE_ARGS.items():
        aliases = {f.alias or name: name for name, f in model.model_fields.items()}
        for sentence in (" ".join(s.split()) for s in sentences):
            for alias in re.findall(r"`([a-z][A-Za-z]+)(?::[^`]*)?`", sentence):
                if alias not in aliases or _arg_value(model, aliases[alias]) is None:
                    continue
                if re.search(r"\b(?:pykoord|koord-scheduler) refuses (?:that|this) argument\b", sentence) or re.search(
                    rf"`{alias}[^`]*`[^`]*\b(?:pykoord|koord-scheduler) refuses\b", sentence
                ):
                    out.append((plugin, alias, "refused"))
                elif re.search(rf"`{alias}[^`]*`[^`]*\bwhich (?:pykoord|koord-scheduler) has\b", sentence):
                    out.append((plugin, alias, "accepted"))
    return out


def _claims() -> list[tuple[str, str, str, str]]:
    return [
        (page.name, *claim) for page in sorted((REPO / "docs").glob("*.md")) for claim in claims_in(page.read_text())
    ]


@pytest.mark.parametrize(("page", "plugin", "alias", "claim"), _claims())
def test_what_the_docs_say_about_an_argument_is_what_the_loader_does(
    page: str, plugin: str, alias: str, claim: str
) -> None:
    model = IN_TREE_ARGS[plugin]
    field = next(name for name, f in model.model_fields.items() if (f.alias or name) == alias)
    try:
        decode_args(plugin, {alias: _arg_value(model, field)}, IN_TREE_ARGS)
    except ValueError:
        got = "refused"
    else:
        got = "accepted"
    assert got == claim, f"{page} says {plugin} argument {alias} is {claim}"


def test_the_claims_are_found() -> None:
    """The scan sees the elasticquota page's claim about ``monitorAllQuotas``, and would have seen the
    wording it once had (which the loader contradicts: it accepts the argument)."""
    assert ("elasticquota.md", "ElasticQuota", "monitorAllQuotas", "accepted") in _claims()
    old = (
        "the borrower's pods end on their own (or when the over-use revoke controller, `monitorAllQuotas`, is\n"
        "turned on; pykoord refuses that argument)."
    )
    assert claims_in(old) == [("ElasticQuota", "monitorAllQuotas", "refused")]
