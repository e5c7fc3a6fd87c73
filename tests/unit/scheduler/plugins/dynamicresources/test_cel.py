"""CEL device selectors: Kubernetes' DRA environment on cel-python (the ``device`` variable, the quantity,
semver, strings, lists and sets libraries, ``cel.bind``), compile and runtime errors, and the cost budget."""

from __future__ import annotations

import pytest

from apis.resource import parse_resource_slice
from koord_scheduler.plugins.dynamicresources.cel import (
    CelRuntimeError,
    CostLimitError,
    Selector,
    device_value,
)
from koord_scheduler.plugins.dynamicresources.selector_cache import SelectorCache
from tests import dra_builders as dra

D = dra.DRIVER
SLICE = parse_resource_slice(
    dra.resource_slice(
        "s",
        "n1",
        [
            dra.device(
                "gpu-0",
                capacity={"memory": "40Gi"},
                model="A100",
                numa=1,
                fast=True,
                driverVersion=("version", "1.2.3"),
                **{"other.example.com/zone": "z1"},
            ),
        ],
    )
)
DEVICE = device_value(D, SLICE.devices[0])


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        pytest.param(f'device.driver == "{D}"', True, id="driver"),
        pytest.param(f'device.attributes["{D}"].model == "A100"', True, id="short-name-under-driver-domain"),
        pytest.param('device.attributes["other.example.com"].zone == "z1"', True, id="qualified-name"),
        pytest.param(f'device.attributes["{D}"].numa == 1 && device.attributes["{D}"].fast', True, id="int-bool"),
        pytest.param('has(device.attributes["unknown.example.com"].model)', False, id="unknown-domain-is-empty"),
        pytest.param(f'"model" in device.attributes["{D}"]', True, id="in-map"),
        pytest.param(f'device.capacity["{D}"].memory.compareTo(quantity("32Gi")) >= 0', True, id="quantity-compare"),
        pytest.param(f'device.capacity["{D}"].memory == quantity("40960Mi")', True, id="quantity-equality"),
        pytest.param(f'device.capacity["{D}"].memory.isLessThan(quantity("32Gi"))', False, id="quantity-less"),
        pytest.param('quantity("1500m").add(1).asApproximateFloat() == 2.5', True, id="quantity-arithmetic"),
        pytest.param('isQuantity("12x") || quantity("2").asInteger() == 2', True, id="is-quantity"),
        pytest.param(f'device.attributes["{D}"].driverVersion.isGreaterThan(semver("1.2.0"))', True, id="semver"),
        pytest.param(f'device.attributes["{D}"].driverVersion.major() == 1', True, id="semver-major"),
        pytest.param('semver("v1.2", true) == semver("1.2.0")', True, id="semver-normalize"),
        pytest.param(f'device.attributes["{D}"].model.lowerAscii().startsWith("a1")', True, id="strings"),
        pytest.param('"a,b,c".split(",").size() == 3 && ["a", "b"].join("-") == "a-b"', True, id="split-join"),
        pytest.param("[3, 1, 2].max() == 3 && [1, 2, 3].isSorted() && [1, 2].sum() == 3", True, id="lists"),
        pytest.param('sets.contains(["a", "b"], ["a"]) && !sets.intersects(["a"], ["b"])', True, id="sets"),
        pytest.param(f'cel.bind(g, device.attributes["{D}"], g.model == "A100" && g.numa == 1)', True, id="bind"),
        pytest.param("[1, 2, 3].exists(x, x == 2) && [1, 2].all(x, x > 0)", True, id="macros"),
        pytest.param('"gpu-0".find("[0-9]+") == "0"', True, id="regex-find"),
    ],
)
def test_selectors(expression: str, want: bool) -> None:
    assert Selector(expression).matches(DEVICE) is want


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        pytest.param("device.driver ==", "compilation failed:", id="syntax"),
        pytest.param(
            "noSuchFunction(1)", "compilation failed: undeclared reference to 'noSuchFunction'", id="unknown-function"
        ),
        pytest.param(
            'device.attributes["x"].ip.isIP()',
            "compilation failed: undeclared reference to 'isIP'",
            id="library-not-provided",
        ),
    ],
)
def test_compile_errors(expression: str, want: str) -> None:
    selector = Selector(expression)
    assert selector.error.startswith(want)
    with pytest.raises(CelRuntimeError, match="compilation failed"):
        selector.matches(DEVICE)


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        pytest.param(
            f'device.attributes["{D}"].missing == "x"', "no such member in mapping: 'missing'", id="missing-attribute"
        ),
        pytest.param("1 + 1", "must evaluate to bool, got int", id="not-bool"),
        pytest.param(
            'quantity("12x").sign() == 1', 'quantity: invalid quantity "12x": unknown suffix "x"', id="bad-quantity"
        ),
    ],
)
def test_runtime_errors(expression: str, want: str) -> None:
    with pytest.raises(CelRuntimeError) as err:
        Selector(expression).matches(DEVICE)
    assert str(err.value) == want


def test_cost_budget_stops_a_runaway_expression() -> None:
    nested = "[1, 2, 3, 4, 5, 6, 7, 8].all(a, [1, 2, 3, 4, 5, 6, 7, 8].all(b, a + b > 0))"
    assert Selector(nested).matches(DEVICE, cost_limit=100_000)
    with pytest.raises(CostLimitError, match=r"actual cost limit exceeded \(500\)"):
        Selector(nested).matches(DEVICE, cost_limit=500)


RUNAWAY = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, " * 5 + "a > 0" + ")" * 5


def test_an_expression_whose_estimated_cost_exceeds_the_budget_does_not_compile() -> None:
    selector = Selector(RUNAWAY)
    assert selector.error.startswith("compilation failed: estimated cost ")
    assert selector.error.endswith("exceeds the budget of 1000000 (CELSelectorExpressionMaxCost)")
    assert Selector("[1, 2, 3].all(x, x > 0)").error == ""


def test_errors_are_absorbed_by_or_as_in_cel() -> None:
    assert Selector(f'device.attributes["{D}"].missing == "x" || true').matches(DEVICE)


def test_cache_compiles_once() -> None:
    cache = SelectorCache(size=2)
    first = cache.get("true")
    assert cache.get("true") is first
    cache.get("false")
    cache.get("1 == 1")
    assert cache.get("true") is not first
