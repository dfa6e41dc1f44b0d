print("y")
