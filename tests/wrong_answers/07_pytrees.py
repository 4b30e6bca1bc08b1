"""Known-wrong answers for 07_pytrees: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase the feedback must contain), ...]
"""

WRONG = {
    "tree_l2_norm": [
        ('''
def tree_l2_norm(tree):
    # walks nested dicts only: lists, tuples and None break it
    if isinstance(tree, dict):
        return jnp.sqrt(sum(tree_l2_norm(v) ** 2 for v in tree.values()))
    return jnp.sqrt(jnp.sum(tree ** 2))
''', "any depth"),
        ('''
def tree_l2_norm(tree):
    return sum(jnp.linalg.norm(leaf) for leaf in jax.tree.leaves(tree))  # sum of norms, not the norm
''', "is wrong"),
        ('''
def tree_l2_norm(tree):
    return jnp.sqrt(sum(jnp.sum(leaf) ** 2 for leaf in jax.tree.leaves(tree)))  # squares the sums
''', "is wrong"),
        ('''
def tree_l2_norm(tree):
    def walk(t):
        if isinstance(t, dict):
            return sum(walk(v) for v in t.values())
        if isinstance(t, (list, tuple)):
            return sum(walk(v) for v in t)
        return jnp.sum(t ** 2)  # None is not a leaf: None ** 2 fails
    return jnp.sqrt(walk(tree))
''', "None"),
    ],
    "sgd_update": [
        ('''
def sgd_update(params, grads, lr):
    # the right numbers, but a flat list instead of the structure of params
    return [p - lr * g for p, g in zip(jax.tree.leaves(params), jax.tree.leaves(grads))]
''', "structure"),
        ('''
def sgd_update(params, grads, lr):
    new = params  # not a copy: the caller's dict is updated in place
    for name in new:
        new[name] = jax.tree.map(lambda p, g: p - lr * g, params[name], grads[name])
    return new
''', "in place"),
        ('''
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda g, p: p - lr * g, params, grads)  # arguments swapped
''', "is wrong"),
        ('''
def sgd_update(params, grads, lr):
    return {k: params[k] - lr * grads[k] for k in params}  # a flat dict only
''', "any depth"),
        ('''
def sgd_update(params, grads, lr):
    step = float(lr)  # needs a concrete learning rate: breaks under jit
    return jax.tree.map(lambda p, g: p - step * g, params, grads)
''', "concrete value"),
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
''', "not registered"),
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
''', "static aux data"),
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
''', "round trip"),
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
''', "is wrong"),
    ],
}
