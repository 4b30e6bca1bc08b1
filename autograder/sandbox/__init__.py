"""Containment: the kernel's and the program runner's view of the machine, their limits, uid and namespaces."""
