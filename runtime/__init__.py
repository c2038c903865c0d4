"""What workloads and laptops import: connect to the shared Pathways service, colocated Python helpers,
and a local sidecar. Never imports pulumi; kept light because every sidecar worker imports it at start-up.
"""
