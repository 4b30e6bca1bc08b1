"""The judge of 08_prng's ``random_crop`` (trusted: runs in the grader, never in the kernel).

The contract is exact: image ``i`` uses ``jax.random.split(key, n)[i]``, its corner is one
``jax.random.randint(key_i, (2,), 0, [h - size + 1, w - size + 1])``, its crop the window there.
The reference is computed here with the judge's own JAX from the same keys. The learner's
program (``size`` static, the key as raw ``uint32[2]`` data and the images traced) is read at
3 and 6 images before any is run: one that grows with the batch (a Python loop over the images)
is told so; so is one that grows or fails at a number of images past those programs' operations
(a loop unrolled over images padded to a fixed count), and its values are checked at a number of
images beyond every size written in them too. Its values on fresh images, keys and sizes are compared exactly (a crop copies
numbers); an answer that cuts every image at one place, or that draws corners from one key, is
told which. The compile count over new keys and images at one ``size`` is a kernel-side claim:
it can fail the test, never pass it.
"""
import numpy as np

from autograder.judge import ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Key, Ref, Spec


def _corners(seed, n, h, w, size, partitionable=True):
    """The corners the contract draws: (n, 2) ints, from the judge's own JAX, with
    ``jax_threefry_partitionable`` as given (for this thread's computation only)."""
    import jax
    import jax.numpy as jnp

    with jax.threefry_partitionable(partitionable):
        keys = jax.random.split(jax.random.key(int(seed)), n)
        limits = jnp.array([h - size + 1, w - size + 1])
        return np.asarray(jax.vmap(lambda k: jax.random.randint(k, (2,), 0, limits))(keys))


def _crops(images, corners, size):
    return np.stack([images[i, t:t + size, l:l + size] for i, (t, l) in enumerate(corners)])


def _program(k, n, h, w, size):
    return programs.trace(k, "random_crop", Spec((2,), "uint32"), Spec((n, h, w), "float32"), size,
                          static_argnums=(2,), label=f"jax.jit(random_crop, static_argnames='size') at size={size}")


def _program_flag_off(k, n, h, w, size):
    """The program traced in the kernel with ``jax_threefry_partitionable`` off (read while
    tracing), through the ``threefry_jit_call`` fixture, ``size`` static."""
    return programs.trace(k, Fixture("threefry_jit_call"), Ref("random_crop"), False, Spec((2,), "uint32"),
                          Spec((n, h, w), "float32"), static_argnums=(0, 1), static_argnames=("size",), size=size,
                          label=f"jax.jit(random_crop, static_argnames='size') at size={size}, "
                                "jax_threefry_partitionable off")


PUBLISHED = 9  # the most images random_crop is tried at (the visible test's 6, this judge's 2 to 9)


def _check_not_unrolled(k, h, w, size):
    """The program at 3 and 6 images, read before any is run (a Python loop over the images is
    unrolled, a copy per image), then at a number of images past those programs' operations
    (:func:`autograder.judge.effect.not_unrolled`). Returns ``(far, written, small)``: a number
    of images beyond every size written in the programs at 3 and 6 images
    (:func:`autograder.judge.effect.beyond`), and the operations at 3."""
    return effect.not_unrolled(lambda n: _program(k, n, h, w, size), (3, 6), (PUBLISHED,), k.rng,
                               name="random_crop", unit="images", copy="one copy of the draw and the cut per image",
                               idea="per_example_keys", advice="Crop every image, from its own key, in a program "
                                                               "whose size does not depend on the batch.")


def _check(got, images, seed, size, what, partitionable=True):
    n, h, w = images.shape
    corners = _corners(seed, n, h, w, size, partitionable)
    want = _crops(images, corners, size)
    got = np.asarray(got)
    if got.shape != want.shape:
        fail("per_example_keys", f"{what} has shape {got.shape}, expected one {size} x {size} crop per "
                                    f"image, {want.shape}.")
    if np.array_equal(got, want):
        return
    # Where each crop came from, if it is a window of its image at all.
    found = []
    for i in range(n):
        at = [(t, l) for t in range(h - size + 1) for l in range(w - size + 1)
              if np.array_equal(images[i, t:t + size, l:l + size], got[i])]
        found.append(at[0] if at else None)
    if None in found:
        i = found.index(None)
        fail("per_example_keys", f"{what}: crop {i} is not a {size} x {size} window of image {i}.")
    if len(set(found)) == 1 and n > 1:
        fail("per_example_keys", f"{what} cut every image at the same position {found[0]}: each image needs "
                                    "a position of its own, drawn from a key of its own.")
    i = next(i for i in range(n) if not np.array_equal(got[i], want[i]))
    flag = "" if partitionable else (", with jax_threefry_partitionable off, where the i-th key of a split "
                                     "is not the key made from `key` and i any other way")
    fail("per_example_keys", f"{what}: image {i} was cut at {found[i]}, but its key (the {i}-th of "
                                f"jax.random.split(key, {n}){flag}) draws the corner "
                                f"{tuple(int(v) for v in corners[i])} by the contract: one randint of shape (2,) "
                                "from that key, between 0 and (h - size + 1, w - size + 1).")


def test_random_crop(k):
    rng = k.rng
    h, w = int(rng.integers(8, 17)), int(rng.integers(8, 17))
    size = int(rng.integers(2, min(h, w) - 2))  # at least 4 positions a side: a wrong corner shows
    far, written, small = _check_not_unrolled(k, h, w, size)
    seeds = k.distinct_seeds(5)
    for trial, (n, s) in enumerate([(int(rng.integers(5, 10)), size), (int(rng.integers(5, 10)), 1),
                                    (int(rng.integers(2, 5)), min(h, w))]):
        images = rng.normal(size=(n, h, w)).astype(np.float32)
        program = _program(k, n, h, w, s)
        for seed in seeds[:2] if trial == 0 else seeds[2:3]:
            got = program(programs.raw_key(seed), images)
            _check(got, images, seed, s, f"jax.jit(random_crop)(key, images, {s}) on {n} images of {h} x {w} "
                                         f"(random input #{trial + 1})")
    # With jax_threefry_partitionable off too: the i-th key of the split, whatever the setting.
    n = int(rng.integers(3, 8))
    images = rng.normal(size=(n, h, w)).astype(np.float32)
    got = _program_flag_off(k, n, h, w, size)(programs.raw_key(seeds[3]), images)
    _check(got, images, seeds[3], size, f"jax.jit(random_crop)(key, images, {size}) on {n} images of {h} x {w} "
                                        "with jax_threefry_partitionable off", partitionable=False)
    # ... and at a number of images beyond every size written in its programs (a count images are
    # padded to, a loop's bound) and every one it was tried at, small images keeping it cheap: the
    # same contract there, and a program no larger.
    beyond = f"at {far} images, beyond every size written in its programs at 3 and 6 images (up to {written})"
    fh, fw = int(rng.integers(3, 6)), int(rng.integers(3, 6))
    images = rng.normal(size=(far, fh, fw)).astype(np.float32)
    try:
        program = _program(k, far, fh, fw, 2)
        got = np.asarray(program(programs.raw_key(seeds[4]), images))
    except ExerciseFailure as exc:
        fail("per_example_keys", f"jax.jit(random_crop) fails {beyond}: it is written for the batch sizes it was "
                                    f"tried at (a loop over images padded to a fixed count?): {exc.detail}")
    if effect.grows(small, program.total):
        fail("per_example_keys", f"the program of random_crop grows with the number of images ({small} operations "
                                    f"at 3 images, {program.total} {beyond}): a loop over the images is unrolled "
                                    "into it.")
    want = _crops(images, _corners(seeds[4], far, fh, fw, 2), 2)
    if got.shape != want.shape or not np.array_equal(got, want):
        wrong = (f"has shape {got.shape}, expected {want.shape}" if got.shape != want.shape else
                 f"cuts {int(np.sum(np.any(got != want, axis=(1, 2))))} of the images elsewhere than their keys "
                 f"draw (the first, image {int(np.argmax(np.any(got != want, axis=(1, 2))))})")
        fail("per_example_keys", f"jax.jit(random_crop)(key, images, 2) on {fh} x {fw} images {beyond} {wrong}: "
                                    "each image's crop comes from its own key of the split, at every batch size.")
    # Kernel-side claim: new keys and new images reuse the program compiled for one size.
    n = int(rng.integers(3, 7))
    calls = [((Ref("random_crop"), Key(s), AsJax(rng.normal(size=(n, h, w)).astype(np.float32))), {"size": size})
             for s in seeds]
    k.claim("check_compiles", Fixture("jit_call"), calls, 1,  # keyword arguments static: size
            what=f"jax.jit(random_crop, static_argnames='size') at size={size} with four keys",
            why="The key and the images are data: new values must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "random_crop": [
        ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])

    def crop_one(image):
        top, left = jax.random.randint(key, (2,), 0, limits)  # the one key for every image
        return jax.lax.dynamic_slice(image, (top, left), (size, size))

    return jax.vmap(crop_one)(images)
''', "cut every image at the same position", "per_example_keys"),
        ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    crops = []
    for i, k in enumerate(jax.random.split(key, n)):  # a Python loop: one copy per image
        top, left = jax.random.randint(k, (2,), 0, jnp.array([h - size + 1, w - size + 1]))
        crops.append(jax.lax.dynamic_slice(images[i], (top, left), (size, size)))
    return jnp.stack(crops)
''', "grows with the number of images", "per_example_keys"),
        ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    limits = jnp.array([h - size, w - size])  # the last position that fits is never drawn

    def crop_one(k, image):
        top, left = jax.random.randint(k, (2,), 0, limits)
        return jax.lax.dynamic_slice(image, (top, left), (size, size))

    return jax.vmap(crop_one)(jax.random.split(key, n), images)
''', "by the contract: one randint of shape (2,)", "per_example_keys"),
        ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])

    def crop_one(i, image):
        # fold_in(key, i) equals split(key, n)[i] only while jax_threefry_partitionable is on
        top, left = jax.random.randint(jax.random.fold_in(key, i), (2,), 0, limits)
        return jax.lax.dynamic_slice(image, (top, left), (size, size))

    return jax.vmap(crop_one)(jnp.arange(n), images)
''', "with jax_threefry_partitionable off, where the i-th key", "per_example_keys"),
         ('''
def random_crop(key, images, size):
    # a Python loop over the images padded to 16: the same program at every batch size up to 16
    n, h, w = images.shape
    padded = jnp.pad(images, ((0, 16 - n), (0, 0), (0, 0)))
    keys = jax.random.key_data(jax.random.split(key, n))  # the contract's keys, padded too
    keys = jax.random.wrap_key_data(jnp.pad(keys, ((0, 16 - n), (0, 0))))
    crops = []
    for i, k in enumerate(keys):
        top, left = jax.random.randint(k, (2,), 0, jnp.array([h - size + 1, w - size + 1]))
        crops.append(jax.lax.dynamic_slice(padded[i], (top, left), (size, size)))
    return jnp.stack(crops)[:n]
''', "beyond every number of images it was tried at", "per_example_keys"),
        ('''
def random_crop(key, images, size):
    """One size x size crop per image, each at a position drawn from that image's own key."""
    # TODO: right eagerly (on JAX's default PRNG setting); under jax.jit it does not run.
    # Measure before and after: the crops with the setting on and off, the jaxpr at two batch sizes.
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])
    crops = []
    for i in range(n):
        key_i = jax.random.fold_in(key, i)  # image i's own key
        top, left = jax.random.randint(key_i, (2,), 0, limits)
        top, left = int(top), int(left)  # plain offsets for a plain slice
        crops.append(images[i, top:top + size, left:left + size])
    return jnp.stack(crops)
''', "needed the concrete value of a traced array", "static"),
        ('''
def random_crop(key, images, size):
    # half-fix: a slice at traced offsets, still a Python loop, still fold_in keys
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])
    crops = []
    for i in range(n):
        top, left = jax.random.randint(jax.random.fold_in(key, i), (2,), 0, limits)
        crops.append(jax.lax.dynamic_slice(images[i], (top, left), (size, size)))
    return jnp.stack(crops)
''', "grows with the number of images", "per_example_keys"),
        ('''
def random_crop(key, images, size):
    # int() removed: a plain slice at traced offsets
    n, h, w = images.shape
    keys = jax.random.split(key, n)
    limits = jnp.array([h - size + 1, w - size + 1])
    crops = []
    for i in range(n):
        top, left = jax.random.randint(keys[i], (2,), 0, limits)
        crops.append(images[i, top:top + size, left:left + size])
    return jnp.stack(crops)
''', "Array slice indices must have static start/stop/step", "numerics"),
        ('''
def random_crop(key, images, size):
    n, h, w = images.shape
    keys = jax.random.split(key, n)
    def one(k, image):
        kt, kl = jax.random.split(k)
        top = jax.random.randint(kt, (), 0, h - size + 1)
        left = jax.random.randint(kl, (), 0, w - size + 1)
        return jax.lax.dynamic_slice(image, (top, left), (size, size))
    return jax.vmap(one)(keys, images)
''', 'by the contract: one randint of shape (2,)', 'per_example_keys'),
    ],
}

RIGHT = {
    "random_crop": [
        '''
def random_crop(key, images, size):
    # the window read by indexing with traced offsets (a gather) instead of a dynamic slice
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])
    corners = jax.vmap(lambda k: jax.random.randint(k, (2,), 0, limits))(jax.random.split(key, n))
    rows = corners[:, 0, None] + jnp.arange(size)          # (n, size)
    cols = corners[:, 1, None] + jnp.arange(size)          # (n, size)
    return images[jnp.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
''',
        '''
def random_crop(key, images, size):
    # a compiled loop over the images (lax.map) instead of vmap
    n, h, w = images.shape
    limits = jnp.array([h - size + 1, w - size + 1])
    def crop_one(args):
        k, image = args
        top, left = jax.random.randint(k, (2,), 0, limits)
        return jax.lax.dynamic_slice(image, (top, left), (size, size))
    return jax.lax.map(crop_one, (jax.random.split(key, n), images))
''',
        '''
def random_crop(key, images, size):
    # a fori_loop writing each crop into a buffer at traced offsets
    n, h, w = images.shape
    keys = jax.random.split(key, n)
    limits = jnp.array([h - size + 1, w - size + 1])
    def body(i, out):
        top, left = jax.random.randint(keys[i], (2,), 0, limits)
        window = jax.lax.dynamic_slice(images, (i, top, left), (1, size, size))
        return jax.lax.dynamic_update_slice(out, window, (i, 0, 0))
    return jax.lax.fori_loop(0, n, body, jnp.zeros((n, size, size), images.dtype))
''',
        '''
def random_crop(key, images, size):
    n, h, w = images.shape
    keys = jax.random.split(key, n)
    def one(k, image):
        top, left = jax.random.randint(k, (2,), 0, jnp.array([h - size + 1, w - size + 1]))
        return jnp.roll(image, (-top, -left), axis=(0, 1))[:size, :size]
    return jax.vmap(one)(keys, images)
''',
    ],
}
