import os

NAME_2 = 'm2'
