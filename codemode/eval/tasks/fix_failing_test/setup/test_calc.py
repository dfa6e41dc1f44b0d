from calc import add, mul

assert mul(2, 3) == 6
assert add(2, 3) == 5, 'add is wrong'
print('all tests passed')
