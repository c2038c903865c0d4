"""The components' plugin gives integer Args as ints, though every number crosses the wire as a float (Pulumi's
Python component host 3.272 keeps the float: components/__main__.py says why)."""

from __future__ import annotations

import importlib

import pytest
from pulumi.provider.experimental.analyzer import PropertyDefinition, PropertyType

plugin = importlib.import_module("tpuplane.components.__main__")

PROPERTIES = {"slices": PropertyDefinition(type=PropertyType.INTEGER),
              "share": PropertyDefinition(type=PropertyType.NUMBER),
              "codes": PropertyDefinition(type=PropertyType.ARRAY,
                                          items=PropertyDefinition(type=PropertyType.INTEGER))}
MAPPING = {"slices": "slices", "share": "share", "codes": "codes"}


def as_sent(self, inputs, properties, mapping, component_name, property_path):
    """What the host hands on: the names mapped, the numbers as they came."""
    return {mapping[k]: v for k, v in inputs.items()}


@pytest.mark.parametrize(("sent", "received"), [
    ({"slices": 2.0}, {"slices": 2}),
    ({"codes": [42.0, 1.0]}, {"codes": [42, 1]}),
    ({"share": 1.0}, {"share": 1.0}),  # a number property stays a float
    ({"slices": 2.5}, {"slices": 2.5}),  # not whole: the Args refuse it, naming the field
])
def test_whole_floats_of_integer_properties_become_ints(sent, received):
    mapped = plugin._with_integers(as_sent)(None, sent, PROPERTIES, MAPPING, "BatchStack", "")
    assert repr(mapped) == repr(received)  # the types too: 2 is not 2.0
