"""The Shared Pathways Service, its client proxies and the colocated Python sidecar image."""
