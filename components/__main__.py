"""Serve tpuplane's components to TypeScript, Go, C#, Java and YAML programs: `pulumi package add` runs this file
as a Pulumi plugin (see PulumiPlugin.yaml beside it), and Pulumi infers the schema from the Args annotations and
docstrings.

Installed with pip, the same provider is also the command `pulumi-resource-tpuplane`: a plugin the engine runs
as it is, from the environment tpuplane is installed in (`pulumi package add <the folder holding it>`), without
Pulumi's Python language host making a virtualenv of its own."""

from pulumi.provider.experimental import component_provider_host

from tpuplane.components import component_classes

PACKAGE = "tpuplane"


def main() -> None:
    component_provider_host(components=component_classes(), name=PACKAGE, namespace=PACKAGE)


if __name__ == "__main__":
    main()
