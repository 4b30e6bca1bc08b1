"""Which devices the sharding chapter's meshes use (autograder.meshes), on faked device lists.

No accelerator is needed: ``jax.devices`` and ``jax.default_backend`` are replaced by fakes that
describe a TPU with 8 or 4 chips, a single-chip TPU, a single GPU, or a CPU-only machine.
"""
from __future__ import annotations

from types import SimpleNamespace

import jax
import pytest

from autograder import meshes


def _devices(platform, n, kind):
    return [SimpleNamespace(platform=platform, id=i, device_kind=kind) for i in range(n)]


@pytest.fixture
def fake_machine(monkeypatch):
    """``fake_machine(backend, n_accelerator, n_cpu)`` makes JAX report those devices."""

    def install(backend, n_accel, n_cpu=8, kind="TPU v5 lite"):
        accel = _devices(backend, n_accel, kind) if backend != "cpu" else []
        cpus = _devices("cpu", n_cpu, "cpu")

        def devices(backend_name=None):
            if backend_name == "cpu" or (backend_name is None and backend == "cpu"):
                return cpus
            assert backend_name in (None, backend), backend_name
            return accel

        monkeypatch.setattr(jax, "devices", devices)
        monkeypatch.setattr(jax, "default_backend", lambda: backend)
        return accel, cpus

    return install


def test_eight_tpu_chips_are_used(fake_machine):
    chips, _ = fake_machine("tpu", 8)
    devices = meshes.mesh_devices()
    assert list(devices) == chips and devices.platform == "tpu" and not devices.fallback
    assert "8 real TPU devices" in devices.reason and "TPU v5 lite" in devices.reason
    assert meshes.mesh_shape(len(devices)) == (8,)
    assert meshes.mesh_shape(len(devices), 2) == (2, 4)
    # the chapter's explicit request for 8 gets the same chips
    assert list(meshes.mesh_devices(8)) == chips and not meshes.mesh_devices(8).fallback
    assert list(meshes.mesh_devices(4)) == chips[:4]


def test_four_tpu_chips_are_used_not_virtual_cpus(fake_machine):
    chips, _ = fake_machine("tpu", 4)
    devices = meshes.mesh_devices()
    assert list(devices) == chips and devices.platform == "tpu" and not devices.fallback
    assert "4 real TPU devices" in devices.reason
    assert meshes.mesh_shape(len(devices)) == (4,)
    assert meshes.mesh_shape(len(devices), 2) == (2, 2)


def test_asking_for_more_than_the_chips_falls_back_and_says_why(fake_machine):
    _, cpus = fake_machine("tpu", 4)
    devices = meshes.mesh_devices(8)
    assert list(devices) == cpus and devices.platform == "cpu" and devices.fallback
    assert "the TPU has 4 device(s)" in devices.reason and "fewer than the 8 asked for" in devices.reason
    assert "mesh_devices() without a count" in devices.reason


def test_single_tpu_chip_falls_back_to_cpu_devices(fake_machine):
    _, cpus = fake_machine("tpu", 1)
    devices = meshes.mesh_devices()
    assert list(devices) == cpus and devices.platform == "cpu" and devices.fallback
    assert "the TPU has a single device" in devices.reason
    assert "too few for a mesh" in devices.reason and "falling back to 8 virtual CPU devices" in devices.reason
    assert meshes.mesh_shape(len(devices), 2) == (2, 4)


def test_single_gpu_falls_back_to_cpu_devices(fake_machine):
    _, cpus = fake_machine("gpu", 1, kind="NVIDIA H200")
    devices = meshes.mesh_devices()
    assert list(devices) == cpus and devices.fallback
    assert "the GPU has a single device [NVIDIA H200]" in devices.reason


def test_two_gpus_are_used(fake_machine):
    gpus, _ = fake_machine("gpu", 2, kind="NVIDIA H200")
    devices = meshes.mesh_devices()
    assert list(devices) == gpus and devices.platform == "gpu" and not devices.fallback
    assert meshes.mesh_shape(len(devices), 2) == (1, 2)


def test_single_chip_without_virtual_cpu_devices_explains_the_fix(fake_machine):
    fake_machine("tpu", 1, n_cpu=1)
    with pytest.raises(RuntimeError, match=r"use_virtual_cpu_devices\(8\)"):
        meshes.mesh_devices()


def test_cpu_only_machine_uses_the_virtual_cpu_devices(fake_machine):
    _, cpus = fake_machine("cpu", 0)
    devices = meshes.mesh_devices()
    assert list(devices) == cpus and devices.platform == "cpu" and not devices.fallback
    assert devices.reason.startswith("no accelerator: 8 virtual CPU devices")
    assert list(meshes.mesh_devices(8)) == cpus and not meshes.mesh_devices(8).fallback
    with pytest.raises(RuntimeError, match=r"fewer than 16.*use_virtual_cpu_devices\(16\)"):
        meshes.mesh_devices(16)


def test_cpu_only_machine_without_virtual_devices(fake_machine):
    fake_machine("cpu", 0, n_cpu=1)
    with pytest.raises(RuntimeError, match=r"1 CPU device\(s\) and no accelerator, fewer than 2"):
        meshes.mesh_devices()


@pytest.mark.parametrize("n, one_d, two_d", [(1, (1,), (1, 1)), (2, (2,), (1, 2)), (4, (4,), (2, 2)),
                                             (6, (6,), (2, 3)), (8, (8,), (2, 4)), (16, (16,), (4, 4)),
                                             (32, (32,), (4, 8))])
def test_mesh_shapes_are_sized_to_the_devices(n, one_d, two_d):
    assert meshes.mesh_shape(n) == one_d and meshes.mesh_shape(n, 2) == two_d
    import math
    assert math.prod(two_d) == n


@pytest.mark.parametrize("n_chips, shape", [(8, (2, 4)), (4, (2, 2))])
def test_make_mesh_without_a_shape_uses_every_chip(fake_machine, monkeypatch, n_chips, shape):
    chips, _ = fake_machine("tpu", n_chips)
    made = {}

    def fake_make_mesh(axis_shapes, axis_names, *, axis_types=None, devices=None):
        made.update(shape=axis_shapes, names=axis_names, types=axis_types, devices=devices)
        return "mesh"

    monkeypatch.setattr(jax, "make_mesh", fake_make_mesh)
    assert meshes.make_mesh(None, ("data", "model"), "explicit") == "mesh"
    assert made["shape"] == shape and made["names"] == ("data", "model") and made["devices"] == chips
    assert made["types"] == (jax.sharding.AxisType.Explicit,) * 2
    meshes.make_mesh(None, ("data",))
    assert made["shape"] == (n_chips,) and made["devices"] == chips
