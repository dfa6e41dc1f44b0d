"""codemode's own Python process: which process is the command's own (``entry``) and
ending it without the interpreter's teardown (``fast_exit``). docs/startup.md says
what each is for. Nothing is imported at package import."""
