"""Serve tpuplane's components to TypeScript, Go, C#, Java and YAML programs: `pulumi package add` runs this file
as a Pulumi plugin (see PulumiPlugin.yaml beside it), and Pulumi infers the schema from the Args annotations and
docstrings.

Installed with pip, the same provider is also the command `pulumi-resource-tpuplane`: a plugin the engine runs
as it is, from the environment tpuplane is installed in (`pulumi package add <the folder holding it>`), without
Pulumi's Python language host making a virtualenv of its own."""

from typing import Any

from pulumi.provider.experimental import component_provider_host
from pulumi.provider.experimental.analyzer import PropertyType
from pulumi.provider.experimental.component import ComponentProvider

from tpuplane.components import component_classes

PACKAGE = "tpuplane"


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _with_integers(map_input_properties):
    """Every number crosses the wire as a float. Pulumi's Python component host (3.272) turns one into an `int` for
    an integer property but then stores the float it had (it lacks a `continue`), so `slices: 2` from YAML or
    TypeScript reached the components as 2.0, which their strict Args refuse. Whole floats of integer properties
    (and of lists of integers) become ints here; anything else stays as sent, for the Args to judge."""

    def mapped(self, inputs, properties, mapping, component_name, property_path):
        result = map_input_properties(self, inputs, properties, mapping, component_name, property_path)
        for schema_name, prop in properties.items():
            name = mapping.get(schema_name)
            if name not in result:
                continue
            if prop.type == PropertyType.INTEGER:
                result[name] = _whole(result[name])
            elif prop.type == PropertyType.ARRAY and prop.items is not None and \
                    prop.items.type == PropertyType.INTEGER and isinstance(result[name], list):
                result[name] = [_whole(item) for item in result[name]]
        return result

    return mapped


def main() -> None:
    ComponentProvider.map_input_properties = _with_integers(ComponentProvider.map_input_properties)
    component_provider_host(components=component_classes(), name=PACKAGE, namespace=PACKAGE)


if __name__ == "__main__":
    main()
