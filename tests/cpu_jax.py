"""JAX as the tests that use it need it, set when this module is first imported (before any test makes a backend):
8 CPU devices for colocated Python, and the CPU platform named, because a connect() session registers JAX's `proxy`
backend for the rest of the process (pathwaysutils does) and JAX would try to create it in every later test.
Imported by the test modules that use JAX, and only by them."""

import jax
import jax.extend.backend

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_platforms", "cpu")


def release_backends() -> None:
    """No backend in this process any more (the next use of JAX makes a new one)."""
    jax.extend.backend.clear_backends()
    jax.clear_caches()
