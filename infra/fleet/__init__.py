"""The TPU fleet: catalog, cluster, node pools, reservations, scheduling labels."""
