import os
X = 1
