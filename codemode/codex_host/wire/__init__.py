"""The wire: protobuf messages (generated from the .proto beside them), gRPC on HTTP/2
with h2, the decode budget, and reading stdin whatever it is."""
