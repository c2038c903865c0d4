"""The `tpuplane` command line."""
