from shop.cart import Cart


def test_calc_total():
    cart = Cart()
    cart.add("Tea", 300, 3)
    assert cart.calc_total() == 900
