"""codemode's own Python process: which process is the command's own (``entry``),
ending it without the interpreter's teardown (``fast_exit``), and running an entry
point's event loop so that a Ctrl-C is never held up (``interruptible``).
docs/startup.md says what the first two are for. Nothing is imported at package
import."""
