#!/usr/bin/env python3
from shop.cart import Cart
from shop.legacy_utils import money

cart = Cart()
cart.add("Blue Mug", 1250, 2)
print("calc_total:", money(cart.calc_total()))
