import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shop.cart import Cart

cart = Cart()
cart.add("pen", 2.0, 5)
cart.add("book", 15.0)
assert cart.subtotal() == 25.0
assert cart.total() == 25.0
assert cart.total(region="high") == 30.0
assert cart.total(discount_percent=10) == 22.5, cart.total(discount_percent=10)
print("all tests passed")
