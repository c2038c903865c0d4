"""Serve tpuplane's components to TypeScript, Go, C#, Java and YAML programs: `pulumi package add` runs this file
as a Pulumi plugin (see PulumiPlugin.yaml beside it), and Pulumi infers the schema from the Args annotations and
docstrings."""

from pulumi.provider.experimental import component_provider_host

from tpuplane.components import component_classes

PACKAGE = "tpuplane"

if __name__ == "__main__":
    component_provider_host(components=component_classes(), name=PACKAGE, namespace=PACKAGE)
