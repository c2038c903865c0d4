"""The pure domain core: the components' Args models and their readers (a stack config is read by them), naming,
the TPU catalog, planning, manifest renderers and the review of plans.

Nothing here imports pulumi: every decision is a plain function, tested without the engine.
"""
