import os

NAME_1 = 'm1'
