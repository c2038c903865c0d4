"""The pure domain core: TPU catalog, typed stack config, naming, planning, manifest renderers, validation.

Nothing here imports pulumi: every decision is a plain function, tested without the engine.
"""
