"""Where things are: codemode's own folders (``user_dirs``) and its configuration file,
read raw (``config_file``); the programs it starts on the host, found outside every
writable root (``host_programs``); the repository around a folder (``repository``).

The ground floor: every layer asks here, so each answer is computed one way. The
validated configuration is ``codemode.config``, a layer up (its model names the
sandbox's and the providers' settings)."""
