"""A small shop: carts, prices, taxes."""
