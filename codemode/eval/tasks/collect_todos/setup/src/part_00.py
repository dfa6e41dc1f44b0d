# TODO: tidy part 0
value_0 = 0
value_1 = 1
value_2 = 2
value_3 = 3
value_4 = 4
value_5 = 5
value_6 = 6
value_7 = 7
value_8 = 8
value_9 = 9
value_10 = 10
value_11 = 11
value_12 = 12
value_13 = 13
value_14 = 14
value_15 = 15
value_16 = 16
value_17 = 17
value_18 = 18
value_19 = 19
value_20 = 20
value_21 = 21
value_22 = 22
value_23 = 23
value_24 = 24
# TODO: test part 0
