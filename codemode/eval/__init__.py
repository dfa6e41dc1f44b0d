"""interpreter eval: which harness and dialect a model does best with, measured on a task suite."""
