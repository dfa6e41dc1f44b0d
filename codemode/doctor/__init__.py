"""``interpreter doctor``: the machine's checks (``checks``) and, with ``--local``, the
model servers found on this machine (``local_models``)."""
