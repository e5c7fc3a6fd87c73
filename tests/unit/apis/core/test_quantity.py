from fractions import Fraction

import pytest

from apis.core.errors import QuantityError
from apis.core.quantity import format_quantity, milli_value, parse_quantity, to_amount, value


@pytest.mark.parametrize(
    ("text", "want_value", "want_milli", "want_units"),
    [
        pytest.param("100m", Fraction(1, 10), 100, 1, id="milli"),
        pytest.param("1", Fraction(1), 1000, 1, id="plain"),
        pytest.param("0", Fraction(0), 0, 0, id="zero"),
        pytest.param("1Gi", Fraction(2**30), 2**30 * 1000, 2**30, id="gibi"),
        pytest.param("1.5Gi", Fraction(3 * 2**29), 3 * 2**29 * 1000, 3 * 2**29, id="fractional-binary"),
        pytest.param("512Ki", Fraction(512 * 1024), 512 * 1024 * 1000, 512 * 1024, id="kibi"),
        pytest.param("2Ei", Fraction(2**61), 2**61 * 1000, 2**61, id="exbi"),
        pytest.param("1k", Fraction(1000), 1_000_000, 1000, id="kilo"),
        pytest.param("1M", Fraction(10**6), 10**9, 10**6, id="mega"),
        pytest.param("1G", Fraction(10**9), 10**12, 10**9, id="giga"),
        pytest.param("1E", Fraction(10**18), 10**21, 10**18, id="E-alone-is-exa"),
        pytest.param("1e3", Fraction(1000), 1_000_000, 1000, id="exponent"),
        pytest.param("1E-3", Fraction(1, 1000), 1, 1, id="negative-exponent-upper-E"),
        pytest.param("1e+2", Fraction(100), 100_000, 100, id="signed-exponent"),
        pytest.param("0.5", Fraction(1, 2), 500, 1, id="decimal-rounds-up-to-unit"),
        pytest.param(".5", Fraction(1, 2), 500, 1, id="leading-dot"),
        pytest.param("5.", Fraction(5), 5000, 5, id="trailing-dot"),
        pytest.param("+2", Fraction(2), 2000, 2, id="plus-sign"),
        pytest.param("-1", Fraction(-1), -1000, -1, id="negative"),
        pytest.param("-1.5", Fraction(-3, 2), -1500, -2, id="negative-rounds-away-from-zero"),
        pytest.param("1n", Fraction(1, 10**9), 1, 1, id="nano-rounds-up-to-one-milli"),
        pytest.param("10u", Fraction(1, 10**5), 1, 1, id="micro"),
        pytest.param("0.1n", Fraction(1, 10**9), 1, 1, id="below-nano-rounds-up-to-nano"),
        pytest.param("1001m", Fraction(1001, 1000), 1001, 2, id="value-ceil"),
        pytest.param("9223372036854775807", Fraction(2**63 - 1), (2**63 - 1) * 1000, 2**63 - 1, id="int64-max"),
        pytest.param(2, Fraction(2), 2000, 2, id="yaml-int"),
        pytest.param(0.25, Fraction(1, 4), 250, 1, id="yaml-float"),
        pytest.param(0.1, Fraction(1, 10), 100, 1, id="yaml-float-shortest-repr"),
    ],
)
def test_parse_quantity(text: str | int | float, want_value: Fraction, want_milli: int, want_units: int) -> None:
    assert parse_quantity(text) == want_value
    assert milli_value(text) == want_milli
    assert value(text) == want_units


@pytest.mark.parametrize(
    ("text", "want_message"),
    [
        pytest.param("12x", 'invalid quantity "12x": unknown suffix "x"', id="unknown-suffix"),
        pytest.param("1K", 'invalid quantity "1K": unknown suffix "K"', id="upper-K-is-not-kilo"),
        pytest.param("1e", 'invalid quantity "1e": unknown suffix "e"', id="exponent-without-digits"),
        pytest.param("1Gi3", 'invalid quantity "1Gi3": unknown suffix "Gi3"', id="trailing-junk"),
        pytest.param("", 'invalid quantity "": empty string', id="empty"),
        pytest.param(
            "Gi",
            'invalid quantity "Gi": expected a number, optionally signed, before the suffix',
            id="no-number",
        ),
        pytest.param(".", 'invalid quantity ".": expected a number, optionally signed, before the suffix', id="dot"),
        pytest.param(
            " 1", 'invalid quantity " 1": expected a number, optionally signed, before the suffix', id="space"
        ),
        pytest.param("1 ", 'invalid quantity "1 ": unknown suffix " "', id="trailing-space"),
        pytest.param("1_000", 'invalid quantity "1_000": unknown suffix "_000"', id="underscore"),
        pytest.param(True, 'invalid quantity "true": expected a string or a number', id="bool"),
        pytest.param(float("nan"), 'invalid quantity "nan": not a finite number', id="nan"),
        pytest.param(
            "12345678901234567890",
            'invalid quantity "12345678901234567890": exceeds the largest quantity (2^63-1 base units)',
            id="beyond-int64-rejected-not-capped",
        ),
        pytest.param("1e400", 'invalid quantity "1e400": exceeds the largest quantity (2^63-1 base units)', id="1e400"),
        pytest.param(
            "1e999999999",
            'invalid quantity "1e999999999": exceeds the largest quantity (2^63-1 base units)',
            id="huge-exponent-cheap",
        ),
        pytest.param("100Ei", 'invalid quantity "100Ei": exceeds the largest quantity (2^63-1 base units)', id="100Ei"),
        pytest.param(
            -(2**63),
            'invalid quantity "-9223372036854775808": exceeds the largest quantity (2^63-1 base units)',
            id="yaml-int-beyond-int64",
        ),
    ],
)
def test_parse_quantity_errors(text: object, want_message: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)  # type: ignore[arg-type]
    assert str(caught.value) == want_message


@pytest.mark.parametrize(
    ("resource", "text", "want"),
    [
        pytest.param("cpu", "250m", 250, id="cpu-is-milli"),
        pytest.param("cpu", "1.0001", 1001, id="cpu-rounds-up"),
        pytest.param("memory", "1Mi", 2**20, id="memory-is-bytes"),
        pytest.param("pods", "110", 110, id="count"),
        pytest.param("nvidia.com/gpu", 1, 1, id="extended"),
    ],
)
def test_to_amount(resource: str, text: str | int, want: int) -> None:
    assert to_amount(resource, text) == want


def test_to_amount_accepts_fraction() -> None:
    assert to_amount("cpu", Fraction(1, 3)) == 334


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        pytest.param("cpu", 500, "500m", id="cpu-milli"),
        pytest.param("cpu", 2000, "2", id="cpu-whole"),
        pytest.param("cpu", 0, "0", id="cpu-zero"),
        pytest.param("memory", 2**30, "1Gi", id="memory-gi"),
        pytest.param("memory", 1536 * 2**20, "1536Mi", id="memory-mi"),
        pytest.param("memory", 1000, "1000", id="memory-inexact"),
        pytest.param("memory", 0, "0", id="memory-zero"),
        pytest.param("ephemeral-storage", 10 * 2**30, "10Gi", id="ephemeral"),
        pytest.param("hugepages-2Mi", 4 * 2**20, "4Mi", id="hugepages"),
        pytest.param("pods", 1024, "1024", id="count-plain"),
    ],
)
def test_format_quantity(resource: str, amount: int, want: str) -> None:
    assert format_quantity(resource, amount) == want


@pytest.mark.parametrize("text", ["100m", "1Gi", "1.5Gi", "3", "250m", "512Mi"])
def test_format_round_trips(text: str) -> None:
    for resource in ("cpu", "memory"):
        amount = to_amount(resource, text)
        assert to_amount(resource, format_quantity(resource, amount)) == amount
