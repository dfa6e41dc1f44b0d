"""Git's configuration and hooks kept as they were around each confined command.

- ``host_git``: how codemode runs git on the host (no command a repository chose)
- ``git_named``: the files a repository's configuration names (hooks paths, includes)
- ``git_guard``: the snapshot before a command and the repair after it
- ``git_sanity``: repositories a command created, set aside before git reads them
- ``keeper``: all of the above around each command of a session
"""
