"""The one reader of Kubernetes quantities: the API server's grammar, and nothing Kubernetes cannot hold."""

from decimal import Decimal

import pytest
from hypothesis import given, strategies as st
from kubernetes.utils import parse_quantity as client_parse_quantity

from tpuplane.infra.quantity import parse_quantity, whole_amount


@given(st.integers(0, 2**20), st.sampled_from(["", "n", "u", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti"]))
def test_a_quantity_reads_as_the_kubernetes_client_reads_it(amount, suffix):
    assert parse_quantity(f"{amount}{suffix}") == client_parse_quantity(f"{amount}{suffix}")


@pytest.mark.parametrize("text", ["1e999999999", "1E19", "8Ei", "9223372036854775808", "1" + "0" * 5000,
                                  "1e" + "9" * 5000, "-1e999999999"])
def test_a_quantity_of_2_to_the_63_or_more_is_refused_without_work(text):
    with pytest.raises(ValueError, match="2\\^63"):
        parse_quantity(text)


@pytest.mark.parametrize("value", ["", " 1", "1ki", "1.5.2", "inf", "NaN", "0x10", True, None, [1], float("inf")])
def test_what_is_not_a_quantity_is_refused(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


def test_a_non_zero_amount_below_a_nano_rounds_up_as_the_api_server_rounds_it():
    assert parse_quantity("1e-999999999") == Decimal("1e-9")
    assert parse_quantity("0e999999999") == 0


def test_numbers_as_yaml_writes_them_are_quantities():
    assert parse_quantity(0.5) == Decimal("0.5")
    assert parse_quantity(4) == 4
    assert parse_quantity("7Ei") == 7 * 2**60


@pytest.mark.parametrize("text, count", [("8k", 8000), (8000, 8000), ("8000", 8000), ("16000m", 16), ("0", 0)])
def test_a_count_reads_in_any_form_the_api_server_writes_it(text, count):
    assert whole_amount(text) == count


@pytest.mark.parametrize("text", ["1500m", "-16", "lots", None, 1.5])
def test_what_is_not_a_whole_count_is_none(text):
    assert whole_amount(text) is None
