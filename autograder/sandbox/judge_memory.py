"""The grading process's own memory cap: what the judge reads from a submission cannot take the
machine's memory."""

def limit_judge_memory(mb: int) -> None:
    """Cap this grading process's data memory (``RLIMIT_DATA``, the soft limit) at ``mb`` MiB
    (``AUTOGRADER_JUDGE_MEMORY_MB``; below about 600 MiB a grading process could not even start
    its kernel's client threads): what the judge reads and builds here from a submission cannot
    take the machine's memory. Kernels do not inherit it (the launcher's ``limits`` lifts it).
    Not where JAX has a GPU or TPU plugin installed (``jax_plugins``: jax-cuda*, jax-rocm*; or
    ``libtpu``): their runtimes map memory of their own, which this cap was not measured with."""
    import importlib.util
    import resource

    if any(importlib.util.find_spec(name) for name in ("jax_plugins", "libtpu")):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = mb << 20 if hard == resource.RLIM_INFINITY else min(mb << 20, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
