"""Pulumi ComponentResources: thin wrappers that turn `tpuplane.infra` plans into pulumi-gcp/-kubernetes resources."""
