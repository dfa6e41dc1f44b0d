"""The host's race-free access to folders a program could have shaped.

``beneath`` walks a path one component at a time from a root's descriptor (no link
followed out of the roots, a swapped component makes the step fail and retry), and
``writer`` is the one writer every write of codemode's own process into a workspace,
repository or copy goes through (``tests/test_host_write_guard.py`` holds the rest to
it). Below the sandbox and the tools, so both use it; which names are protected is the
caller's rule, passed in (``tools.fs.guard`` for the file tools).
"""
