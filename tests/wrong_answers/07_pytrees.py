"""Known-wrong answers for 07_pytrees: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "tree_l2_norm": [
        ('''
def tree_l2_norm(tree):
    # walks nested dicts only: lists, tuples and None break it
    if isinstance(tree, dict):
        return jnp.sqrt(sum(tree_l2_norm(v) ** 2 for v in tree.values()))
    return jnp.sqrt(jnp.sum(tree ** 2))
''', "on the tree {'layer1': {'b': *, 'w': *}, 'scale': [*, (*,)]}", "pytrees"),
        ('''
def tree_l2_norm(tree):
    return sum(jnp.linalg.norm(leaf) for leaf in jax.tree.leaves(tree))  # sum of norms, not the norm
''', "It adds the leaves' norms", "numerics"),
        ('''
def tree_l2_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf) ** 2 for leaf in jax.tree.leaves(tree)))  # squares the sums
''', "It squares each leaf's sum", "numerics"),
        ('''
def tree_l2_norm(tree):
    def walk(t):
        if isinstance(t, dict):
            return sum(walk(v) for v in t.values())
        if isinstance(t, (list, tuple)):
            return sum(walk(v) for v in t)
        return jnp.sum(t ** 2)  # None is not a leaf: None ** 2 fails
    return jnp.sqrt(walk(tree))
''', "unsupported operand type(s) for ** or pow(): 'NoneType' and 'int'", "pytrees"),
    ],
    "sgd_update": [
        ('''
def sgd_update(params, grads, lr):
    # the right numbers, but a flat list instead of the structure of params
    return [p - lr * g for p, g in zip(jax.tree.leaves(params), jax.tree.leaves(grads))]
''', "has structure PyTreeDef([*, *]), expected PyTreeDef({'b': *, 'w': *})", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    new = params  # not a copy: the caller's dict is updated in place
    for name in new:
        new[name] = jax.tree.map(lambda p, g: p - lr * g, params[name], grads[name])
    return new
''', "sgd_update changed its argument #1 in place (['b'], ['w'])", "tree_state"),
        ('''
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda g, p: p - lr * g, params, grads)  # arguments swapped
''', "sgd_update on {'b': *, 'w': *}['b'] is wrong", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    return {k: params[k] - lr * grads[k] for k in params}  # a flat dict only
''', "raised TypeError (list indices must be integers or slices, not dict)", "pytrees"),
        ('''
def sgd_update(params, grads, lr):
    step = float(lr)  # needs a concrete learning rate: breaks under jit
    return jax.tree.map(lambda p, g: p - step * g, params, grads)
''', "jax.jit(sgd_update) needed the concrete value of a traced array", "static"),
        ('''
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)  # the learning rate of the example, always
''', "sgd_update on {'b': *, 'w': *}['b'] is wrong", "pytrees"),
        ('''
from functools import partial

@partial(jax.jit, static_argnames="lr")
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)  # every new learning rate compiles again
''', "it marks it static, so every new learning rate compiles again", "recompiles"),
    ],
    "Linear": [
        ('''
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    # tree_flatten/tree_unflatten defined, but the class is never registered
    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "is a single opaque leaf to JAX: its class is not registered", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b, self.activation), None  # the string is a child, not aux data

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
''', "include 'relu' (str): configuration such as a string must be static aux data", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation="identity"):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), None  # the activation is dropped from the treedef

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)
''', "the round trip lost the activation", "custom_pytrees"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w) + self.b  # activation applied before the bias

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, activation)
''', "Linear(w, b, 'relu')(x), relu(x @ w + b), is wrong", "numerics"),
        ('''
@jax.tree_util.register_pytree_node_class
class Linear:
    def __init__(self, w, b, activation):
        self.w, self.b, self.activation = w, b, activation

    def __call__(self, x):
        return ACTIVATIONS[self.activation](x @ self.w + self.b)

    def tree_flatten(self):
        return (self.w, self.b), self.activation

    @classmethod
    def tree_unflatten(cls, activation, children):
        return cls(*children, "relu")  # the aux data is ignored: every rebuilt layer is a relu
''', "unflattening Linear(w, b, 'tanh') gave a layer with another tree structure", "custom_pytrees"),
    ],
    "masked_update": [
        ("""
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        # the flag as a 0/1 factor: frozen leaves get p - lr * g * 0
        return jax.tree.map(lambda p, g: p - lr * g * flag, p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
""", "arithmetic on it, even times zero, changes -0.0, inf and nan", "pytrees"),
        ("""
def masked_update(params, grads, trainable, lr):
    # one flag per leaf, lined up beside params and grads
    return jax.tree.map(lambda p, g, t: jnp.where(t, p - lr * g, p), params, grads, trainable)
""", "its structure is a prefix of params'", "pytrees"),
        ("""
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        if flag:  # a Python decision on the flag
            return jax.tree.map(lambda p, g: p - lr * g, p_subtree, g_subtree)
        return p_subtree
    return jax.tree.map(update_subtree, trainable, params, grads)
""", "traced value in a Python", "control_flow"),
        ("""
def masked_update(params, grads, trainable, lr):
    def update_subtree(flag, p_subtree, g_subtree):
        return jax.tree.map(lambda p, g: jnp.where(flag, p - lr * g, p).astype(jnp.bfloat16), p_subtree, g_subtree)
    return jax.tree.map(update_subtree, trainable, params, grads)
""", "expected float32", "pytrees"),
    ],
}
