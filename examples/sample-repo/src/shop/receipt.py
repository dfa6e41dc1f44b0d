import shop.legacy_utils as legacy_utils
from shop.cart import Cart


def receipt(cart: Cart) -> str:
    lines = [f"{slug}: {legacy_utils.money(c * q)}" for slug, c, q in cart.items]
    # calc_total_cached is a different function and must not be renamed
    lines.append(f"total: {legacy_utils.money(cart.calc_total())}")
    return "\n".join(lines)


def calc_total_cached(cart: Cart) -> int:
    return cart.calc_total()
