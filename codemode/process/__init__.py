"""codemode's own Python process: started without importing what it will not use
(``httpx_cli``) and ended without the interpreter's teardown (``fast_exit``).
docs/startup.md says what each saves. Nothing is imported at package import."""
