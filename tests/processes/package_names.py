"""The package's names, in a fresh process (test_package_api reads the lines it prints):
what ``import autograder`` and ``autograder.judge`` import before a name is used; whether
``ag.review`` stays the function once ``autograder.review`` is imported; the names of either
``__all__`` that are not their module's own object; an unknown name's error; the packages whose
``__all__`` differs from the names they load."""
import sys

import autograder as ag
import autograder.judge as judge

print(sorted(m for m in ("numpy", "jax", "autograder.numerics", "autograder.feedback",
                         "autograder.judge.kernel", "autograder.wire") if m in sys.modules))
import autograder.review  # noqa: E402 - after reading what the packages imported alone

print(ag.review is autograder.review is sys.modules["autograder.review"].review)
wrong = []
for pkg in (ag, judge):
    for name in pkg.__all__:
        obj = getattr(pkg, name)
        home = getattr(obj, "__module__", None)
        if home is not None and home.startswith("autograder") and getattr(sys.modules[home], name) is not obj:
            wrong.append(name)
print(wrong, set(ag.__all__) <= set(dir(ag)), ag.numerics.__name__)
try:
    ag.no_such_name  # noqa: B018 - the lookup is the test
except AttributeError as exc:
    print("AttributeError", exc)
print([p.__name__ for p in (ag, judge) if sorted(p.__all__) != sorted(p._HOME)])  # one list of names
