"""Sandbox: execpolicy on parsed shell commands, process confinement (bubblewrap, seccomp,
Landlock) and approval modes. Every tool call, including those made from code mode, passes
through it. Filled in by the sandbox issue.
"""
