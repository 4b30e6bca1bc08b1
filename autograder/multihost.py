"""One data-parallel SGD step, run by each of several processes (chapter 09, "Beyond one host").

    python -m autograder.multihost DATA.npz PORT PROCESS_ID NUM_PROCESSES OUT.npz

It ships in the package (not beside the notebook) so that Colab, which opens a notebook alone,
has it too. Every process runs this same module: it joins the others through `jax.distributed` on this machine
(loopback), gets 4 CPU devices of its own, and then builds one mesh over *all* processes' devices.
Each process reads the whole batch from DATA.npz but places only its own devices' rows; `jax.jit`
runs the step on every device and averages the gradients across processes (gloo collectives).
It prints one JSON line about what this process sees and saves its copy of the result in OUT.npz.
"""
import json
import sys

import numpy as np

LOCAL_DEVICES = 4


def loss_fn(params, x, y):             # the chapter's model: a two-layer MLP, mean squared error
    import jax
    import jax.numpy as jnp

    h = jax.nn.relu(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def sgd_step(params, x, y):            # the chapter's step, jitted below
    import jax

    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), loss


def main(data_path, port, process_id, num_processes, out_path):
    import jax

    jax.config.update("jax_platforms", "cpu")                         # CPU devices, even beside a GPU
    jax.config.update("jax_num_cpu_devices", LOCAL_DEVICES)           # before JAX starts its backends
    jax.config.update("jax_cpu_collectives_implementation", "gloo")   # collectives between processes
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=num_processes,
                               process_id=process_id, initialization_timeout=60)
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P

    # jax.devices() lists the devices of every process; jax.local_devices() only this one's
    mesh = Mesh(np.array(jax.devices()), ("data",), axis_types=(AxisType.Auto,))
    data = np.load(data_path)

    def place(array, spec):
        """A global array from host data: this process fills only its own devices' blocks."""
        sharding = NamedSharding(mesh, spec)
        return jax.make_array_from_callback(array.shape, sharding, lambda index: array[index])

    x, y = place(data["x"], P("data")), place(data["y"], P("data"))
    params = {name: place(data[name], P()) for name in ("w1", "w2")}
    new_params, loss = jax.jit(sgd_step)(params, x, y)

    # replicated results: every process holds a full copy on each of its devices
    local = {name: np.asarray(value.addressable_data(0)) for name, value in new_params.items()}
    np.savez(out_path, **local)
    print(json.dumps({
        "process_index": jax.process_index(), "process_count": jax.process_count(),
        "local_devices": [d.id for d in jax.local_devices()],
        "global_devices": [d.id for d in jax.devices()],
        "x_global_shape": list(x.shape), "x_fully_addressable": x.is_fully_addressable,
        "x_shards": [[s.device.id, s.index[0].start, s.index[0].stop] for s in x.addressable_shards],
        "loss": float(np.asarray(loss.addressable_data(0))),
    }), flush=True)


if __name__ == "__main__":
    data_path, port, process_id, num_processes, out_path = sys.argv[1:6]
    main(data_path, int(port), int(process_id), int(num_processes), out_path)
